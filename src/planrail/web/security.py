"""The dashboard's guard: who may look, who may act, and from where.

- **Host**: a request whose ``Host`` header names another host than the ones the server was
  started for is refused (400) before anything else — a page on another site that rebinds its
  DNS name to 127.0.0.1 reaches nothing.
- **Token**: the URL ``planrail ui`` prints carries a random token; opening it once sets an
  ``HttpOnly``, ``SameSite=Strict`` session cookie (derived from the token, never the token
  itself; named after the port, since browsers share a host's cookies across its ports and
  two dashboards on one machine would sign each other out) and redirects to the same page
  without the token. Without the cookie a page answers
  401 with a hint, an API call 401.
- **Actions** (every ``POST``): need the CSRF token the pages carry (``X-CSRF-Token`` header)
  and an ``Origin`` (or ``Referer``) of this server; otherwise 403.
- Every answer carries a strict Content-Security-Policy (scripts only from this server) and is
  never cached.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

__all__ = ["COOKIE", "CSRF_HEADER", "Guard", "new_token"]

COOKIE = "planrail_session"
CSRF_HEADER = "x-csrf-token"
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)

Scope = dict[str, Any]


def new_token() -> str:
    """A fresh random access token (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


def _derive(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


@dataclass
class Guard:
    """The checks, for a server reachable at ``hosts`` (host names, without port) on ``port``."""

    token: str
    port: int
    hosts: Iterable[str] = ("127.0.0.1", "localhost")
    _hosts: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self._hosts = frozenset(h.lower().strip("[]") for h in self.hosts)

    @property
    def session(self) -> str:
        return _derive(self.token, "session")

    @property
    def cookie_name(self) -> str:
        """``planrail_session_PORT``: a browser sends a host's cookies to all of its ports."""
        return f"{COOKIE}_{self.port}"

    @property
    def csrf(self) -> str:
        return _derive(self.token, "csrf")

    def host_ok(self, host: str | None) -> bool:
        """Whether a ``Host`` header names this server (one of its hosts, on its port)."""
        if not host:
            return False
        name, sep, port = host.rpartition(":")
        if not sep or not port.isdigit():  # no port given: the default one
            name, port = host, "80"
        if not (port.isascii() and len(port) <= 5) or int(port) != self.port:  # '²' isdigit
            return False
        return name.lower().strip("[]") in self._hosts

    def origin_ok(self, origin: str | None) -> bool:
        """Whether an ``Origin``/``Referer`` is this server."""
        if not origin:
            return False
        try:
            parts = urlsplit(origin)
        except ValueError:  # 'http://[::1' is no URL
            return False
        return parts.scheme == "http" and self.host_ok(parts.netloc)

    def has_session(self, cookie_header: str | None) -> bool:
        """Whether the ``Cookie`` header holds this server's session cookie. Read pair by pair
        (``http.cookies`` stops at the first cookie it cannot parse: another local app's
        ``prefs={"a":1}`` before ours would sign the user out)."""
        if not cookie_header:
            return False
        name = self.cookie_name
        for pair in cookie_header.split(";"):
            key, sep, value = pair.partition("=")
            if sep and key.strip() == name and hmac.compare_digest(value.strip(), self.session):
                return True
        return False

    def token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given, self.token)

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given, self.csrf)

    def cookie(self) -> str:
        return f"{self.cookie_name}={self.session}; HttpOnly; SameSite=Strict; Path=/"


class GuardMiddleware:
    """Applies a :class:`Guard` to every HTTP request of an ASGI app."""

    def __init__(self, app: Any, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        guard = self.guard
        if not guard.host_ok(headers.get("host")):
            await _plain(send, 400, "unexpected Host header: this dashboard answers only its own")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query:
            if not guard.token_ok(query.pop("token")):
                await _plain(send, 401, "wrong token: open the URL `planrail ui` printed")
                return
            rest = urlencode(query)
            location = _same_path(scope) + (f"?{rest}" if rest else "")
            await _send(send, 303, b"", [(b"location", location.encode()), _cookie(guard)])
            return
        if not guard.has_session(headers.get("cookie")):
            await _plain(
                send, 401, "not signed in: open the URL (with its token) that `planrail ui` printed"
            )
            return
        if scope.get("method", "GET") not in _SAFE:
            origin = headers.get("origin") or headers.get("referer")
            if not guard.origin_ok(origin):
                await _plain(send, 403, "cross-origin request refused")
                return
            if not guard.csrf_ok(headers.get(CSRF_HEADER)):
                await _plain(send, 403, "missing or wrong CSRF token")
                return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_COMMON]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


_COMMON = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
]


def _same_path(scope: Scope) -> str:
    """The request's path as it was sent (a run id's ``%2F`` kept), never ``//host/...``: a
    path that starts with two slashes is another site to a browser."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else quote(scope.get("path", "/"))
    return "/" + path.lstrip("/")


def _cookie(guard: Guard) -> tuple[bytes, bytes]:
    return (b"set-cookie", guard.cookie().encode())


async def _plain(send: Any, status: int, text: str) -> None:
    await _send(send, status, text.encode() + b"\n", [(b"content-type", b"text/plain")])


async def _send(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, *_COMMON, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
