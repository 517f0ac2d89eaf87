"""The graph passes: dependencies, references, cycles and the fields references reach.

Reports ``unknown_dependency``, ``self_dependency``, ``invalid_reference``,
``unknown_step_reference``, ``undeclared_dependency``, ``cycle`` and ``unknown_output_field``,
and the ``duplicate_dependency`` and ``unchecked_reference`` warnings.
"""

from __future__ import annotations

from planrail.errors import ReferenceSyntaxError
from planrail.plan.compiled import LOCAL_NAMES, StepPath, step_fields
from planrail.plan.graph import cycles
from planrail.plan.model import Step
from planrail.plan.refs import (
    NON_TEXT_SCALARS,
    STR_ONLY,
    Reference,
    iter_strings_with_dollar,
    json_path,
)
from planrail.plan.validate_context import Context, walk_strings

__all__ = ["cycles_pass", "dependencies_pass", "output_fields_pass", "references_pass"]


def dependencies_pass(ctx: Context) -> None:
    """unknown_dependency / self_dependency: every ``depends_on`` entry names another step."""
    known = ctx.known
    is_known = known.__contains__
    for step in ctx.steps:
        deps = step.depends_on
        if step.id not in deps and all(map(is_known, deps)) and len(set(deps)) == len(deps):
            continue  # the usual step: nothing to report
        at = ctx.at(step)
        seen: set[str] = set()
        for j, dep in enumerate(deps):
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
    known = ctx.known
    templates, parse = ctx.templates, ctx.parser  # what ctx.template does, without its call
    skipped = ctx.skipped
    refs_of, compiled_of, used_of = ctx.refs, ctx.compiled_refs, ctx.used
    paths: dict[StepPath, StepPath] = {}  # kept per reference: shared
    arg_paths: dict[str, StepPath] = {}  # the same, by argument name: ("args", name)
    for step in ctx.steps:
        sid = step.id
        deps = step.depends_on
        found: list[tuple[StepPath, Reference]] = []
        every: list[tuple[StepPath, Reference]] | None = None  # with item/self, when present
        used: set[str] = set()
        # with a malformed depends_on (left out), which edges were meant is unknown
        malformed = skipped and "depends_on" in skipped.get(id(step), ())
        declared = None if malformed else set(deps)
        for segments, s in _dollar_strings(step, paths, arg_paths):
            try:
                t = templates.get(s)
                if t is None:
                    t = templates[s] = parse(s)
            except ReferenceSyntaxError as exc:
                ctx.error("invalid_reference", sid, json_path(ctx.at(step), segments), exc.message)
                continue
            for ref in t.references:
                target = ref.step
                if target in known and target != sid:
                    if declared is not None and target not in declared:
                        ctx.error(
                            "undeclared_dependency",
                            sid,
                            json_path(ctx.at(step), segments),
                            f"{ref} uses the output of '{target}' but '{target}'"
                            f" is not in depends_on; add it to depends_on",
                        )
                        declared.add(target)  # report each missing edge once
                    found.append((segments, ref))
                    if every is not None:
                        every.append((segments, ref))
                    used.add(target)
                    continue
                local = LOCAL_NAMES.get(target)
                if local is not None and target not in known:
                    if not _local_allowed(ctx, step, local, segments[0]):
                        ctx.error(
                            "invalid_reference",
                            sid,
                            json_path(ctx.at(step), segments),
                            f"{ref} is only defined inside a step with '{local}'",
                        )
                    elif every is None:
                        every = [*found, (segments, ref)]
                    else:
                        every.append((segments, ref))
                elif target == sid:
                    ctx.error(
                        "self_dependency",
                        sid,
                        json_path(ctx.at(step), segments),
                        f"{ref} references this step's own output, which does not"
                        " exist yet; reference an earlier step",
                    )
                else:
                    ctx.error(
                        "unknown_step_reference",
                        sid,
                        json_path(ctx.at(step), segments),
                        f"{ref} references '{target}', which is not a step of this"
                        f" plan{ctx.did_you_mean(target, known)}",
                    )
        # a repeated id's references are checked, but the graph passes follow the first step
        if sid not in refs_of:
            refs_of[sid] = found
            compiled_of[sid] = found if every is None else every
            used_of[sid] = used
            if deps and not used.issuperset(deps):
                ctx.dataless.append(sid)
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


