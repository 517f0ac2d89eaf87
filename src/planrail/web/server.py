"""Serving the dashboard with uvicorn, in the foreground (``planrail ui``) or in a thread (tests,
benchmarks)."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import uvicorn

from planrail.web.app import Dashboard, create_app

__all__ = ["DashboardServer", "free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class DashboardServer:
    """A uvicorn server for one :class:`Dashboard` on ``host:port``."""

    def __init__(self, dash: Dashboard, host: str, port: int) -> None:
        self.dash = dash
        self.host = host
        self.port = port
        config = uvicorn.Config(
            create_app(dash),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def url(self, path: str = "/", *, token: bool = True) -> str:
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        query = f"?token={self.dash.guard.token}" if token else ""
        if ":" in shown:  # an IPv6 address: bracketed in a URL
            shown = f"[{shown}]"
        return f"http://{shown}:{self.port}{path}{query}"

    def run(self, sock: socket.socket | None = None) -> list[str]:
        """Serve until interrupted (Ctrl-C), on ``sock`` if given (see :func:`listen`); then
        cancel the runs it resumed (:meth:`Dashboard.stop_resumes`). Returns the ids of those
        given up still running."""
        try:
            self.server.run(sockets=[sock] if sock is not None else None)
        finally:
            left = self.dash.stop_resumes()
        return left

    def start(self) -> DashboardServer:
        """Serve in a background thread; returns once it accepts connections."""

        def serve() -> None:
            asyncio.run(self.server.serve())

        self._thread = threading.Thread(target=serve, name="planrail-ui", daemon=True)
        self._thread.start()
        started = threading.Event()

        def wait() -> None:
            while not self.server.started and self._thread is not None:
                if not self._thread.is_alive():
                    break
                started.wait(0.02)

        wait()
        if not self.server.started:
            raise RuntimeError(f"the dashboard did not start on {self.host}:{self.port}")
        return self

    def stop(self) -> list[str]:
        """Stop serving, then cancel the runs it resumed (:meth:`Dashboard.stop_resumes`).
        Returns the ids of those given up still running."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        return self.dash.stop_resumes()

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
