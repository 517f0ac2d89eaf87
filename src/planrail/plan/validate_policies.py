"""The validator pass for step policies: what pydantic cannot see in a single field.

Reports (codes are stable):

- ``invalid_predicate``: a ``condition``, ``when`` or ``repeat.until`` that is not a predicate;
- ``type_mismatch``: a ``condition`` or ``when`` whose operands' declared types can never work
  (a guard ``"${a.count}"`` that is not a boolean, ``gt`` between a string and a number);
- ``invalid_policy``: ``repeat.max_iterations`` or ``max_parallel`` over the limit, a
  ``for_each`` that is not one reference or points at an output that is not a list, a join rule
  that can never be met, a tool whose default retry policy is invalid;
- ``invalid_reference``: a malformed ``{"$first": [...]}``, ``${self}`` outside
  ``repeat.until``, ``${item}`` in a ``when`` guard;
- ``unknown_output_field``: ``${self.field}`` that the step's own output does not have;

and warnings for what is allowed but suspicious (``$first`` under ``join: all_succeeded``,
``max_parallel`` without ``for_each``, ``timeout`` longer than ``total_timeout``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pydantic

from planrail.errors import ReferenceSyntaxError
from planrail.plan.first import FIRST, first_problems, has_first
from planrail.plan.model import RetrySpec, Step
from planrail.plan.predicates import check_predicate, predicate_type_problems
from planrail.plan.refs import Parse, Reference, parse_reference
from planrail.plan.tools import ToolSpec
from planrail.plan.validate_context import Context, unit_output_schema, walk_schema

__all__ = ["MAX_ITERATIONS", "MAX_PARALLEL", "policies_pass"]

MAX_ITERATIONS = 1000
"""Largest ``repeat.max_iterations`` a plan may declare (``PlanLimits.max_iterations`` if set);
a run may hold loops to less (``RunPolicy.max_iterations``)."""

MAX_PARALLEL = 1000
"""Largest ``max_parallel`` a plan may declare (``PlanLimits.max_parallel`` if set)."""


def policies_pass(ctx: Context) -> None:
    """invalid_policy / invalid_predicate / invalid_reference / unknown_output_field on policies."""
    max_iterations = getattr(ctx.limits, "max_iterations", MAX_ITERATIONS)
    max_parallel = getattr(ctx.limits, "max_parallel", MAX_PARALLEL)
    types_of = ctx.ref_types()
    retries: dict[str, str | None] = {}  # tool -> what is wrong with its default retry policy
    refs_of, compiled_of, first = ctx.refs, ctx.compiled_refs, ctx.first
    for step in ctx.steps:
        sid = step.id
        # the usual step holds no predicate, fallback or loop: only its arguments may hold a
        # $first, and only item/self references (which the references pass saw) need _locals
        plain = (
            step.fallback is None
            and step.condition is None
            and step.when is None
            and step.repeat is None
        )
        if not plain:
            _predicates(ctx, step, ctx.at(step), types_of)
        refs = refs_of.get(sid)
        if refs is None or compiled_of.get(sid) is not refs or first[sid] is not step:
            _locals(ctx, step, ctx.at(step))
        if not plain or has_first(step.args):
            _first(ctx, step, ctx.at(step))
        if step.repeat is not None and step.repeat.max_iterations > max_iterations:
            ctx.error(
                "invalid_policy",
                sid,
                f"{ctx.at(step)}.repeat.max_iterations",
                f"max_iterations is {step.repeat.max_iterations:,}; the limit is"
                f" {max_iterations:,} — a loop must end in reasonable time",
            )
        if step.max_parallel is not None:
            if step.for_each is None:
                ctx.warn(
                    "unused_policy",
                    sid,
                    f"{ctx.at(step)}.max_parallel",
                    "max_parallel only applies to a step with for_each",
                )
            elif step.max_parallel > max_parallel:
                ctx.error(
                    "invalid_policy",
                    sid,
                    f"{ctx.at(step)}.max_parallel",
                    f"max_parallel is {step.max_parallel:,}; the limit is {max_parallel:,}",
                )
        if step.for_each is not None:
            _for_each(ctx, step, ctx.at(step), types_of)
        if (
            step.join != "all_succeeded"
            and not step.depends_on
            and not ctx.skips(step, "depends_on")
        ):
            ctx.error(
                "invalid_policy",
                sid,
                f"{ctx.at(step)}.join",
                f"join '{step.join}' needs dependencies to wait for; this step has none",
            )
        if (
            step.timeout is not None
            and step.total_timeout is not None
            and step.timeout > step.total_timeout
        ):
            ctx.warn(
                "unused_policy",
                sid,
                f"{ctx.at(step)}.timeout",
                f"timeout ({step.timeout:g}s) is longer than total_timeout"
                f" ({step.total_timeout:g}s), which cuts every attempt first",
            )
        tool = step.tool
        if tool and step.retry is None and step.action == "tool_call":
            # the step takes its tool's default retry policy (each tool's read once)
            problem = retries[tool] if tool in retries else _tool_retry(ctx, tool, retries)
            if problem is not None:
                ctx.error(
                    "invalid_policy",
                    sid,
                    f"{ctx.at(step)}.tool",
                    f"tool '{tool}' declares an invalid default retry policy"
                    f" ({problem}); give the step its own 'retry'",
                )


def _predicates(ctx: Context, step: Step, at: str, types_of: Any) -> None:
    """invalid_predicate; type_mismatch where the operands' declared types can never work
    (``repeat.until`` reads the step's own output, which ``types_of`` does not know)."""
    fields: list[tuple[str, Any]] = []
    if step.action == "condition_check" and step.condition is not None:
        fields.append(("condition", step.condition))
    if step.when is not None:
        fields.append(("when", step.when))
    typed = len(fields)
    if step.repeat is not None:
        fields.append(("repeat.until", step.repeat.until))
    for i, (name, value) in enumerate(fields):
        for path, message in check_predicate(value, ctx.template):
            ctx.error("invalid_predicate", step.id, f"{at}.{name}{path}", message)
        if i < typed:
            for path, message in predicate_type_problems(value, types_of):
                ctx.error("type_mismatch", step.id, f"{at}.{name}{path}", message)


def _references_in(value: Any, path: str, parse: Parse) -> Iterable[tuple[str, Reference]]:
    stack = [(path, value)]
    while stack:
        p, v = stack.pop()
        if isinstance(v, str):
            if "$" in v:
                try:
                    refs = parse(v).references
                except ReferenceSyntaxError:
                    continue  # reported by the references pass
                for ref in refs:
                    yield p, ref
        elif isinstance(v, dict):
            stack.extend((f"{p}.{k}", x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{p}[{i}]", x) for i, x in enumerate(v))


def _locals(ctx: Context, step: Step, at: str) -> None:
    """``${self}`` only in ``repeat.until`` (checked against the step's own output);
    ``${item}`` not in ``when`` (for a step in which the references pass found an item/self
    reference, or a repeated id's)."""
    fields: list[tuple[str, Any]] = [("args", step.args)]
    for name in ("prompt", "condition", "when"):
        if getattr(step, name) is not None:
            fields.append((name, getattr(step, name)))
    if step.fallback is not None:
        fields.append(("fallback", step.fallback.model_dump(exclude_unset=True)))
    for name, value in fields:
        for path, ref in _references_in(value, f"{at}.{name}", ctx.template):
            if ref.step == "self" and "self" not in ctx.known and step.repeat is not None:
                ctx.error(
                    "invalid_reference",
                    step.id,
                    path,
                    f"{ref} is the latest iteration's output, defined only in"
                    " repeat.until; earlier iterations are in StepContext.history",
                )
            if (
                ref.step == "item"
                and "item" not in ctx.known
                and name == "when"
                and step.for_each is not None
            ):
                ctx.error(
                    "invalid_reference",
                    step.id,
                    path,
                    f"{ref}: 'when' is decided once for the whole step, before the"
                    " fan-out; filter the list in an earlier step instead",
                )
    if step.repeat is None or "self" in ctx.known:
        return
    own = unit_output_schema(step, ctx.registry)
    if own is None:
        return
    for path, ref in _references_in(step.repeat.until, f"{at}.repeat.until", ctx.template):
        if ref.step == "self":
            status, problem = walk_schema(own, ref)
            if status == "missing" and problem:
                ctx.error("unknown_output_field", step.id, path, problem)


def _first(ctx: Context, step: Step, at: str) -> None:
    fields: list[tuple[str, Any]] = [("args", step.args)]
    if step.fallback is not None:
        fields.append(("fallback.args", step.fallback.args))
        if "value" in step.fallback.model_fields_set:
            fields.append(("fallback.value", step.fallback.value))
    for name in ("condition", "when"):
        if getattr(step, name) is not None:
            fields.append((name, getattr(step, name)))
    if step.repeat is not None:
        fields.append(("repeat.until", step.repeat.until))
    used = False
    for name, value in fields:
        if not has_first(value):  # the usual case: no path is built
            continue
        for path, message in first_problems(value, f"{at}.{name}"):
            ctx.error("invalid_reference", step.id, path, message)
        for path, candidates in _firsts(value, f"{at}.{name}"):
            used = True
            for i, cand in enumerate(candidates[:-1]):
                if not any(True for _ in _references_in(cand, "", ctx.template)):
                    ctx.warn(
                        "unreachable_candidate",
                        step.id,
                        f"{path}[{i + 1}]",
                        f"candidate {i} of {FIRST} holds no reference, so it is always"
                        " available and the candidates after it are never used",
                    )
                    break
    if used and step.join == "all_succeeded":
        ctx.warn(
            "first_always_first",
            step.id,
            f"{at}.join",
            f"with join all_succeeded every dependency has succeeded before this step"
            f" runs, so {FIRST} always takes its first candidate; use join any_succeeded"
            " or all_finished",
        )


def _firsts(value: Any, path: str) -> Iterable[tuple[str, list[Any]]]:
    stack = [(path, value)]
    while stack:
        p, v = stack.pop()
        if isinstance(v, dict):
            cands = v.get(FIRST)
            if len(v) == 1 and isinstance(cands, list) and cands:
                yield f'{p}["{FIRST}"]', cands
            stack.extend((f"{p}.{k}", x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{p}[{i}]", x) for i, x in enumerate(v))


def _for_each(ctx: Context, step: Step, at: str, types_of: Any) -> None:
    source = step.for_each
    assert source is not None
    try:
        parse_reference(source)
    except ReferenceSyntaxError:
        ctx.error(
            "invalid_policy",
            step.id,
            f"{at}.for_each",
            f"for_each must be exactly one reference to a list, such as"
            f' "${{search.results}}"; got {source[:80]!r}',
        )
        return
    types = types_of(source)
    if isinstance(types, frozenset) and types and "array" not in types:
        ctx.error(
            "invalid_policy",
            step.id,
            f"{at}.for_each",
            f"for_each needs a list, but {source} is {'/'.join(sorted(types))}"
            " according to its producer's output schema",
        )


def _tool_retry(ctx: Context, tool: str, seen: dict[str, str | None]) -> str | None:
    """What is wrong with ``tool``'s default retry policy, kept in ``seen``."""
    problem = seen[tool] = _retry_problem(ctx.registry.spec(tool))
    return problem


def _retry_problem(spec: ToolSpec | None) -> str | None:
    if spec is None or spec.retry is None:
        return None
    try:
        RetrySpec.model_validate(dict(spec.retry))
    except pydantic.ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}"
    return None
