"""The tool of the MCP overhead benchmark, and the stdio MCP server that serves it.

python -m bench.mcp_tools        # the server (stdio), as bench.mcp_overhead starts it
"""

from __future__ import annotations

from pydantic import BaseModel

import planrail


class Echo(BaseModel):
    text: str


@planrail.tool(side_effects="none")
async def echo(text: str, n: int = 0) -> Echo:
    """Return the text: no work, so all the time measured is the call's (``n`` numbers the
    calls, so that none repeats another: planrail's repeated-call guard)."""
    return Echo(text=text)


if __name__ == "__main__":
    from planrail.integrations.mcp import serve_tools

    serve_tools([echo], name="bench", log_level="WARNING").run()
