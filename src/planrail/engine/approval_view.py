"""The approval screen as data: what a careful person needs to decide on a plan.

:func:`build_view` turns an :class:`~planrail.engine.approval.ApprovalRequest` into an
:class:`ApprovalView` — plain frozen dataclasses with a ``to_dict()`` (JSON), independent of
any renderer. The CLI draws it (``planrail run``, ``planrail review``, ``--json`` prints
``to_dict()``); a dashboard can draw exactly the same model.

For every step that needs approval it holds each argument's **value** (secrets masked as
``***``; a reference into a step that has not run yet stays ``${step.field}`` and is marked
unknown), and the argument's **provenance**: typed by the user in the goal, written in the plan
(by a person, or by the planner model), read from tool X's output (trusted or not), copied by
the model from tool X's output, or the answer of an LLM step that read Y. Values derived from
anything untrusted are flagged ``untrusted``. The view also holds the short plan hash the
approval binds to, what changed since the previous approved version (a replan), and the
read-only steps collapsed to one line each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from planrail.errors import ReferenceResolutionError
from planrail.plan.copied import in_goal
from planrail.plan.model import Plan, Step
from planrail.plan.provenance import Provenance, Source, Sources
from planrail.plan.refs import Parse, iter_references
from planrail.plan.resolve import resolve_value
from planrail.plan.secrets import REDACTED, Redactor, secret_params_of

if TYPE_CHECKING:
    from planrail.engine.approval import ApprovalRequest

__all__ = ["ApprovalView", "ArgView", "PlanDiff", "SourceView", "StepView", "build_view"]

Author = Literal["plan", "planner"]
SHORT_HASH = 19
"""``sha256:`` and the first 12 hex digits: the short plan hash shown to people."""


@dataclass(frozen=True)
class SourceView:
    """One origin of an argument's value."""

    kind: str
    """``goal`` (typed by the user), ``plan`` (written in the plan by a person), ``planner``
    (written by the planner model), ``tool`` (a tool's output), ``copied`` (a literal the model
    copied from a tool's output), ``llm`` (an ``llm_call`` step's answer)."""
    name: str
    """The tool's name (``tool``, ``copied``), the step's id (``llm``), else empty."""
    trusted: bool
    text: str
    """How a person reads it: ``output of tool read_inbox (untrusted)``."""


@dataclass(frozen=True)
class ArgView:
    """One argument of a step to approve."""

    name: str
    value: Any
    """The value, secrets masked; references into unfinished steps left as written."""
    known: bool
    """Whether ``value`` is the value the call will get (no reference still unresolved)."""
    sources: tuple[SourceView, ...]
    untrusted: bool
    """Derives from a tool or LLM output that is not declared trusted: look hard at it."""
    secret: bool = False


@dataclass(frozen=True)
class StepView:
    """One step to approve."""

    id: str
    tool: str
    side_effects: str
    args: tuple[ArgView, ...]
    depends_on: tuple[str, ...] = ()
    change: str | None = None
    """On a replan: ``added``, ``changed`` or ``same`` against the previous version."""

    @property
    def untrusted(self) -> bool:
        return any(a.untrusted for a in self.args)


@dataclass(frozen=True)
class PlanDiff:
    """What changed since the previous approved version of the plan (a replan)."""

    previous_hash: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    args: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    """Per changed step, per changed argument: ``{"before": …, "after": …}`` (masked)."""


@dataclass(frozen=True)
class ApprovalView:
    """The approval screen, as data (see the module docstring)."""

    goal: str
    reason: str
    plan_hash: str
    short_hash: str
    steps: tuple[StepView, ...]
    read_only: tuple[tuple[str, str], ...]
    """Steps that need no approval, collapsed: ``(id, tool or action)``."""
    reused: tuple[str, ...] = ()
    diff: PlanDiff | None = None
    run_id: str | None = None

    @property
    def untrusted(self) -> tuple[str, ...]:
        """Steps with an argument derived from untrusted output."""
        return tuple(s.id for s in self.steps if s.untrusted)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["untrusted"] = list(self.untrusted)
        for step, raw in zip(self.steps, data["steps"], strict=True):
            raw["untrusted"] = step.untrusted
        out: dict[str, Any] = _jsonable(data)
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------- building


def build_view(request: ApprovalRequest, *, author: Author = "plan") -> ApprovalView:
    """The view of ``request``; ``author`` says who wrote the plan's literals (``plan``: a
    person's plan file; ``planner``: a model)."""
    plan = request.plan
    compiled = request.compiled_plan
    prov = request.provenance or Provenance(
        plan.by_id, request.registry, goal=plan.goal, compiled=compiled
    )
    redactor = request.redactor or Redactor.for_compiled(compiled)
    outputs = _masked_outputs(request.outputs, redactor)
    wanted = set(request.steps)
    previous = request.previous
    diff = _diff(previous, plan, request, redactor) if previous is not None else None
    steps = []
    for step in plan.steps:
        if step.id not in wanted:
            continue
        change = None
        if diff is not None:
            change = (
                "added"
                if step.id in diff.added
                else "changed"
                if step.id in diff.changed
                else "same"
            )
        steps.append(_step_view(step, request, prov, redactor, outputs, author, change))
    read_only = tuple(
        (s.id, s.tool or s.action)
        for s in plan.steps
        if s.id not in wanted and s.id not in request.reused
    )
    return ApprovalView(
        goal=plan.goal,
        reason=request.reason,
        plan_hash=request.plan_hash,
        short_hash=request.plan_hash[:SHORT_HASH],
        steps=tuple(steps),
        read_only=read_only,
        reused=tuple(request.reused),
        diff=diff,
        run_id=request.run_id,
    )


