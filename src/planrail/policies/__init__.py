"""Layer 2: step policies as frozen values — retry and backoff, error classification, run-level
limits, and the per-resource gate (concurrency slots and a token bucket on the injected clock).

Nothing here knows about the executor; the engine reads these values and follows them.
"""

from planrail.policies.limits import ResourceLimit, RunPolicy
from planrail.policies.resources import ResourceGate, TokenBucket
from planrail.policies.retry import RetryPolicy, classify, retry_after_of

__all__ = [
    "ResourceGate",
    "ResourceLimit",
    "RetryPolicy",
    "RunPolicy",
    "TokenBucket",
    "classify",
    "retry_after_of",
]
