"""Tools for the ``planrail mcp serve`` tests: read-only ones (one handing out a secret), ones
that change the world."""

from __future__ import annotations

from pydantic import BaseModel

import planrail


class Account(BaseModel):
    user_id: str
    name: str


@planrail.tool(side_effects="none")
def find(name: str) -> Account:
    """Look an account up (read-only); there is no account named Nobody."""
    if name == "Nobody":
        raise LookupError("no account named Nobody")
    return Account(user_id=f"usr_{name.lower()}", name=name)


@planrail.tool(side_effects="keyed")
def create(name: str, ctx: planrail.StepContext) -> Account:
    """Create an account (changes the world; honours its key)."""
    return Account(user_id=f"usr_{ctx.idempotency_key[-6:]}", name=name)


@planrail.tool(side_effects="unsafe", secret_params=["token"])
def send(to: str, token: str) -> str:
    """Send a message with a token (changes the world; the token is a secret)."""
    return f"sent to {to}"


API_KEY = "sk-served-4f1d9c"


@planrail.tool(side_effects="none", sensitivity="secret")
def api_key(name: str) -> dict[str, str]:
    """An API key (read-only; its output is a secret)."""
    return {"key": API_KEY, "name": name}


@planrail.tool(side_effects="none", secret_params=["token"])
def check_token(token: str) -> str:
    """Check a token (read-only); it is always rejected, and the error quotes it."""
    raise PermissionError(f"token {token} rejected")
