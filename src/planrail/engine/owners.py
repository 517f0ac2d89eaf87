"""Who holds a run's lease: the owner string, and whether that owner is plainly dead.

An owner is ``host:pid:tag:start=T:pidns=N``: the host name, the process id, a random tag (two
executions in one process are two owners), the process's start time (clock ticks since boot,
from ``/proc/PID/stat``) and its PID namespace. On the same host and in the same PID namespace,
an owner is *gone* when no process has its pid, or the process with its pid started at another
time (the pid was reused). A runner that finds the lease of a gone owner takes the run over at
once instead of waiting for the lease to expire; owners on other hosts (or in other containers,
or where the start time cannot be read) are never judged: their leases expire by time.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

__all__ = ["Owner", "owner_gone", "this_owner"]


@dataclass(frozen=True, slots=True)
class Owner:
    """A parsed owner string (older ones, ``host:pid:tag``, have no start time)."""

    host: str
    pid: int | None
    start: str | None = None
    pidns: str | None = None

    @classmethod
    def parse(cls, text: str) -> Owner:
        parts = text.split(":")
        fields = dict(p.split("=", 1) for p in parts[3:] if "=" in p)
        pid = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        return cls(parts[0], pid, fields.get("start"), fields.get("pidns"))

    def describe(self) -> str:
        """``pid 123 on host h``, for messages."""
        return f"pid {self.pid} on host {self.host}" if self.pid else f"host {self.host}"


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields after the last ')'.
    rest = stat[stat.rfind(")") + 2 :].split()
    return rest[19] if len(rest) > 19 else None  # field 22, starttime


def _pidns() -> str | None:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return None


def this_owner() -> str:
    """A fresh owner string for this process."""
    pid = os.getpid()
    text = f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}"
    start, ns = _start_time(pid), _pidns()
    if start is not None and ns is not None:
        text += f":start={start}:pidns={ns}"
    return text


def owner_gone(text: str) -> bool:
    """Whether ``text`` names a process on this host (and PID namespace) that is plainly dead:
    no process with its pid, or one that started at another time. False when unsure."""
    owner = Owner.parse(text)
    if owner.pid is None or owner.start is None or owner.pidns is None:
        return False
    if owner.host != socket.gethostname() or owner.pidns != _pidns():
        return False
    if owner.pid == os.getpid():
        return False  # this very process: another execution here, alive by definition
    started = _start_time(owner.pid)
    if started is None:
        try:
            os.kill(owner.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False  # it exists but /proc could not be read: unsure
    return started != owner.start
