"""Fixtures of the observability tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .helpers import Otel, otel_setup


@pytest.fixture
def otel() -> Iterator[Otel]:
    """In-memory span exporter and metric reader, on providers of their own (not global)."""
    pytest.importorskip("opentelemetry.sdk", reason="needs the [otel] extra")
    yield from otel_setup()
