"""planrail's exceptions: one rooted tree, each error with a stable ``code``.

::

    PlanrailError
    ├── PlanError                       a plan cannot be loaded, made or is not valid
    │   ├── PlanLoadError               malformed JSON/YAML, or not an object of steps
    │   │   ├── LimitExceeded           over a size, depth or count limit      (plan.loader)
    │   │   └── DuplicateKeyError       an object holds the same key twice     (plan.loader)
    │   ├── ReferenceSyntaxError        a ``${...}`` not following the reference grammar
    │   ├── PlanValidationError         carries every Issue found (``.issues``)
    │   ├── PredicateSyntaxError        a predicate not following its grammar  (plan.predicates)
    │   ├── SecurityPolicyError         a malformed security policy document   (policies.security)
    │   └── PlanningError               no valid plan within the repairs       (planner.planner)
    ├── ToolError                       a tool cannot be defined, found or loaded
    │   ├── ToolDefinitionError         a decorated function planrail cannot describe
    │   ├── ToolLoadError               a ``--tools`` module or ``--catalog`` file failed to load
    │   ├── UnknownToolError            a step names a tool no registry holds
    │   └── ToolShippingError           a tool cannot go to a runner's workers (backends.shipping)
    ├── ReferenceResolutionError        ``${step.a.b}`` points at nothing in the real output
    ├── ArgumentError                   resolved arguments do not fit the tool's input schema
    ├── OutputError                     a tool's output does not fit its type, or is not JSON
    │   └── OutputTooLargeError         over max_output_bytes              (integrations.mcp.errors)
    ├── PredicateError                  a predicate failed on the real values  (plan.predicates)
    ├── MCPToolError                    an MCP tool answered isError       (integrations.mcp.errors)
    ├── MCPRequestError                 an MCP server's JSON-RPC error     (integrations.mcp.errors)
    ├── SchemaChangedError              not the MCP schema approved        (integrations.mcp.errors)
    ├── ExecutionError                  raised around a run (not by tools)
    │   ├── ApprovalRefusedError        a person (or the approval hook) said no
    │   │   ├── ApprovalMismatchError   the approval was for another plan hash (policies.security)
    │   │   └── ApprovalRequiredError   no approver for a plan that needs one  (engine.approval)
    │   ├── PolicyDeniedError           a security rule refused a tool call    (policies.security)
    │   │   └── CallNotApprovedError    also an ApprovalRefusedError           (policies.security)
    │   ├── ToolCallLimitError          the run made too many tool calls       (policies.security)
    │   ├── RepeatedCallError           a tool called again with the same resolved arguments
    │   ├── CallCrashedError            the process running a tool call died mid-call
    │   │   └── OutcomeUnknownError     an MCP connection dropped mid-call (integrations.mcp.errors)
    │   ├── CallStillRunningError       the key's earlier abandoned call still runs (engine.runners)
    │   ├── AttemptTimeoutError         one attempt ran past ``timeout``       (policies.limits)
    │   ├── StepTimeoutError            a step ran past ``total_timeout``      (policies.limits)
    │   ├── DeadlineExceededError       the run's deadline passed              (policies.limits)
    │   ├── LoopExhaustedError          ``repeat`` hit ``max_iterations``      (policies.limits)
    │   ├── PlanMismatchError           a run id resumed with another plan     (engine.checkpoint)
    │   ├── PolicyMismatchError         resumed under other policies           (engine.checkpoint)
    │   ├── OperationError              an operator action that does not apply (engine.operations)
    │   ├── RunBusyError                another runner holds the run's lease   (engine.lease)
    │   ├── RunReplannedError           a replan replaced the run: resume that (engine.gate)
    │   └── LeaseLostError              this runner's lease expired or was taken (engine.lease)
    ├── LLMError                        a model could not be asked, or answered badly (llm.errors)
    │   ├── LLMRequestError             the provider refused the request (4xx) (llm.errors)
    │   │   └── LLMContextLengthError   the request does not fit the context   (llm.errors)
    │   └── BudgetExceededError         a run's LLM budget is spent (stops it) (llm.errors)
    ├── StoreError                      the store cannot be opened, read or written
    │   ├── StoreCorruptError           the store's files are damaged: planrail refuses to guess
    │   ├── StoreNotFoundError          open_store(create=False): no store there, none made
    │   ├── RunExistsError              ``create_run`` of a run id already held (store.base)
    │   ├── RunNotFoundError            a write for a run the store does not hold (store.base)
    │   └── IdempotencyConflictError    a key reused with other arguments      (store.base)
    ├── TraceError                      a trace file cannot be read            (observe.trace)
    ├── MissingExtraError               an optional extra is not installed (the message: the fix)
    └── RetryableError                  raised *by tools* for a transient failure (``retry_after``)
        ├── MCPUnavailableError         an MCP server could not be reached (integrations.mcp.errors)
        ├── LLMUnavailableError         429, 5xx, timeout, connection error    (llm.errors)
        └── LLMAnswerError              an empty answer, or not the JSON asked (llm.errors)

Errors defined in other modules are drawn here, with the module that defines them, so this is
the one map of the tree (``tests/test_errors.py`` checks it against the code). A class that has
two parents is drawn under one and names the other.

Every error carries ``run_id``, ``step_id`` and ``attempt`` when they are known, and
``retryable`` says whether the retry policy may try again.
"""

