"""A sync call that times out but cannot be stopped keeps its resource until its thread
returns, and no retry overlaps it (``engine/runners.py``, ``engine/attempts.py``)."""

from __future__ import annotations

import threading
from typing import Any

import planrail
from planrail.engine.executor import Execution
from planrail.engine.runners import LocalRunner
from planrail.policies.limits import RunPolicy


async def test_a_timed_out_sync_call_holds_its_resource_until_its_thread_returns() -> None:
    """``stuck`` (keyed, ``timeout`` 0.05, three attempts) blocks its thread past its timeout
    on a resource limited to one call; ``after`` (same resource, runs once ``stuck`` has
    finished either way) starts only once ``stuck``'s thread has returned: it never sees the
    stuck call still running. ``stuck`` is not retried while its call runs, and the runner
    counts it abandoned until then."""
    running = threading.Event()
    release = threading.Event()
    starts: list[str] = []
    seen_running: list[bool] = []
    runner = LocalRunner()

    @planrail.tool(side_effects="keyed", timeout=0.05, resource="db", retry={"max_attempts": 3})
    def stuck() -> str:
        """Blocks until released, well past its timeout."""
        starts.append("stuck")
        running.set()
        release.wait(30)
        running.clear()
        return "late"

    @planrail.tool(side_effects="none", resource="db")
    def after() -> str:
        """Notes whether the stuck call was still running when it started."""
        seen_running.append(running.is_set())
        return "ok"

    abandoned: list[int] = []

    class Releaser:
        """Once the run has given up on ``s`` (its step failed), releases its thread."""

        def on_event(self, event: Any) -> None:
            if event.step_id == "s" and str(event.type) == "step_failed":
                abandoned.append(runner.abandoned)
                release.set()

    plan = planrail.validate(
        {
            "goal": "abandoned",
            "steps": [
                {"id": "s", "tool": "stuck", "args": {}},
                {
                    "id": "a",
                    "tool": "after",
                    "args": {},
                    "depends_on": ["s"],
                    "join": "all_finished",
                },
            ],
        },
        [stuck, after],
    ).raise_for_errors()
    policy = RunPolicy(resources={"db": {"max_concurrency": 1}})
    result = await Execution(
        plan,
        [stuck, after],
        policy=policy,
        tool_runner=runner,
        observers=[Releaser()],
        approve=True,
    ).run()
    await runner.aclose()

    assert result.steps["s"].status == "failed"
    assert result.steps["s"].error is not None
    assert result.steps["s"].error["type"] == "AttemptTimeoutError"
    assert starts == ["stuck"], "no retry overlapped the call still running"
    assert abandoned == [1], "counted abandoned while its thread ran"
    assert result.steps["a"].status == "succeeded"
    assert seen_running == [False]
