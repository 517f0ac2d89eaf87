"""The onboarding tools, for ``planrail run examples/onboarding/plan.json --tools ...``.

They are the demo's own tools (``planrail.demo.onboarding``): a read-only price lookup and four
steps that write to a local SQLite "CRM" (``$PLANRAIL_DEMO_CRM``), each honouring its
idempotency key. ``--tools`` registers every ``@planrail.tool`` found in this module.
"""

from planrail.demo.onboarding import (
    create_account,
    create_subscription,
    lookup_price,
    provision_workspace,
    send_welcome_email,
)

__all__ = [
    "create_account",
    "create_subscription",
    "lookup_price",
    "provision_workspace",
    "send_welcome_email",
]
