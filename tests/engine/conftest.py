"""Fixtures for the engine tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _owned_main_thread_loop() -> Iterator[None]:
    """Own the main thread's "current" event loop for the session, and close it at the end.

    pytest-asyncio (1.5 on Python 3.11) calls ``asyncio.get_event_loop()`` around async tests,
    which creates a loop when none is set and never closes it; once a later test replaces it
    (a sync test calling ``asyncio.run``, or the next async test) it is reported as an unclosed
    event loop — an error under ``filterwarnings = error`` (pytest-dev/pytest-asyncio#724).
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()
