"""The graph passes: dependencies, references, cycles and the fields references reach.

Reports ``unknown_dependency``, ``self_dependency``, ``invalid_reference``,
``unknown_step_reference``, ``undeclared_dependency``, ``cycle`` and ``unknown_output_field``,
and the ``duplicate_dependency`` and ``unchecked_reference`` warnings.
"""

from __future__ import annotations

from planrail.errors import ReferenceSyntaxError
from planrail.plan.graph import cycles
from planrail.plan.model import Step
from planrail.plan.refs import Reference
from planrail.plan.validate_context import (
    Context,
    output_schema_of,
    step_strings,
    walk_strings,
)

__all__ = ["cycles_pass", "dependencies_pass", "output_fields_pass", "references_pass"]

# Names a step may reference besides other steps: the current for_each item / repeat output.
_LOCAL_NAMES = {"item": "for_each", "self": "repeat"}


def dependencies_pass(ctx: Context) -> None:
    """unknown_dependency / self_dependency: every ``depends_on`` entry names another step."""
    for step in ctx.steps:
        at = ctx.at(step)
        seen: set[str] = set()
        for j, dep in enumerate(step.depends_on):
            if dep == step.id:
                ctx.error(
                    "self_dependency",
                    step.id,
                    f"{at}.depends_on[{j}]",
                    f"step '{step.id}' depends on itself; remove it from depends_on",
                )
            elif dep not in ctx.known:
                ctx.error(
                    "unknown_dependency",
                    step.id,
                    f"{at}.depends_on[{j}]",
                    f"depends on '{dep}', which is not a step of this plan"
                    f"{ctx.did_you_mean(dep, ctx.known)}",
                )
            elif dep in seen:
                ctx.warn(
                    "duplicate_dependency",
                    step.id,
                    f"{at}.depends_on[{j}]",
                    f"'{dep}' is listed twice",
                )
            seen.add(dep)


def references_pass(ctx: Context) -> None:
    """invalid_reference / unknown_step_reference / self_dependency / undeclared_dependency."""
    for step in ctx.steps:
        at = ctx.at(step)
        found: list[tuple[str, Reference]] = []
        used: set[str] = set()
        # with a malformed depends_on (left out), which edges were meant is unknown
        declared = None if ctx.skips(step, "depends_on") else set(step.depends_on)
        for field_path, value in step_strings(step):
            for path, s in walk_strings(value, f"{at}.{field_path}"):
                try:
                    t = ctx.template(s)
                except ReferenceSyntaxError as exc:
                    ctx.error("invalid_reference", step.id, path, exc.message)
                    continue
                for ref in t.references:
                    local = _LOCAL_NAMES.get(ref.step)
                    if local is not None and ref.step not in ctx.known:
                        if not _local_allowed(ctx, step, local, field_path):
                            ctx.error(
                                "invalid_reference",
                                step.id,
                                path,
                                f"{ref} is only defined inside a step with '{local}'",
                            )
                        continue
                    if ref.step == step.id:
                        ctx.error(
                            "self_dependency",
                            step.id,
                            path,
                            f"{ref} references this step's own output, which does not"
                            " exist yet; reference an earlier step",
                        )
                    elif ref.step not in ctx.known:
                        ctx.error(
                            "unknown_step_reference",
                            step.id,
                            path,
                            f"{ref} references '{ref.step}', which is not a step of this"
                            f" plan{ctx.did_you_mean(ref.step, ctx.known)}",
                        )
                    else:
                        if declared is not None and ref.step not in declared:
                            ctx.error(
                                "undeclared_dependency",
                                step.id,
                                path,
                                f"{ref} uses the output of '{ref.step}' but '{ref.step}'"
                                f" is not in depends_on; add it to depends_on",
                            )
                            declared.add(ref.step)  # report each missing edge once
                        found.append((path, ref))
                        used.add(ref.step)
        # a repeated id's references are checked, but the graph passes follow the first step
        if step.id not in ctx.refs:
            ctx.refs[step.id] = found
            ctx.used[step.id] = used
            if step.depends_on and not used.issuperset(step.depends_on):
                ctx.dataless.append(step.id)
    output = ctx.raw.get("output")
    if output is not None:
        for path, s in walk_strings(output, "$.output"):
            try:
                t = ctx.template(s)
            except ReferenceSyntaxError as exc:
                ctx.error("invalid_reference", None, path, exc.message)
                continue
            for ref in t.references:
                if ref.step not in ctx.known:
                    ctx.error(
                        "unknown_step_reference",
                        None,
                        path,
                        f"{ref} references '{ref.step}', which is not a step of this plan"
                        f"{ctx.did_you_mean(ref.step, ctx.known)}",
                    )
                else:
                    ctx.output_refs.append((path, ref))


def _local_allowed(ctx: Context, step: Step, local: str, field_path: str) -> bool:
    if ctx.skips(step, local):  # the for_each / repeat it needs is there, but malformed
        return True
    if local == "for_each":
        return step.for_each is not None and field_path != "for_each"
    return step.repeat is not None


def cycles_pass(ctx: Context) -> None:
    """cycle: no step may (transitively) depend on itself, by depends_on or by reference."""
    # While every edge leads to a step listed earlier, the plan's order is a topological order
    # and there is no cycle: plans are nearly always written so, and the search is skipped.
    if ctx.in_plan_order():
        return
    for members in cycles(ctx.edges()):
        loop = " -> ".join([*members, members[0]])
        first = members[0]
        ctx.error(
            "cycle",
            first,
            f"$.steps[{ctx.known[first]}].depends_on",
            f"steps {', '.join(members)} form a cycle ({loop} by depends_on/references);"
            " remove one of these dependencies",
        )


def output_fields_pass(ctx: Context) -> None:
    """unknown_output_field: every reference path exists in the producer's output schema;
    ``unchecked_reference`` (once per producer) where the producer's shape is unknown."""
    unchecked_warned: set[str] = set()
    all_refs: list[tuple[str | None, str, Reference]] = [
        (sid, p, r) for sid, refs in ctx.refs.items() for p, r in refs
    ]
    all_refs.extend((None, p, r) for p, r in ctx.output_refs)
    for sid, path, ref in all_refs:
        producer = ctx.first.get(ref.step)
        if producer is None or not ref.path:
            continue
        schema = output_schema_of(producer, ctx.registry)
        if schema is None:
            if producer.tool in ctx.registry and ref.step not in unchecked_warned:
                unchecked_warned.add(ref.step)
                ctx.warn(
                    "unchecked_reference",
                    sid,
                    path,
                    f"tool '{producer.tool}' declares no output schema, so field references"
                    f" into '{ref.step}' (such as {ref}) are not checked",
                )
            continue
        status, detail = ctx.walk(schema, ref)
        if status == "missing":
            ctx.error("unknown_output_field", sid, path, detail or "")
        elif status == "unknown" and ref.step not in unchecked_warned:
            unchecked_warned.add(ref.step)
            what = f"tool '{producer.tool}'" if producer.tool else f"step '{ref.step}'"
            ctx.warn(
                "unchecked_reference",
                sid,
                path,
                f"the output schema of {what} does not describe field {detail!r} (an object"
                f" or value of any shape), so {ref} and other such references into"
                f" '{ref.step}' are not checked; declare the field in the output schema",
            )
