"""How a failed MCP call ends its attempt (the table is in ``docs/mcp.md``).

::

    PlanrailError
    ├── MCPToolError           the tool answered ``isError``: a step failure (``retry_on`` it)
    ├── MCPRequestError        a JSON-RPC error (``.code``); retryable only for a request timeout
    ├── SchemaChangedError     the tool's schema is not the one approved: start a new run
    ├── ExecutionError
    │   └── CallCrashedError
    │       └── OutcomeUnknownError   the connection dropped mid-call: retryable if the tool
    │                                 honours keys, else ``in_doubt`` (waits for an operator)
    ├── OutputError
    │   └── OutputTooLargeError   over ``max_output_bytes``
    └── RetryableError
        └── MCPUnavailableError   the server could not be reached; nothing was sent
"""

from __future__ import annotations

from planrail.errors import CallCrashedError, OutputError, PlanrailError, RetryableError

__all__ = [
    "MCPRequestError",
    "MCPToolError",
    "MCPUnavailableError",
    "OutcomeUnknownError",
    "OutputTooLargeError",
    "SchemaChangedError",
]


class MCPToolError(PlanrailError):
    """The MCP tool reported an error (``isError``); retried only if the step's policy says so."""

    code = "mcp_tool_error"


class MCPRequestError(PlanrailError):
    """The server answered the request with a JSON-RPC error."""

    code = "mcp_request_error"

    def __init__(self, message: str, *, rpc_code: int, retryable: bool = False) -> None:
        super().__init__(message)
        self.rpc_code = rpc_code
        self.retryable = retryable


class SchemaChangedError(PlanrailError):
    """The server now describes the tool differently from the schema the plan was approved
    with; the call is refused (nothing was sent). The run's approval stays bound to the old
    schema: a new run of the plan is approved against the new one."""

    code = "mcp_schema_changed"


class OutcomeUnknownError(CallCrashedError):
    """The connection dropped after the request was sent: the call may or may not have happened.

    As any :class:`~planrail.errors.CallCrashedError`: ``retryable`` when the tool honours
    idempotency keys (calling again is safe); otherwise ``in_doubt``, and the step waits for an
    operator's decision.
    """

    code = "mcp_outcome_unknown"


class OutputTooLargeError(OutputError):
    """The call's output is larger than the server's ``max_output_bytes``."""

    code = "mcp_output_too_large"


class MCPUnavailableError(RetryableError):
    """The server could not be started or reached; the request was not sent."""

    code = "mcp_unavailable"
