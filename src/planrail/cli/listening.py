"""The address a serving command listens on (``planrail ui``, ``planrail mcp serve --http``):
checked, bound before anything is printed, and shown as a URL; every failure is exit 2."""

from __future__ import annotations

import socket

from rich.console import Console

from planrail.cli.common import ExitCode, fail

__all__ = ["check_address", "listen_or_exit", "url_host"]


def check_address(console: Console, host: str, port: int) -> None:
    """Exit 2 unless ``host`` resolves (``999.1.1.1``, a mistyped name)."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise _cannot(console, host, port, exc) from None


def listen_or_exit(console: Console, host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (0: any free port) and listening — connections made from
    now on wait in its backlog until the server takes them — or exit 2 (the address is taken,
    not this machine's, does not resolve)."""
    check_address(console, host, port)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except (OSError, OverflowError) as exc:
        sock.close()
        raise _cannot(console, host, port, exc) from None
    return sock


def url_host(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def _cannot(console: Console, host: str, port: int, exc: Exception) -> Exception:
    why = getattr(exc, "strerror", None) or str(exc)
    return fail(console, f"cannot listen on {url_host(host)}:{port}: {why}", ExitCode.USAGE)
