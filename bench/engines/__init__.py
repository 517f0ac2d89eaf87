"""Engines under test. Each module exposes ``run(dag, *, scale) -> EngineResult``.

Modules are imported lazily so that a missing optional library (or a planrail that does not yet
have the API the adapter expects) makes that one engine unavailable instead of breaking the run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from bench.engines.base import EngineResult, EngineUnavailable

__all__ = ["ENGINES", "EngineResult", "EngineUnavailable", "load"]

ENGINES: dict[str, str] = {
    "bare_asyncio": "bench.engines.bare_asyncio",
    "langgraph": "bench.engines.langgraph_engine",
    "dask_threaded": "bench.engines.dask_threaded",
    "planrail": "bench.engines.planrail_adapter",
}

Runner = Callable[..., EngineResult]


def load(name: str) -> Runner:
    """The engine's ``run`` function; raises EngineUnavailable with a reason if it cannot run."""
    try:
        module = importlib.import_module(ENGINES[name])
    except ImportError as exc:
        raise EngineUnavailable(f"{name}: import failed ({exc})") from exc
    check = getattr(module, "check_available", None)
    if check is not None:
        check()
    run: Runner = module.run
    return run
