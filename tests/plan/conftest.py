"""Fixtures for the plan-layer tests: the named miniature plans under ``tests/data/plans``."""

from __future__ import annotations

import pytest

from planrail.plan.catalog import load_catalog
from planrail.plan.tools import ToolRegistry

from .helpers import PLANS


@pytest.fixture(scope="session")
def catalog() -> ToolRegistry:
    """The tools the miniature plans call (``tests/data/plans/tools.catalog.json``)."""
    return ToolRegistry(load_catalog(PLANS / "tools.catalog.json"))