def _dollar_strings(
    step: Step, paths: dict[StepPath, StepPath], arg_paths: dict[str, StepPath]
) -> list[tuple[StepPath, str]]:
    """``iter_strings_with_dollar`` over :func:`step_fields`, in the same order, each path the
    one equal path kept in ``paths`` (or, for a flat argument, in ``arg_paths`` by its name):
    the usual flat arguments (strings, scalars, lists of strings) are read without the walk,
    and a step without the other fields :func:`step_fields` yields is done there."""
    args = step.args
    found: list[tuple[StepPath, str]] = []
    for k, v in args.items():
        kind = type(v)
        if kind is str:
            if "$" in v:
                where = arg_paths.get(k)
                if where is None:
                    where = arg_paths[k] = ("args", k)
                found.append((where, v))
        elif kind is list and STR_ONLY.issuperset(map(type, v)):  # a list of strings
            for i, item in enumerate(v):
                if "$" in item:
                    where = ("args", k, i)
                    found.append((paths.setdefault(where, where), item))
        elif kind not in NON_TEXT_SCALARS:  # another container, a subclass: the walk
            found = [
                (paths.setdefault(where, where), text)
                for where, text in iter_strings_with_dollar(args, ("args",))
            ]
            break
    if (
        step.prompt is None
        and step.condition is None
        and step.when is None
        and step.for_each is None
        and step.fallback is None
        and step.repeat is None
    ):
        return found  # the usual step: step_fields yields nothing more
    fields = step_fields(step)
    next(fields)  # the arguments, read above
    for field, value in fields:
        found.extend(
            (paths.setdefault(where, where), text)
            for where, text in iter_strings_with_dollar(value, field)
        )
    return found


def _local_allowed(ctx: Context, step: Step, local: str, field: object) -> bool:
    if ctx.skips(step, local):  # the for_each / repeat it needs is there, but malformed
        return True
    if local == "for_each":
        return step.for_each is not None and field != "for_each"
    return step.repeat is not None


def _json_path(ctx: Context, sid: str | None, where: StepPath | str) -> str:
    """The JSONPath of a reference: the plan's output ones are kept as JSONPath already."""
    if isinstance(where, str):
        return where
    return json_path(ctx.at(ctx.first[sid or ""]), where)


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
    # (producer, path) found in its output schema: thousands of steps read the same field
    fine: set[tuple[str, tuple[str | int, ...]]] = set()
    for sid, refs in ctx.refs.items():
        for where, ref in refs:
            if ref.path and (ref.step, ref.path) not in fine:
                _output_field(ctx, sid, where, ref, unchecked_warned, fine)
    for where_, ref in ctx.output_refs:
        if ref.path and (ref.step, ref.path) not in fine:
            _output_field(ctx, None, where_, ref, unchecked_warned, fine)


def _output_field(
    ctx: Context,
    sid: str | None,
    where: StepPath | str,
    ref: Reference,
    unchecked_warned: set[str],
    fine: set[tuple[str, tuple[str | int, ...]]],
) -> None:
    producer = ctx.first.get(ref.step)
    if producer is None:
        return
    walked = ctx.ref_walk(ref)
    if walked is None:
        if producer.tool in ctx.registry and ref.step not in unchecked_warned:
            unchecked_warned.add(ref.step)
            ctx.warn(
                "unchecked_reference",
                sid,
                _json_path(ctx, sid, where),
                f"tool '{producer.tool}' declares no output schema, so field references"
                f" into '{ref.step}' (such as {ref}) are not checked",
            )
        return
    status, detail = ctx.walk(ref, walked)
    if status == "ok":
        fine.add((ref.step, ref.path))
    elif status == "missing":
        ctx.error("unknown_output_field", sid, _json_path(ctx, sid, where), detail or "")
    elif status == "unknown" and ref.step not in unchecked_warned:
        unchecked_warned.add(ref.step)
        what = f"tool '{producer.tool}'" if producer.tool else f"step '{ref.step}'"
        ctx.warn(
            "unchecked_reference",
            sid,
            _json_path(ctx, sid, where),
            f"the output schema of {what} does not describe field {detail!r} (an object"
            f" or value of any shape), so {ref} and other such references into"
            f" '{ref.step}' are not checked; declare the field in the output schema",
        )
