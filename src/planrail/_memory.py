"""Keeping the cyclic garbage collector off data that outlives the work creating it.

Two tools, one per kind of work. :func:`collector_paused` is for the validator, which makes
millions of objects and no reference cycles: the collector is simply off while it runs.
:func:`long_lived` is for a run, whose tools may make cycles. A run keeps everything it
produces (outputs, records, arguments) until it ends, and the plan outlives it; CPython's full
collections re-scan all of that, again and again as it grows (``python -m bench.overhead``
reports their time per step). :func:`long_lived` freezes (``gc.freeze``) what exists when the
block starts, and again right after each full collection inside it, so only the survivors of a
complete collection are frozen — cyclic garbage is never frozen, and whatever becomes garbage
later is still collected once the block ends (``gc.unfreeze``). Process-wide, like the collector.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["collector_paused", "long_lived"]

_depth = 0


def _freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info.get("generation") == 2:
        gc.freeze()


@contextmanager
def long_lived() -> Iterator[None]:
    """Freeze what lives now, and the survivors of each full collection, until the block ends.

    Blocks may nest or overlap (two runs in one process): the last one to end unfreezes.
    """
    global _depth
    gc.freeze()
    if _depth == 0:
        gc.callbacks.append(_freeze_survivors)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.callbacks.remove(_freeze_survivors)
            gc.unfreeze()


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector is off inside the block, for work that makes no reference cycles.

    It is switched back on only if it was on: nested and concurrent blocks are safe.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
