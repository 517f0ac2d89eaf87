"""Run ids in URLs, exactly: any text a run id may hold names its run's pages.

A run id is free text (``nightly/2026-12-03``, ``q?x``, ``100%``). Its links encode it as one
path segment (``/runs/nightly%2F2026-12-03``), but an ASGI server hands the app the path
already decoded, so the ``/`` it held splits the segment and the route is lost, and ``%41``
written in an id becomes ``A``. :class:`ExactSegments` rebuilds the path the routes match from
the request's ``raw_path``: each segment decoded once and encoded again whole, so every
segment stays one segment. Route parameters then hold encoded text, and the handlers read them
with :func:`param`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote, unquote_to_bytes

__all__ = ["ExactSegments", "param", "run_path"]


def run_path(run_id: str, suffix: str = "") -> str:
    """The dashboard path of run ``run_id`` (``/runs/<id>`` + ``suffix``), its id one segment."""
    return f"/runs/{quote(run_id, safe='')}{suffix}"


def param(request: Any, name: str) -> str:
    """The route parameter ``name`` of a request routed by :class:`ExactSegments`, decoded."""
    return unquote(request.path_params[name])


def _segment(raw: bytes) -> str:
    return quote(unquote_to_bytes(raw).decode("utf-8", "replace"), safe="")


class ExactSegments:
    """ASGI middleware: the path routes match is the raw path, each segment encoded whole.

    Without a ``raw_path`` (optional in ASGI), the decoded path's segments are encoded the
    same way, so :func:`param` reads every parameter alike.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            raw = scope.get("raw_path")
            if raw:
                path = "/".join(_segment(s) for s in raw.split(b"?", 1)[0].split(b"/"))
            else:
                path = "/".join(quote(s, safe="") for s in scope["path"].split("/"))
            scope = {**scope, "path": path}
        await self.app(scope, receive, send)
