"""The ``runner`` fixture: every contract test runs on the local runner and on Ray.

The Ray half is marked ``ray`` (``pytest -m ray`` selects it, ``-m 'not ray'`` leaves it out)
and is skipped cleanly when Ray is not installed. One real local Ray runtime
(``ray.init(num_cpus=2)``) serves the whole test session, and one :class:`RayRunner` with its
warm actor pool serves every test (a run closes only a runner it created).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .ledger import Ledger

TESTS = Path(__file__).resolve().parents[1]
"""On the workers' ``sys.path``, so they import ``runners.tools`` as this process does."""


@pytest.fixture(scope="session")
def ray_runtime() -> Iterator[Any]:
    """One local Ray runtime (two CPUs) for the whole session."""
    ray = pytest.importorskip("ray")
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH")) if p)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def ray_runner(ray_runtime: Any) -> Iterator[Any]:
    """The session's RayRunner (attached to ``ray_runtime``; it never shuts Ray down)."""
    from planrail.backends.ray import RayRunner

    # A graceful cancel (KeyboardInterrupt in the task) lands in milliseconds on a quiet machine
    # and took over half a second on a loaded one: the grace before forcing must not decide
    # whether the tests' tools get to record that they stopped.
    runner = RayRunner(max_concurrency=16, actors=2, cancel_grace=10.0)
    yield runner
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(runner.aclose())
    finally:
        loop.close()


@pytest.fixture(params=["local", pytest.param("ray", marks=pytest.mark.ray)])
def runner(request: pytest.FixtureRequest) -> Any:
    """The tool runner under test: ``None`` (the execution's own ``LocalRunner``) or the
    session's ``RayRunner``."""
    if request.param == "ray":
        return request.getfixturevalue("ray_runner")
    return None


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    """A fresh ledger; its blocking tools are let go at the end so none outlives the test (a
    sync call on the local runner cannot be stopped, only abandoned)."""
    found = Ledger(tmp_path)
    yield found
    found.let_go()
