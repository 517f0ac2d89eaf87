"""Tools for ``bench.isolation`` (a module of their own: a worker process imports them)."""

from __future__ import annotations

import planrail


@planrail.tool(side_effects="none")
def add_one(x: int) -> int:
    """x + 1, in a thread."""
    return x + 1


@planrail.tool(side_effects="none", isolation="process")
def add_one_isolated(x: int) -> int:
    """x + 1, in a worker process."""
    return x + 1
