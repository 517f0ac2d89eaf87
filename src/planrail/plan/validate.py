"""The validator: named passes over a plan, reporting every problem at once with a stable code.

The passes live in their own modules and share one :class:`~planrail.plan.validate_context.Context`:

- ``validate_shape``: the document, aliases, each step's fields;
- ``validate_refs``: dependencies, references, cycles, output fields;
- ``validate_args``: tools, arguments, fallback values;
- ``validate_policies``: predicates (and their operand types), retry, loops, fan-out, joins,
  ``$first``;
- ``stages``: the optional ``stages`` list; ``duplicates``: ``duplicate_call``;
- ``placeholders``: literals that look like a reference in another syntax;
- ``lints``: ``side_effect_race`` and ``needless_dependency``.

A step with a malformed field is still checked for everything else (the field is left out), so
fixing what is reported never reveals a problem that was already there. Every pass is linear
in the size of the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from planrail._memory import collector_paused
from planrail.errors import PlanValidationError
from planrail.plan.compiled import CompiledPlan
from planrail.plan.duplicates import duplicate_calls_pass
from planrail.plan.effects import self_waivers
from planrail.plan.lints import lints_pass
from planrail.plan.loader import PlanLimits
from planrail.plan.model import Plan
from planrail.plan.placeholders import placeholders_pass
from planrail.plan.stages import STAGE_CODES, stages_pass
from planrail.plan.tools import AnyTool, ToolRegistry
from planrail.plan.validate_args import arguments_pass, tools_pass
from planrail.plan.validate_context import (
    LEVELS,
    LINT_CODES,
    Context,
    Issue,
    Level,
    ValidationOptions,
    output_schema_of,
)
from planrail.plan.validate_policies import policies_pass
from planrail.plan.validate_refs import (
    cycles_pass,
    dependencies_pass,
    output_fields_pass,
    references_pass,
)
from planrail.plan.validate_shape import PlanSource, load_pass, normalize_pass, shape_pass

__all__ = [
    "CODES",
    "LEVELS",
    "LINT_CODES",
    "Issue",
    "Level",
    "ValidationOptions",
    "ValidationReport",
    "check_plan",
    "load_plan",
    "output_schema_of",
    "validate",
]

CODES = (
    "parse_error",
    "schema_error",
    "invalid_id",
    "duplicate_id",
    "unknown_dependency",
    "self_dependency",
    "cycle",
    "invalid_reference",
    "unknown_step_reference",
    "undeclared_dependency",
    "unknown_tool",
    "invalid_action",
    "missing_argument",
    "unknown_argument",
    "unknown_output_field",
    "type_mismatch",
    "limit_exceeded",
    "invalid_policy",
    "invalid_predicate",
    *STAGE_CODES,
    "duplicate_key",
    "placeholder_literal",
    *LINT_CODES,
)
"""Stable error codes. More may be added; none is ever renamed. ``placeholder_literal`` and
the lints (``LINT_CODES``) are warnings unless :class:`ValidationOptions` makes them errors."""


@dataclass
class ValidationReport:
    """The outcome of :func:`validate`. ``plan`` and ``compiled`` are set exactly when ``valid``
    is true."""

    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    plan: Plan | None = None
    compiled: CompiledPlan | None = None
    """The plan with what validation learned (:mod:`planrail.plan.compiled`): what a run of it
    reads."""

    @property
    def valid(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        """The ``validate --json`` object: ``{valid, errors, warnings}``."""
        return {
            "valid": self.valid,
            "errors": [i.to_dict() for i in self.errors],
            "warnings": [i.to_dict() for i in self.warnings],
        }

    def raise_for_errors(self) -> Plan:
        if self.plan is None:
            raise PlanValidationError(self.errors)
        return self.plan

    def compiled_or_raise(self) -> CompiledPlan:
        """The compiled plan; :class:`PlanValidationError` (with every issue) if invalid."""
        if self.compiled is None:
            raise PlanValidationError(self.errors)
        return self.compiled


def validate(
    source: PlanSource,
    tools: ToolRegistry | Iterable[AnyTool] | None = None,
    *,
    limits: PlanLimits | None = None,
    check_tools: bool = True,
) -> ValidationReport:
    """Check a plan statically and report every problem found.

    ``source`` is plan text (JSON or YAML), a path, a dict or a :class:`Plan`. Without ``tools``
    (or with ``check_tools=False``) tool names, arguments and output fields are not checked.
    The same as :func:`check_plan` with the default :class:`ValidationOptions`.
    """
    return check_plan(source, tools, limits=limits, check_tools=check_tools)


def check_plan(
    source: PlanSource,
    tools: ToolRegistry | Iterable[AnyTool] | None = None,
    *,
    options: ValidationOptions | None = None,
    limits: PlanLimits | None = None,
    check_tools: bool = True,
    warnings: bool = True,
) -> ValidationReport:
    """:func:`validate` with :class:`ValidationOptions`: ``--strict`` placeholders, the lints'
    levels (``planrail validate --strict --lint CODE=LEVEL``).

    ``warnings=False`` keeps no warnings and skips the checks whose every finding would be one
    (``duplicate_call``; ``placeholder_literal`` and the lints at the ``warning`` level): the
    errors and the compiled plan are the same. A run validates so (:func:`planrail.prepare`
    shows no warnings); :func:`validate` and ``planrail validate`` report them."""
    ctx = Context(
        ToolRegistry.of(tools),
        limits or PlanLimits(),
        options or ValidationOptions(),
        check_tools=check_tools and tools is not None,
        with_warnings=warnings,
    )
    if isinstance(source, CompiledPlan):
        source = source.plan
    # Validating a big plan allocates millions of objects that live until it ends; the cyclic
    # collector's full passes over them grew the time faster than the plan (15.5x per 10x steps
    # at 100,000, against 12.1x with the collector paused). Nothing here makes reference
    # cycles, so the collector is paused while the passes run.
    with collector_paused():
        load_pass(ctx, source)
        if ctx.raw is not None:  # could not load: nothing else to check
            for pass_ in _PASSES:
                if ctx.check_tools or pass_ not in _TOOL_PASSES:
                    pass_(ctx)
    report = ValidationReport(ctx.errors, ctx.warnings)
    if not ctx.errors:
        with collector_paused():
            plan = report.plan = Plan.model_validate(
                {**{k: v for k, v in ctx.raw.items() if k != "steps"}, "steps": ctx.steps}
            )
            # The passes are done: what only they read goes before the compiled plan is built
            # (the peak memory of validating a big plan is this moment).
            refs, ctx.refs, ctx.used, ctx.compiled_refs = ctx.compiled_refs, {}, {}, {}
            ctx.literal_checks.clear()
            ctx._producer_schemas.clear()
            ctx.parser.clear()
            ctx._walks.clear()
            compiled = CompiledPlan(plan, ctx.registry, ctx.templates, refs, consume=True)
            if ctx.check_tools:
                compiled.checked_with = (ctx.options, ctx.limits)
            report.compiled = compiled
    return report


def load_plan(
    source: PlanSource,
    tools: ToolRegistry | Iterable[AnyTool] | None = None,
    *,
    limits: PlanLimits | None = None,
) -> Plan:
    """Load and validate a plan; :class:`PlanValidationError` (with every issue) if invalid."""
    return validate(source, tools, limits=limits).raise_for_errors()


def _warnings(ctx: Context) -> None:
    """Warnings for what is allowed but suspicious."""
    if not ctx.raw["steps"]:
        ctx.warn("empty_plan", None, "$.steps", "the plan has no steps")
    if not ctx.with_warnings:
        return
    for step in self_waivers(ctx.steps):
        ctx.warn(
            "approval_not_waived",
            step.id,
            f"{ctx.at(step)}.requires_approval",
            "a step cannot waive approval: requires_approval: false counts as unset, and"
            " its tool decides (the tool's own requires_approval, else its side effects)",
        )


_PASSES: list[Callable[[Context], None]] = [
    normalize_pass,
    shape_pass,
    dependencies_pass,
    references_pass,
    cycles_pass,
    tools_pass,
    output_fields_pass,
    arguments_pass,
    _warnings,
    policies_pass,
    stages_pass,
    duplicate_calls_pass,
    placeholders_pass,
    lints_pass,
]
_TOOL_PASSES = {tools_pass, output_fields_pass, arguments_pass, lints_pass}
