"""Layer 2: step policies as frozen values — retry and backoff, error classification, run-level
limits and resource limits, security policies.

Nothing here knows about the executor or awaits anything; the engine reads these values and
follows them (the resource gate that enforces a :class:`ResourceLimit` is
:mod:`planrail.engine.resources`, the security guard is :mod:`planrail.engine.guard`).
"""

from planrail.policies.limits import ResourceLimit, RunPolicy
from planrail.policies.retry import RetryPolicy, classify, retry_after_of

__all__ = [
    "ResourceLimit",
    "RetryPolicy",
    "RunPolicy",
    "classify",
    "retry_after_of",
]
