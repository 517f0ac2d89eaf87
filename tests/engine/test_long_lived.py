"""``planrail._memory.long_lived``: what lives is kept out of full collections during a run;
cyclic garbage is still collected, and everything is handed back to the collector after."""

from __future__ import annotations

import gc
import weakref

import planrail
from planrail._memory import _freeze_survivors, long_lived


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def _cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_what_lives_is_frozen_for_the_block_and_unfrozen_after() -> None:
    gc.collect()
    assert gc.get_freeze_count() == 0
    keep = [Node() for _ in range(100)]
    with long_lived():
        frozen = gc.get_freeze_count()
        assert frozen >= 100
        assert _freeze_survivors in gc.callbacks
    assert gc.get_freeze_count() == 0
    assert _freeze_survivors not in gc.callbacks
    assert keep


def test_a_full_collection_inside_the_block_collects_cycles_then_freezes_survivors() -> None:
    gc.collect()
    with long_lived():
        before = gc.get_freeze_count()
        garbage = _cycle()
        alive = [Node() for _ in range(50)]
        gc.collect()  # a full collection: the cycle is freed, the survivors frozen
        assert garbage() is None
        assert gc.get_freeze_count() >= before + 50
        later = _cycle()  # made after the freeze: still collectable inside the block
        gc.collect()
        assert later() is None
    assert alive


def test_blocks_nest_and_the_last_one_to_end_unfreezes() -> None:
    gc.collect()
    outer = long_lived()
    outer.__enter__()
    with long_lived():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() > 0, "the outer block is still running"
    assert gc.callbacks.count(_freeze_survivors) == 1
    outer.__exit__(None, None, None)
    assert gc.get_freeze_count() == 0
    assert _freeze_survivors not in gc.callbacks


@planrail.tool(side_effects="none")
async def make_garbage(n: int) -> int:
    if n < 0:
        raise ValueError("a negative count")
    for _ in range(n):
        _cycle()
    gc.collect()
    return n


async def test_a_run_unfreezes_when_it_ends_even_when_it_fails() -> None:
    gc.collect()
    plan = {
        "steps": [
            {"id": "a", "tool": "make_garbage", "args": {"n": 10}},
            {"id": "b", "tool": "make_garbage", "args": {"n": -1}, "depends_on": ["a"]},
        ]
    }
    result = await planrail.prepare(plan, [make_garbage]).run()
    assert result.status == "failed"
    assert gc.get_freeze_count() == 0
    assert _freeze_survivors not in gc.callbacks