def _masked_outputs(outputs: Mapping[str, Any], redactor: Redactor | None) -> dict[str, Any]:
    if redactor is None:
        return dict(outputs)
    return {sid: redactor.output(sid, out) for sid, out in outputs.items()}


def _masked_args(step: Step, request: ApprovalRequest, redactor: Redactor | None) -> Any:
    secrets = secret_params_of(request.registry.spec(step.tool)) if step.tool else frozenset()
    args = {k: (REDACTED if k in secrets else v) for k, v in step.args.items()}
    return redactor.scrub(args) if redactor is not None else args


def _step_view(
    step: Step,
    request: ApprovalRequest,
    prov: Provenance,
    redactor: Redactor | None,
    outputs: Mapping[str, Any],
    author: Author,
    change: str | None,
) -> StepView:
    secrets = secret_params_of(request.registry.spec(step.tool)) if step.tool else frozenset()
    masked = _masked_args(step, request, redactor)
    fields: dict[str, Any] = dict(masked)
    sources = prov.args(step)
    if step.prompt is not None:
        fields["(prompt)"] = step.prompt
        sources["(prompt)"] = prov.sources(step.prompt, step)
    args = []
    for name, written in fields.items():
        value, known = _value(written, outputs, request.compiled_plan.template)
        srcs = sources.get(name, frozenset())
        shown = _sources(srcs, value if known else written, prov, author)
        args.append(
            ArgView(
                name,
                value,
                known,
                shown,
                untrusted=any(s.kind in ("tool", "copied", "llm") and not s.trusted for s in shown),
                secret=name in secrets,
            )
        )
    return StepView(
        step.id,
        step.tool or step.action,
        request.side_effects.get(step.id, "?"),
        tuple(args),
        tuple(step.depends_on),
        change,
    )


def _value(written: Any, outputs: Mapping[str, Any], parse: Parse) -> tuple[Any, bool]:
    """The value as the call will see it, when every reference in it is into a reused step."""
    refs = [r for _, t in iter_references(written, parse=parse) for r in t.references]
    if not refs:
        return written, True
    if not all(r.step in outputs for r in refs):
        return written, False
    try:
        return resolve_value(written, outputs, parse=parse), True
    except ReferenceResolutionError:
        return written, False


def _sources(
    sources: Sources, value: Any, prov: Provenance, author: Author
) -> tuple[SourceView, ...]:
    out: list[SourceView] = []
    if any(s.kind != "user" for s in sources):  # the user's part is the tool's own arguments
        sources = frozenset(s for s in sources if s.kind != "user")
    for s in sorted(sources):
        out.append(_source_view(s, value, prov, author))
    return tuple(out)


def _source_view(s: Source, value: Any, prov: Provenance, author: Author) -> SourceView:
    if s.kind == "user":
        if in_goal(value, prov.goal):
            return SourceView("goal", "", True, "typed by the user in the goal")
        if author == "planner":
            return SourceView("planner", "", True, "written by the planner model")
        return SourceView("plan", "", True, "written in the plan")
    trust = "trusted" if s.trusted else "untrusted"
    if s.kind == "llm":
        try:
            read = [x.label for x in prov.inputs(s.name) if x.kind != "user"]
        except KeyError:
            read = []
        what = f" that read {', '.join(sorted(set(read)))}" if read else ""
        return SourceView("llm", s.name, s.trusted, f"answer of LLM step {s.name}{what} ({trust})")
    if s.copied:
        return SourceView(
            "copied",
            s.name,
            False,
            f"copied by the model from the output of tool {s.name} (untrusted)",
        )
    note = f", {s.sensitivity}" if s.sensitivity != "public" else ""
    return SourceView("tool", s.name, s.trusted, f"output of tool {s.name} ({trust}{note})")


def _diff(
    previous: Plan, plan: Plan, request: ApprovalRequest, redactor: Redactor | None
) -> PlanDiff:
    before = previous.by_id
    now = plan.by_id
    added = tuple(s for s in now if s not in before)
    removed = tuple(s for s in before if s not in now)
    changed: list[str] = []
    args: dict[str, dict[str, dict[str, Any]]] = {}
    for sid, step in now.items():
        old = before.get(sid)
        if old is None or old == step:
            continue
        changed.append(sid)
        a = _masked_args(old, request, redactor)
        b = _masked_args(step, request, redactor)
        delta = {
            k: {"before": a.get(k), "after": b.get(k)}
            for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k)
        }
        if delta:
            args[sid] = delta
    return PlanDiff(previous.fresh_hash(), added, removed, tuple(changed), args)
