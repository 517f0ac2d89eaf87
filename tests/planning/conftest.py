"""Fixtures for the planning tests: a small toolset that records its calls, a fake clock,
and a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from planrail.llm.openai_client import OpenAIClient
from planrail.plan.define import tool
from planrail.plan.tools import Tool
from planrail.testing.llm import Scripted, ScriptedLLM
from planrail.testing.llm_server import LLMTestServer

from .plans import good_plan


class SearchResult(BaseModel):
    titles: list[str]
    top: str


class Account(BaseModel):
    user_id: str
    name: str


class Sent(BaseModel):
    message_id: str


@dataclass
class Kit:
    """Tools that record every call (name, arguments), in order."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    searched: threading.Event = field(default_factory=threading.Event)
    """Set when ``search`` is called (a test server may wait for it)."""
    fail_email: int = 0
    """How many calls of ``send_email`` fail before one succeeds."""
    tools: list[Tool] = field(default_factory=list)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def make_kit() -> Kit:
    kit = Kit()

    @tool(side_effects="none")
    async def search(query: str) -> SearchResult:
        """Search the paper index; read-only."""
        kit.calls.append(("search", {"query": query}))
        kit.searched.set()
        await asyncio.sleep(0)
        return SearchResult(titles=[f"{query} 1", f"{query} 2"], top=f"{query} 1")

    @tool(side_effects="keyed")
    def create_account(name: str, email: str) -> Account:
        """Create a customer account."""
        kit.calls.append(("create_account", {"name": name, "email": email}))
        return Account(user_id="u_1", name=name)

    @tool(side_effects="unsafe")
    def send_email(user_id: str, subject: str, body: str) -> Sent:
        """Send an email to a user."""
        kit.calls.append(("send_email", {"user_id": user_id, "subject": subject, "body": body}))
        if kit.fail_email > 0:
            kit.fail_email -= 1
            raise ValueError("mail server rejected the message")
        return Sent(message_id=f"m_{len(kit.calls)}")

    kit.tools = [search, create_account, send_email]
    return kit


def streamed_good_plan(
    kit: Kit, *more: Any, plan: dict[str, Any] | None = None, held: bool = True
) -> ScriptedLLM:
    """A model that streams ``plan`` (default the good plan) in two chunks, the first ending
    with its read-only ``find`` step; ``held``, the second once ``find`` has been called, so
    the run has started before its plan is whole. ``more``: the answers after it."""
    text = json.dumps(good_plan() if plan is None else plan)
    cut = text.index("}}, ") + 3  # just past the find step

    async def hold(index: int, _chunk: str) -> None:
        if held and index == 1:
            assert await asyncio.to_thread(kit.searched.wait, 10)

    return ScriptedLLM([Scripted(text, chunks=[text[:cut], text[cut:]]), *more], on_chunk=hold)


@pytest.fixture
def kit() -> Kit:
    """A fresh recording toolset: search (read-only), create_account, send_email."""
    return make_kit()


class FakeClock:
    """Virtual time: ``sleep`` returns at once and advances the clock; sleeps are recorded."""

    def __init__(self) -> None:
        self.t = 1_000.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds
        await asyncio.sleep(0)


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock recording every sleep."""
    return FakeClock()


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    """A started local OpenAI-compatible server (scripted per test)."""
    with LLMTestServer() as srv:
        yield srv


@pytest.fixture
async def openai_llm(server: LLMTestServer) -> AsyncIterator[OpenAIClient]:
    """An OpenAI client (the real SDK) pointed at the test server, closed after the test."""
    async with OpenAIClient("test-model", base_url=server.url, timeout=5.0) as llm:
        yield llm
