"""``planrail mcp serve``: planrail as an MCP server any agent can hand a whole plan to.

Tools (each answers with structured content):

- ``validate_plan(plan)``: the validation report, ``{valid, errors, warnings}``, every issue
  with its stable code;
- ``run_plan(plan, run_id?)``: validate, approve, run by dependency; ``{run_id, status, …}``.
  A plan that needs approval is approved through an MCP elicitation when the client supports
  it; otherwise it is stored ``awaiting_approval`` for ``planrail approve RUN_ID``, and
  ``resume_run`` runs it once approved;
- ``get_run(run_id)``: the run's record (the ``show --json`` object);
- ``list_runs(status?, limit?)``: runs, newest first;
- ``resume_run(run_id)``: continue a run from its checkpoint (under the policy it started
  with, unless the server overrides it: ``policy_override``, ``--override-policy``).

The tool catalog is the resource ``planrail://catalog``. There is no ``approve`` tool on
purpose: an agent approving its own plan is no approval. The runs run under the server's
security policy, if it has one (``Service(..., security)``, ``--policy``/``--strict``).

A served tool cannot stop the server: a ``KeyboardInterrupt`` a tool raises fails its attempt
(a ``ToolError``; the run records it and the server goes on serving), where ``planrail run``
takes it for a Ctrl-C. A real Ctrl-C still stops the server: the ``planrail`` command exits 130
at once (its entry point's handler), and a server a program runs itself (``build_server(...)
.run()``) is stopped by asyncio's handler, which cancels it. Every answer is text a client can
decode: a lone surrogate in a stored record is sent as its escape (``\\udcff``).
"""

# No ``from __future__ import annotations``: the SDK reads the tools' annotations (among them
# a resolver defined in build_server) as objects.
import contextlib
import copy
import functools
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from mcp.server.elicitation import AcceptedElicitation, DeclinedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from planrail._json import encodable
from planrail.engine.checkpoint import load_result
from planrail.errors import PlanrailError
from planrail.errors import ToolError as PlanrailToolError
from planrail.integrations.mcp import runs
from planrail.plan.tools import Tool, ToolRegistry
from planrail.policies.security import SecurityPolicy
from planrail.store.base import Store

__all__ = ["CATALOG_URI", "Service", "build_server"]

CATALOG_URI = "planrail://catalog"


class IssueOut(BaseModel):
    code: str
    step: str | None = None
    path: str | None = None
    message: str


class ValidationOut(BaseModel):
    valid: bool
    errors: list[IssueOut]
    warnings: list[IssueOut]


class RunOut(BaseModel):
    run_id: str | None
    status: str
    """``succeeded``, ``failed``, ``cancelled``, ``awaiting_approval``, ``refused``, ``invalid``."""
    error: str | None = Field(
        default=None,
        description="Why the run did not succeed: its own error, else its first failed step's.",
    )
    output: Any = None
    next: str | None = Field(default=None, description="What to do next, when there is something.")
    errors: list[IssueOut] = Field(default_factory=list, description="Why an invalid plan is.")


class RunSummary(BaseModel):
    run_id: str
    status: str
    created_at: float
    updated_at: float
    goal: str
    steps: int


class Approval(BaseModel):
    approve: bool = Field(description="Run this plan?")


@contextlib.contextmanager
def _told_to_the_caller(*anticipated: type[Exception]) -> Iterator[None]:
    """The caller's mistakes (``anticipated``) as the SDK's ``ToolError``: the client reads
    the reason with ``isError``, and the server logs no crash. Anything else stays a crash.
    A planrail error's reason starts with its stable code in brackets (``[policy_mismatch]
    run 'r' was started under …``; the SDK puts ``Error executing tool NAME:`` before it), as
    a validation issue reads, so a client tells one refusal from another without parsing the
    sentence."""
    try:
        yield
    except anticipated as exc:
        said = getattr(exc, "message", None) or str(exc)
        code = exc.code if isinstance(exc, PlanrailError) else None
        raise ToolError(f"[{code}] {said}" if code else said) from None


def _served(registry: ToolRegistry) -> ToolRegistry:
    """``registry`` with each async Python tool replaced by one that cannot stop the server
    (see :func:`_unstoppable`); the other tools as they are."""
    served = ToolRegistry()
    for spec in registry:
        found = registry.find(spec.name)
        if isinstance(found, Tool) and found.is_async:
            found = _unstoppable(found)
        served.add(found or spec)
    return served


