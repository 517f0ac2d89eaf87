"""What a durable run does beside its steps (:meth:`planrail.Execution.iter` starts both once the
run is approved, and cancels them as it ends): it renews its lease, and it watches the store for
an operator's cancel request (``planrail cancel``, the dashboard, MCP ``cancel_run``, from any
process). Each tells the run what happened through a callback; neither touches its steps."""

from __future__ import annotations

import logging
from collections.abc import Callable

from planrail.engine.checkpoint import Checkpointer
from planrail.engine.lease import RunLease
from planrail.errors import PlanrailError
from planrail.types import Clock

__all__ = ["keep_lease", "watch_requests"]

log = logging.getLogger("planrail")


async def keep_lease(lease: RunLease, clock: Clock, lost: Callable[[str], None]) -> None:
    """Renew the run's lease every third of its time to live; once it cannot be (it expired,
    another runner took it, the store failed), call ``lost`` with why and stop: the run must
    stop before a second runner and this one overlap."""
    while True:
        await clock.sleep(lease.ttl / 3)
        try:
            lease.renew()
        except PlanrailError as exc:
            lost(exc.message)
            return


async def watch_requests(
    ckpt: Checkpointer, clock: Clock, every: float, cancel: Callable[[str], None]
) -> None:
    """Look at the store every ``every`` seconds for a ``cancel_requested`` event; call
    ``cancel`` with who asked (``an operator`` when unsaid) and stop. A store that cannot be
    read is logged and looked at again."""
    while True:
        await clock.sleep(every)
        try:
            request = ckpt.cancel_request()
        except Exception:
            log.exception("could not read operator requests for run %s", ckpt.run_id)
            continue
        if request is not None:
            cancel(request.get("by") or "an operator")
            return
