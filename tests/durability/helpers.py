"""In-process doubles for the resume tests: a ledger, tools that write to it, and a store that
"dies" (drops every write from a chosen moment on, as a killed process would).

A crash is simulated by :class:`DyingStore`: once :meth:`DyingStore.die` is called nothing more
reaches the real store (commits, lease renewals and releases are dropped), so the store holds
exactly what a process killed at that moment would have left. The test then cancels the
execution and resumes from the real store with a new :class:`Execution` whose clock is past the
dead runner's lease.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel

import planrail
from planrail.engine.executor import Execution
from planrail.plan.model import Plan
from planrail.plan.tools import Tool
from planrail.store import Store
from planrail.store.detach import Detachable
from planrail.testing import FakeClock

LEASE_TTL = 30.0
WALL = 1_700_000_000.0


class Token(BaseModel):
    step: str
    token: str


@dataclass
class Call:
    step: str
    key: str
    inputs: list[str]


@dataclass
class Ledger:
    """Every tool call, and the effects they made (deduplicated by key for keyed tools)."""

    calls: list[Call] = field(default_factory=list)
    effects: dict[str, Token] = field(default_factory=dict)
    """Effect key -> the token it produced; unsafe tools use a fresh key per call."""
    fail_once: set[str] = field(default_factory=set)
    """Steps whose first call raises (then they succeed)."""
    crash: dict[str, Literal["before_effect", "after_effect"]] = field(default_factory=dict)
    """Steps whose first call makes the store die, before or after the effect, then hangs."""
    store: DyingStore | None = None
    died: asyncio.Event = field(default_factory=asyncio.Event)

    def called(self, step: str) -> list[Call]:
        return [c for c in self.calls if c.step == step]

    def effects_of(self, step: str) -> list[Token]:
        return [t for t in self.effects.values() if t.step == step]

    async def perform(self, ctx: planrail.StepContext, step: str, inputs: list[str], keyed: bool):
        self.calls.append(Call(step, ctx.idempotency_key, list(inputs)))
        first = len(self.called(step)) == 1
        if step in self.fail_once and first:
            raise RuntimeError(f"{step}: upstream refused")
        mode = self.crash.get(step) if first else None
        if mode == "before_effect":
            await self._die()
        key = ctx.idempotency_key if keyed else f"{ctx.idempotency_key}#{len(self.calls)}"
        token = self.effects.setdefault(key, Token(step=step, token=f"{step}-{len(self.calls)}"))
        if mode == "after_effect":
            await self._die()
        return token

    async def _die(self) -> None:
        assert self.store is not None
        self.store.die()
        self.died.set()
        await asyncio.Event().wait()  # the process is gone: this call never returns


def make_tools(ledger: Ledger) -> list[Tool]:
    """``keyed`` and ``unsafe`` tools writing to ``ledger``."""

    @planrail.tool(side_effects="keyed")
    async def keyed(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Token:
        """Honours its idempotency key."""
        return await ledger.perform(ctx, step, inputs, keyed=True)

    @planrail.tool(side_effects="unsafe")
    async def unsafe(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Token:
        """Does not honour keys: a repeat is a second effect."""
        return await ledger.perform(ctx, step, inputs, keyed=False)

    return [keyed, unsafe]


def make_plan(tools: list[Tool], b_tool: str = "keyed", c_arg: str = "token") -> Plan:
    """``a -> b -> c`` and ``f -> g`` (two independent branches)."""

    def step(sid: str, tool: str, deps: Sequence[str]) -> dict[str, Any]:
        field_ = c_arg if sid == "c" else "token"
        return {
            "id": sid,
            "tool": tool,
            "args": {"step": sid, "inputs": [f"${{{d}.{field_}}}" for d in deps]},
            "depends_on": list(deps),
        }

    doc = {
        "goal": "resume semantics",
        "steps": [
            step("a", "keyed", []),
            step("b", b_tool, ["a"]),
            step("c", "keyed", ["b"]),
            step("f", "keyed", []),
            step("g", "keyed", ["f"]),
        ],
    }
    return planrail.validate(doc, tools).raise_for_errors()


def fan_out_plan(tools: list[Tool], max_parallel: int) -> Plan:
    """``src`` (a read-only list) then ``pay``: ``pay(n=item)`` for each item of it."""
    return planrail.validate(
        {
            "goal": "pay everyone once",
            "steps": [
                {"id": "src", "tool": "source", "args": {}},
                {
                    "id": "pay",
                    "tool": "pay",
                    "for_each": "${src}",
                    "args": {"n": "${item}"},
                    "max_parallel": max_parallel,
                    "depends_on": ["src"],
                },
            ],
        },
        tools,
    ).raise_for_errors()


class DyingStore(Detachable):
    """A :class:`~planrail.store.Store` that nothing reaches once :meth:`die` was called (its
    switch turned off: :class:`~planrail.store.detach.Detachable`), as a runner killed at that
    moment would leave the database. Closing it leaves ``inner`` open: it is the test's."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.inner = inner

    def die(self) -> None:
        self.detach()


async def crash_run(
    plan: Plan, tools: list[Tool], ledger: Ledger, store: Store, run_id: str
) -> None:
    """Run until a ``ledger.crash`` step makes the store die, then kill the execution."""
    dying = DyingStore(store)
    ledger.store = dying
    ledger.died = asyncio.Event()
    execution = Execution(
        plan,
        tools,
        store=dying,
        run_id=run_id,
        clock=FakeClock(wall=WALL),
        lease_ttl=LEASE_TTL,
        approve=True,
    )
    task = asyncio.create_task(execution.run())
    died = asyncio.create_task(ledger.died.wait())
    done, _ = await asyncio.wait({task, died}, return_when=asyncio.FIRST_COMPLETED)
    assert died in done, f"the run ended without crashing: {task.result()}"
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def resume(
    plan: Plan, tools: list[Tool], store: Store, run_id: str, *, later: float = 100.0
) -> Any:
    """A new runner on ``run_id``, ``later`` seconds after the first (past its lease)."""
    execution = Execution(
        plan,
        tools,
        store=store,
        run_id=run_id,
        clock=FakeClock(wall=WALL + later),
        lease_ttl=LEASE_TTL,
        approve=True,
    )
    return await execution.run()


class Committed(NamedTuple):
    """What one commit carried: the intents' step keys, each step record's status, and the
    events as (type, step)."""

    intents: set[str]
    steps: dict[str, str]
    events: list[tuple[str, str | None]]


class CommitLog:
    """Wraps a store, keeping what each of its commits carried (:class:`Committed`)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.commits: list[Committed] = []

    def commit(self, **parts: Any) -> Any:
        self.commits.append(
            Committed(
                {i.step_key for i in parts.get("intents", ())},
                {s.step_id: str(s.status) for s in parts.get("steps", ())},
                [(e.type, e.step_id) for e in parts.get("events", ())],
            )
        )
        return self.inner.commit(**parts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
