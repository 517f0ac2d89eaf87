"""A second tools file whose ``greet`` has the name of ``cli_tools.greet`` (for the test that
two tools of one name are a usage error)."""

import planrail


@planrail.tool(side_effects="none")
def greet(name: str) -> str:
    return f"another greet for {name}"
