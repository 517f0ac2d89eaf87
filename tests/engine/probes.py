"""Probe tools that record what the executor did to them, and plans built from named graphs.

A probe records, for every call, the loop time it started and ended (exact under ``looptime``),
the arguments it received, its :class:`~planrail.StepContext` and how many probes were running
at once. Plans built by :func:`probe_plan` make every step pass its dependencies' whole outputs
(``${d}``), a field (``${d.token}``) and a nested value (``${d.payload.items}``), so the tests
can check that every argument equals the output it references.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic

import planrail
from planrail.engine.result import RunResult
from planrail.plan.tools import StepContext, Tool
from planrail.runs import prepare

from .graphs import Graph

__all__ = [
    "LoopClock",
    "ProbeCall",
    "ProbeFailure",
    "Recorder",
    "probe_plan",
    "run_graph",
]


class LoopClock:
    """A :class:`~planrail.types.Clock` on the event loop's time, counted from ``origin``:
    virtual and exact under ``looptime``, so ``started_at``/``finished_at`` compare with ``==``."""

    def __init__(self, origin: float = 0.0) -> None:
        self.origin = origin

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self.origin

    def monotonic(self) -> float:
        return self.now()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ProbeFailure(Exception):
    """What a probe raises when its step is told to fail."""


class ProbeOut(pydantic.BaseModel):
    step: str
    token: str
    payload: dict[str, Any]


@dataclass
class ProbeCall:
    """One call of a probe."""

    step: str
    start: float
    args: dict[str, Any]
    ctx: StepContext
    end: float | None = None
    outcome: str = "running"
    """``running``, then ``returned``, ``raised`` or ``cancelled``."""


@dataclass
class Recorder:
    """Everything the probes saw, in call order."""

    calls: list[ProbeCall] = field(default_factory=list)
    returned: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What each step's probe returned, as plain JSON."""
    running: int = 0
    max_running: int = 0
    started: dict[str, asyncio.Event] = field(default_factory=dict)
    t0: float = 0.0
    """Loop time that counts as 0 in ``start``/``end`` (the start of the run)."""

    def by_step(self) -> dict[str, ProbeCall]:
        """The one call of each step (fails if a step was called twice)."""
        out: dict[str, ProbeCall] = {}
        for c in self.calls:
            assert c.step not in out, f"step {c.step} was called twice"
            out[c.step] = c
        return out

    def started_event(self, step: str) -> asyncio.Event:
        """Set when ``step``'s probe is entered."""
        return self.started.setdefault(step, asyncio.Event())

    def tool(self) -> Tool:
        """An async tool named ``probe`` that records into this recorder."""

        @planrail.tool(name="probe", side_effects="none")
        async def probe(
            ctx: StepContext,
            step: str,
            duration: float = 1.0,
            fail: bool = False,
            inputs: dict[str, Any] | None = None,
            fields: dict[str, Any] | None = None,
            items: dict[str, Any] | None = None,
        ) -> ProbeOut:
            """Sleep ``duration`` (loop time), then return or raise; record everything."""
            loop = asyncio.get_running_loop()
            args = {
                "step": step,
                "duration": duration,
                "fail": fail,
                "inputs": inputs,
                "fields": fields,
                "items": items,
            }
            call = ProbeCall(step, loop.time() - self.t0, args, ctx)
            self.calls.append(call)
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self.started_event(step).set()
            try:
                await asyncio.sleep(duration)
            except asyncio.CancelledError:
                call.outcome = "cancelled"
                raise
            finally:
                self.running -= 1
                call.end = loop.time() - self.t0
            if fail:
                call.outcome = "raised"
                raise ProbeFailure(f"{step} failed on purpose")
            out = ProbeOut(
                step=step,
                token=f"{step}@{ctx.run_id}",
                payload={"items": [step, len(inputs or {})], "by": step},
            )
            self.returned[step] = out.model_dump()
            call.outcome = "returned"
            return out

        return probe


def probe_plan(
    graph: Graph,
    duration: float | Mapping[str, float] = 1.0,
    fail: Collection[str] = (),
) -> dict[str, Any]:
    """A plan running ``probe`` once per step of ``graph``; each step references every one of
    its dependencies three ways (whole output, a field, a nested value)."""
    steps = []
    for sid, deps in graph.deps.items():
        d = duration if isinstance(duration, int | float) else duration[sid]
        steps.append(
            {
                "id": sid,
                "tool": "probe",
                "args": {
                    "step": sid,
                    "duration": d,
                    "fail": sid in fail,
                    "inputs": {x: f"${{{x}}}" for x in deps},
                    "fields": {x: f"${{{x}.token}}" for x in deps},
                    "items": {x: f"${{{x}.payload.items}}" for x in deps},
                },
                "depends_on": list(deps),
            }
        )
    return {"goal": f"probe {graph.name}", "steps": steps}


async def run_graph(
    graph: Graph,
    recorder: Recorder,
    *,
    duration: float | Mapping[str, float] = 1.0,
    fail: Collection[str] = (),
    **options: Any,
) -> RunResult:
    """Validate and run ``probe_plan(graph, ...)`` on the loop clock."""
    plan = probe_plan(graph, duration, fail)
    recorder.t0 = asyncio.get_running_loop().time()
    clock = LoopClock(recorder.t0)
    return await prepare(plan, [recorder.tool()], clock=clock, **options).run()