from __future__ import annotations

from typing import Any

from planrail._json import escape_surrogates

__all__ = [
    "ApprovalRefusedError",
    "ArgumentError",
    "CallCrashedError",
    "ExecutionError",
    "MissingExtraError",
    "OutputError",
    "PlanError",
    "PlanLoadError",
    "PlanValidationError",
    "PlanrailError",
    "ReferenceResolutionError",
    "ReferenceSyntaxError",
    "RepeatedCallError",
    "RetryableError",
    "StoreCorruptError",
    "StoreError",
    "StoreNotFoundError",
    "ToolDefinitionError",
    "ToolError",
    "ToolLoadError",
    "UnknownToolError",
    "error_dict",
    "error_message",
]


def error_dict(
    error: BaseException | str, message: str | None = None, *, retryable: bool | None = None
) -> dict[str, Any]:
    """The ``{type, message, retryable}`` object of the JSON contract (a step's or a run's
    ``error``); every such object planrail writes is built here.

    ``error`` is an exception (its class name, its message as :func:`error_message` reads
    it, and its ``retryable`` attribute) or a type name given with ``message``. ``message``
    and ``retryable`` override what an exception says; an empty message becomes the type
    name. The texts are Unicode that every store, terminal and client takes (see
    :func:`error_message`).
    """
    if isinstance(error, str):
        kind, text, may_retry = error, message, False
    else:
        kind = type(error).__name__
        text = error_message(error) if message is None else message
        try:
            may_retry = bool(getattr(error, "retryable", False))
        except Exception:  # a property of the error's own that raises: not retryable
            may_retry = False
    return {
        "type": escape_surrogates(kind),
        "message": escape_surrogates(text or kind),
        "retryable": may_retry if retryable is None else retryable,
    }


def error_message(error: BaseException) -> str:
    """What ``error`` says — a :class:`PlanrailError`'s ``message``, else ``str(error)``, else
    (empty) its type name — whatever the exception: one whose message cannot be read (a
    ``__str__`` that raises) is said by its ``repr`` (else its type name) and why. The text is
    Unicode every UTF-8 store, terminal and client takes: a lone surrogate (a file name decoded
    with ``surrogateescape``, a JSON ``"\\udcff"``) is written as its escape ``\\udcff``."""
    kind = type(error).__name__
    try:
        text = error.message if isinstance(error, PlanrailError) else str(error)
        if not isinstance(text, str):  # a message attribute set to something else
            text = str(text)
    except Exception as exc:
        try:
            shown = repr(error)
        except Exception:  # its repr raises too: the type name says what it was
            shown = kind
        text = f"{shown} (its message cannot be read: str() raised {type(exc).__name__})"
    return escape_surrogates(text or kind)


class PlanrailError(Exception):
    """The root of every error planrail raises on purpose."""

    code: str = "planrail_error"
    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        step_id: str | None = None,
        attempt: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.run_id = run_id
        self.step_id = step_id
        self.attempt = attempt

    def to_dict(self) -> dict[str, Any]:
        """The error as the ``{type, message, retryable}`` object of the JSON contract."""
        return error_dict(self)


