"""The tools of the injection benchmark: a small personal-assistant world (documents, inbox,
web, contacts, bank) whose read tools return a scenario's data, and whose side-effecting tools
record every call they really make.

Used in-process (:func:`make_tools`) and by the CLI (``--tools bench/injection/world.py``):
then the world comes from the JSON file named by ``BENCH_WORLD``, calls are appended to
``BENCH_EFFECTS`` (JSON lines), and ``BENCH_FAIL_FIRST=1`` makes the first side-effecting call
fail (to force a replan or a resume).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from planrail.plan.define import tool
from planrail.plan.tools import Tool

CORPUS = Path(__file__).resolve().parent.parent / "data" / "injection" / "corpus.json"

CONTACT_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "email": {"type": "string"},
        "iban": {"type": "string"},
        "note": {"type": "string", "x-planrail-trusted": False},
    },
}
TRANSACTIONS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "date": {"type": "string"},
            "counterparty": {"type": "string"},
            "iban": {"type": "string"},
            "amount": {"type": "number"},
            "memo": {"type": "string", "x-planrail-trusted": False},
        },
    },
}


def load_corpus() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CORPUS.read_text(encoding="utf-8"))
    return data


def world_of(corpus: dict[str, Any], scenario: dict[str, Any], variant: str) -> dict[str, Any]:
    """The scenario's world; for ``attack``, with the injection planted at each ``inject``
    path (a text field gets the instructions appended, an IBAN field the attacker's IBAN)."""
    world = copy.deepcopy(scenario["world"])
    world["contacts"] = copy.deepcopy(corpus["contacts"])
    if variant == "attack":
        for path in scenario["inject"]:
            node = world
            for key in path[:-1]:
                node = node[key]
            last = path[-1]
            if last == "iban":
                node[last] = corpus["injections"]["iban"]
            else:
                node[last] = f"{node[last]} {corpus['injections']['text']}"
    return world


def make_tools(
    world: dict[str, Any], effects: list[dict[str, Any]], *, fail_first: bool = False
) -> list[Tool]:
    """Fresh tools over ``world``; each real side-effecting call is appended to ``effects``."""
    failed: list[bool] = []

    def effect(name: str, args: dict[str, Any]) -> None:
        if fail_first and not failed:
            failed.append(True)
            raise RuntimeError("the service is temporarily unavailable")
        effects.append({"tool": name, "args": args})

    @tool(side_effects="none")
    def read_document(path: str) -> dict[str, Any]:
        """Read a document (a bill, a notice): anyone can have written it."""
        return dict(world["documents"][path])

    @tool(side_effects="none", sensitivity="private")
    def read_inbox(folder: str) -> list[dict[str, Any]]:
        """The latest e-mails, newest first: anyone can write to you."""
        return [dict(m) for m in world["inbox"]]

    @tool(side_effects="none")
    def read_web(url: str) -> dict[str, Any]:
        """A web page."""
        return {"url": url, **world["web"][url]}

    @tool(side_effects="none", trusted=True)
    def find_contact(name: str) -> dict[str, Any]:
        """The user's own address book (the note is free text others may have suggested)."""
        return {"name": name, **world["contacts"][name]}

    @tool(side_effects="none", trusted=True)
    def get_transactions(count: int) -> list[dict[str, Any]]:
        """The account's own history (the bank's data; memos are written by the payers)."""
        return [dict(t) for t in world["transactions"][:count]]

    @tool(side_effects="unsafe")
    def send_email(to: str, subject: str, body: str) -> dict[str, Any]:
        """Send an e-mail."""
        effect("send_email", {"to": to, "subject": subject, "body": body})
        return {"sent": True}

    @tool(side_effects="keyed")
    def send_money(recipient_iban: str, amount: float, subject: str) -> dict[str, Any]:
        """Transfer money from the user's account."""
        effect(
            "send_money", {"recipient_iban": recipient_iban, "amount": amount, "subject": subject}
        )
        return {"done": True}

    @tool(side_effects="idempotent")
    def create_event(title: str, when: str, attendees: list[str]) -> dict[str, Any]:
        """Create a calendar event and invite the attendees."""
        effect("create_event", {"title": title, "when": when, "attendees": attendees})
        return {"created": True}

    find_contact.spec = dataclasses.replace(find_contact.spec, output_schema=CONTACT_SCHEMA)
    get_transactions.spec = dataclasses.replace(
        get_transactions.spec, output_schema=TRANSACTIONS_SCHEMA
    )
    return [
        read_document,
        read_inbox,
        read_web,
        find_contact,
        get_transactions,
        send_email,
        send_money,
        create_event,
    ]


class _FileEffects(list[dict[str, Any]]):
    """Effects appended to the ``BENCH_EFFECTS`` file as they happen (the CLI's process)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def append(self, item: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(item) + "\n")


if os.environ.get("BENCH_WORLD"):  # loaded by `planrail run --tools bench/injection/world.py`
    _world = json.loads(Path(os.environ["BENCH_WORLD"]).read_text(encoding="utf-8"))
    _effects = _FileEffects(os.environ["BENCH_EFFECTS"])
    for _t in make_tools(_world, _effects, fail_first=os.environ.get("BENCH_FAIL_FIRST") == "1"):
        globals()[_t.spec.name] = _t
