"""Tools for the onboarding story, with real effects on a local SQLite "CRM".

The CRM file is ``$PLANRAIL_DEMO_CRM`` (default ``./.planrail/demo/crm.sqlite``). Each tool that
changes the CRM honours its idempotency key: calling it twice with the same key changes nothing
the second time and returns the first result — so a resumed run never onboards anyone twice.
Sleeps stand in for the latency of real upstreams, so the parallel steps are visible.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import planrail

SCHEMA = """
CREATE TABLE IF NOT EXISTS accounts (user_id TEXT PRIMARY KEY, name TEXT, email TEXT UNIQUE);
CREATE TABLE IF NOT EXISTS subscriptions (subscription_id TEXT PRIMARY KEY, user_id TEXT NOT NULL
    REFERENCES accounts(user_id), plan TEXT, monthly_price REAL);
CREATE TABLE IF NOT EXISTS workspaces (workspace_id TEXT PRIMARY KEY, user_id TEXT NOT NULL
    REFERENCES accounts(user_id), url TEXT);
CREATE TABLE IF NOT EXISTS outbox (message_id TEXT PRIMARY KEY, user_id TEXT NOT NULL
    REFERENCES accounts(user_id), subject TEXT, body TEXT);
CREATE TABLE IF NOT EXISTS effects (idempotency_key TEXT PRIMARY KEY, result TEXT NOT NULL);
"""

PRICES = {"free": 0.0, "pro": 29.0, "team": 99.0}
LATENCY = float(os.environ.get("PLANRAIL_DEMO_LATENCY", "0.4"))
"""Seconds each upstream call takes (set 0 in tests)."""


def crm_path() -> Path:
    return Path(os.environ.get("PLANRAIL_DEMO_CRM", ".planrail/demo/crm.sqlite"))


def connect() -> sqlite3.Connection:
    path = crm_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.executescript(SCHEMA)
    return conn


def _once(key: str, effect: Any) -> dict[str, Any]:
    """Run ``effect(conn)`` once per idempotency key, in one transaction with its record."""
    with closing(connect()) as conn, conn:
        row = conn.execute(
            "SELECT result FROM effects WHERE idempotency_key = ?", (key,)
        ).fetchone()
        if row is not None:
            return dict(json.loads(row[0]))
        result = effect(conn)
        conn.execute("INSERT INTO effects VALUES (?, ?)", (key, json.dumps(result)))
        return dict(result)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


class Account(BaseModel):
    user_id: str
    name: str
    email: str


class Price(BaseModel):
    plan: str
    monthly_price: float
    currency: str


class Subscription(BaseModel):
    subscription_id: str
    user_id: str
    plan: str


class Workspace(BaseModel):
    workspace_id: str
    url: str


class Email(BaseModel):
    message_id: str
    to: str


def _upstream_latency() -> None:
    """Stand in for a real upstream's latency, so the parallel steps are visible."""
    # A tool's own wait, in its worker thread, as a real HTTP call would take: not planrail's
    # time, so it does not go through the run's clock.
    time.sleep(LATENCY)  # noqa: TID251


@planrail.tool(side_effects="none", resource="billing")
def lookup_price(plan: str) -> Price:
    """Look up the monthly price of a plan (read-only)."""
    _upstream_latency()
    if plan not in PRICES:
        raise ValueError(f"unknown plan {plan!r}; plans: {', '.join(PRICES)}")
    return Price(plan=plan, monthly_price=PRICES[plan], currency="EUR")


@planrail.tool(side_effects="keyed", resource="crm")
def create_account(name: str, email: str, ctx: planrail.StepContext) -> Account:
    """Create a customer account in the CRM."""
    _upstream_latency()

    def effect(conn: sqlite3.Connection) -> dict[str, Any]:
        user_id = _new_id("usr")
        conn.execute("INSERT INTO accounts VALUES (?, ?, ?)", (user_id, name, email))
        return {"user_id": user_id, "name": name, "email": email}

    return Account.model_validate(_once(ctx.idempotency_key, effect))


@planrail.tool(side_effects="keyed", resource="billing")
def create_subscription(
    user_id: str, plan: str, monthly_price: float, ctx: planrail.StepContext
) -> Subscription:
    """Subscribe an existing account to a plan."""
    _upstream_latency()

    def effect(conn: sqlite3.Connection) -> dict[str, Any]:
        sub_id = _new_id("sub")
        conn.execute(
            "INSERT INTO subscriptions VALUES (?, ?, ?, ?)", (sub_id, user_id, plan, monthly_price)
        )
        return {"subscription_id": sub_id, "user_id": user_id, "plan": plan}

    return Subscription.model_validate(_once(ctx.idempotency_key, effect))


@planrail.tool(side_effects="keyed", resource="crm")
def provision_workspace(user_id: str, name: str, ctx: planrail.StepContext) -> Workspace:
    """Create the customer's workspace."""
    _upstream_latency()

    def effect(conn: sqlite3.Connection) -> dict[str, Any]:
        ws_id = _new_id("ws")
        url = f"https://app.example.com/w/{ws_id}"
        conn.execute("INSERT INTO workspaces VALUES (?, ?, ?)", (ws_id, user_id, url))
        return {"workspace_id": ws_id, "url": url}

    return Workspace.model_validate(_once(ctx.idempotency_key, effect))


@planrail.tool(side_effects="keyed", resource="email")
def send_welcome_email(
    user_id: str, subscription_id: str, workspace_url: str, subject: str, ctx: planrail.StepContext
) -> Email:
    """Queue the welcome email in the outbox."""
    _upstream_latency()

    def effect(conn: sqlite3.Connection) -> dict[str, Any]:
        row = conn.execute("SELECT email FROM accounts WHERE user_id = ?", (user_id,)).fetchone()
        if row is None:
            raise ValueError(f"no account {user_id!r}")
        sub = conn.execute(
            "SELECT plan FROM subscriptions WHERE subscription_id = ? AND user_id = ?",
            (subscription_id, user_id),
        ).fetchone()
        if sub is None:
            raise ValueError(f"subscription {subscription_id!r} does not belong to {user_id!r}")
        msg_id = _new_id("msg")
        body = f"Your {sub[0]} plan is active. Your workspace: {workspace_url}"
        conn.execute("INSERT INTO outbox VALUES (?, ?, ?, ?)", (msg_id, user_id, subject, body))
        return {"message_id": msg_id, "to": row[0]}

    return Email.model_validate(_once(ctx.idempotency_key, effect))


TOOLS = [lookup_price, create_account, create_subscription, provision_workspace, send_welcome_email]