def _unstoppable(tool: Tool) -> Tool:
    """A copy of the async ``tool`` whose function, should it raise ``KeyboardInterrupt``,
    raises a ``ToolError`` instead: the attempt fails (the run records it) and the server goes
    on. The engine takes a ``KeyboardInterrupt`` on the main thread, where the server's event
    loop runs its async tools, for a Ctrl-C and lets it through, which for a server meant a run
    that never ended and a client never answered. (A sync tool runs in a worker thread, where
    the engine's runner fails the attempt already, naming the tool; one with
    ``isolation="process"`` runs in a worker process, where the same holds,
    :mod:`planrail.engine.isolation`.)"""
    fn = tool.fn

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except KeyboardInterrupt:
            raise PlanrailToolError(
                f"tool '{tool.name}' raised KeyboardInterrupt, which does not stop a served"
                " planrail (planrail mcp serve): the attempt failed instead"
            ) from None

    unstoppable = copy.copy(tool)
    unstoppable.fn = call
    return unstoppable


class Service:
    """What the MCP tools do, on a registry of tools and a store; the runs it starts and
    resumes run under ``security`` (``None``: a resumed run keeps the policy it started with).

    A run started under another security policy is resumed under ``security`` only with
    ``policy_override`` (``--override-policy``), which the run records as a
    ``policy_overridden`` event; without it ``resume_run`` refuses it (``[policy_mismatch]``).
    ``run_plan`` of a stored run's id never overrides, as ``planrail run --run-id`` does not.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        store: Store,
        security: SecurityPolicy | None = None,
        *,
        policy_override: bool = False,
    ) -> None:
        self.registry = _served(registry)
        self.store = store
        self.security = security
        self.policy_override = policy_override

    def question(self, plan: dict[str, Any]) -> str | None:
        """What a person is asked to approve ``plan`` (None: it needs no approval)."""
        checked = runs.checked(plan, self.registry, self.security).plan
        if checked is None:
            return None
        pending = runs.needs_approval(checked, self.registry)
        return runs.summary(checked, self.registry, pending) if pending else None

    def validate_plan(self, plan: dict[str, Any]) -> ValidationOut:
        report = runs.checked(plan, self.registry, self.security)
        return ValidationOut.model_validate(report.to_dict())

    async def run_plan(
        self,
        plan: dict[str, Any],
        run_id: str | None,
        ask: runs.Ask | None,
        how: runs.How | None = None,
    ) -> RunOut:
        report = runs.checked(plan, self.registry, self.security)
        if report.plan is None:
            return RunOut(
                run_id=run_id,
                status="invalid",
                error="the plan is invalid: nothing was run",
                errors=[IssueOut.model_validate(i.to_dict()) for i in report.errors],
            )
        with _told_to_the_caller(PlanrailError):  # a bad run id, a busy run, another plan
            outcome = await runs.start(
                report.plan, self.registry, self.store, run_id, ask, self.security, how
            )
            return _out(outcome)

    async def resume_run(self, run_id: str, how: runs.How | None = None) -> RunOut:
        if self.store.get_run(run_id) is None:  # anticipated, as for get_run
            raise ToolError(f"no run '{run_id}' in this store")
        # another runner holds it, another plan, another policy (without policy_override)
        with _told_to_the_caller(PlanrailError):
            outcome = await runs.resume(
                run_id,
                self.registry,
                self.store,
                self.security,
                policy_override=self.policy_override,
                how=how,
            )
            return _out(outcome)

    def get_run(self, run_id: str) -> dict[str, Any]:
        result = load_result(self.store, run_id)
        if result is None:  # anticipated: the caller reads why (a ValueError reads as a crash)
            raise ToolError(f"no run '{run_id}' in this store")
        data: dict[str, Any] = encodable(result.to_dict())
        return data

    def list_runs(self, status: str | None, limit: int) -> list[RunSummary]:
        with _told_to_the_caller(ValueError):  # a bad status or limit, as the store says it
            found = self.store.list_runs(status=status, limit=limit)
        return [
            RunSummary(
                run_id=r.run_id,
                status=r.status,
                created_at=r.created_at,
                updated_at=r.updated_at,
                goal=str(r.plan.get("goal", "")),
                steps=len(r.plan.get("steps", [])),
            )
            for r in found
        ]

    def catalog(self) -> dict[str, Any]:
        return {"tools": [spec.to_catalog_entry() for spec in self.registry]}


def _out(outcome: runs.Outcome) -> RunOut:
    hint = None
    if outcome.status == "awaiting_approval":
        hint = f"approve with `planrail approve {outcome.run_id}`, then call resume_run"
    return RunOut(
        run_id=outcome.run_id,
        status=outcome.status,
        error=encodable(outcome.error),
        output=encodable(outcome.output),
        next=hint,
        errors=[IssueOut.model_validate(issue) for issue in outcome.errors],
    )


NOT_ASKED = "not asked"
"""What the approval resolver gives when it asks nothing (no approval needed, or a client
without elicitation)."""


def _answer(outcome: ElicitationResult[Approval]) -> runs.Ask:
    """The approver for :func:`runs.start` from the elicitation's outcome: yes, no, or (not
    asked, dismissed) no answer, which stores the run ``awaiting_approval``."""
    answer: bool | None = None
    if isinstance(outcome, AcceptedElicitation) and isinstance(outcome.data, Approval):
        answer = outcome.data.approve
    elif isinstance(outcome, DeclinedElicitation):
        answer = False

    async def ask(summary: str) -> bool | None:
        return answer

    return ask


MaxConcurrency = Annotated[
    int | None,
    Field(
        ge=1,
        description="Most steps running at once (stored with the run: a resume given none"
        " keeps it).",
    ),
]
FailFast = Annotated[
    bool | None,
    Field(
        description="Cancel what is in flight on the first failure (false: go on past"
        " failures, the default; stored with the run: a resume given neither keeps it).",
    ),
]


def build_server(service: Service, name: str = "planrail") -> MCPServer:
    """The MCP server offering ``service`` (``.run()`` serves stdio)."""
    server = MCPServer(
        name,
        instructions="Hand planrail a whole plan (steps calling tools, with ${step.field}"
        " references and depends_on): validate_plan checks it, run_plan runs it by dependency.",
        log_level="WARNING",
    )
    read_only = ToolAnnotations(read_only_hint=True)

    @server.tool(annotations=read_only)
    def validate_plan(plan: dict[str, Any]) -> ValidationOut:
        """Check a plan statically: every problem at once, each with a stable code."""
        return service.validate_plan(plan)

    def approval(plan: dict[str, Any], ctx: Context) -> Elicit[Approval] | str:
        question = service.question(plan)
        caps = ctx.client_capabilities
        if question is None or caps is None or caps.elicitation is None:
            return NOT_ASKED
        return Elicit(question, Approval)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def run_plan(
        plan: dict[str, Any],
        answer: Annotated[ElicitationResult[Approval], Resolve(approval)],
        run_id: str | None = None,
        max_concurrency: MaxConcurrency = None,
        fail_fast: FailFast = None,
    ) -> RunOut:
        """Validate, approve and run a plan by dependency; returns its run id and status. A
        plan that needs approval is asked about (MCP elicitation) or waits for `planrail
        approve`."""
        how = runs.How(max_concurrency, fail_fast)
        return await service.run_plan(plan, run_id, _answer(answer), how)

    @server.tool(annotations=read_only)
    def get_run(run_id: str) -> dict[str, Any]:
        """A run's record: status, output and every step (the `planrail show --json` object)."""
        return service.get_run(run_id)

    @server.tool(annotations=read_only)
    def list_runs(
        status: Literal[
            "pending", "running", "succeeded", "failed", "cancelled", "awaiting_approval"
        ]
        | None = None,
        limit: int = 50,
    ) -> list[RunSummary]:
        """Runs, newest first."""
        return service.list_runs(status, limit)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def resume_run(
        run_id: str, max_concurrency: MaxConcurrency = None, fail_fast: FailFast = None
    ) -> RunOut:
        """Continue a run from its checkpoint (after `planrail approve`, or an interruption).
        Given neither, it runs with the run's stored max_concurrency and fail_fast."""
        return await service.resume_run(run_id, runs.How(max_concurrency, fail_fast))

    @server.resource(CATALOG_URI, mime_type="application/json")
    def catalog() -> dict[str, Any]:
        """The tools plans may call, in MCP catalog form."""
        return service.catalog()

    return server