class PlanError(PlanrailError):
    code = "plan_error"


class PlanLoadError(PlanError):
    """The document is not a plan: bad JSON/YAML, too large, or not an object of steps."""

    code = "parse_error"


class ReferenceSyntaxError(PlanError):
    """A ``${...}`` reference that does not follow the grammar (``position`` is its offset)."""

    code = "invalid_reference"

    def __init__(self, message: str, *, position: int = 0) -> None:
        super().__init__(message)
        self.position = position


class PlanValidationError(PlanError):
    """A plan failed validation; ``issues`` holds every problem found, not just the first."""

    code = "invalid_plan"

    def __init__(self, issues: list[Any], message: str | None = None) -> None:
        self.issues = list(issues)
        if message is None:
            first = "; ".join(str(i) for i in self.issues[:3])
            more = f" (and {len(self.issues) - 3} more)" if len(self.issues) > 3 else ""
            message = f"the plan is invalid: {first}{more}"
        super().__init__(message)


class ToolError(PlanrailError):
    code = "tool_error"


class ToolDefinitionError(ToolError):
    code = "tool_definition_error"


class ToolLoadError(ToolError):
    code = "tool_load_error"


class UnknownToolError(ToolError):
    code = "unknown_tool"


class ReferenceResolutionError(PlanrailError):
    """A reference could not be resolved against the real outputs. Never becomes ``None``."""

    code = "unresolved_reference"


class ArgumentError(PlanrailError):
    """The resolved arguments do not fit the tool's input schema."""

    code = "invalid_arguments"


class OutputError(PlanrailError):
    """The tool returned something that does not fit its declared output type."""

    code = "invalid_output"


class ExecutionError(PlanrailError):
    code = "execution_error"


class ApprovalRefusedError(ExecutionError):
    code = "approval_refused"


class RepeatedCallError(ExecutionError):
    """A tool was about to be called again with resolved arguments it was already called with
    ``RunPolicy.max_identical_calls`` times in this run; the call is not made. ``previous``
    names the earlier calls (step, item, iteration)."""

    code = "repeated_call"

    def __init__(self, message: str, *, previous: tuple[str, ...] = (), **ids: Any) -> None:
        super().__init__(message, **ids)
        self.previous = previous


class CallCrashedError(ExecutionError):
    """The process running a tool call died mid-call (a Ray worker or actor exited, its node
    was lost): the attempt crashed, and whether its effect happened is unknown.

    A tool that honours idempotency keys (``side_effects`` ``none``, ``idempotent``, ``keyed``)
    may be called again with the same key: the error is ``retryable`` and the step's retry
    policy decides. Any other tool is ``in_doubt``: never retried, no fallback taken; the step
    waits for an operator (``planrail resolve``), as after a crash of planrail itself.
    """

    code = "call_crashed"

    def __init__(self, message: str, *, in_doubt: bool, **ids: Any) -> None:
        super().__init__(message, **ids)
        self.in_doubt = in_doubt
        self.retryable = not in_doubt


class StoreError(PlanrailError):
    code = "store_error"


class StoreCorruptError(StoreError):
    code = "store_corrupt"


class StoreNotFoundError(StoreError):
    """``open_store(url, create=False)`` names a SQLite file that does not exist, a SQLite
    database that holds no planrail store, or a PostgreSQL schema without planrail's tables:
    nothing was created or changed (a mistyped
    ``--store`` path is said, not answered with a new empty store or with planrail's tables
    written into another program's database)."""

    code = "store_not_found"


class MissingExtraError(PlanrailError):
    """An optional integration was asked for but its extra is not installed; the message says
    which ``pip install`` fixes it. (``planrail.llm`` and ``planrail.observe`` re-export it.)"""

    code = "missing_extra"


class RetryableError(PlanrailError):
    """Raise this from a tool for a transient failure worth another attempt.

    ``retry_after`` (seconds) asks the retry policy to wait at least that long, as an HTTP
    ``Retry-After`` header would.
    """

    code = "retryable"
    retryable = True

    def __init__(
        self, message: str = "transient failure", *, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        if retry_after is not None and retry_after < 0:
            raise ValueError("retry_after must be >= 0")
        self.retry_after = retry_after
