"""The onboarding tools as an MCP server (stdio), for ``planrail run --mcp crm=...``.

The same tools as ``tools.py`` (the demo's, writing to the SQLite "CRM" at
``$PLANRAIL_DEMO_CRM``), served with the MCP SDK: their schemas become the MCP tools' input and
output schemas, and each tool that honours idempotency keys reads the key planrail sends in the
request's ``_meta``. Run it yourself with ``python examples/onboarding/mcp_server.py``.
"""

from planrail.demo.onboarding import (
    create_account,
    create_subscription,
    lookup_price,
    provision_workspace,
    send_welcome_email,
)
from planrail.integrations.mcp import serve_tools

server = serve_tools(
    [lookup_price, create_account, create_subscription, provision_workspace, send_welcome_email],
    name="onboarding-crm",
    log_level="WARNING",
)

if __name__ == "__main__":
    server.run()
