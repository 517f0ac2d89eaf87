"""``placeholder_literal``: strings that look like a reference in another syntax, or a hole.

Models write placeholders in the syntax of whatever framework they learnt — ``{{a.user_id}}``,
``$a.user_id``, ``<a.user_id>``, ``$var1$`` (NESTFUL), ``<node-1>`` (TaskBench), ``#E1``
(ReWOO), ``$1`` (LLMCompiler), ``TBD`` — and planrail would pass the text to the tool as the
value. This pass finds them in ``args``, ``fallback`` and ``prompt`` and in the plan's
``output``, and says which ``${step.field}`` was probably meant.

The patterns are tuned for precision (docs/plan-format.md gives the corpus and its precision
and recall): prices (``"$5"``), markdown and HTML (``<b>``, ``<https://…>``), LaTeX (``$x$``)
and shell variables (``$HOME``) are not flagged, and an argument whose schema says it takes
a template (``format: template``, or "template" in its name, title or description) is not
scanned at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from planrail.plan.effects import tool_effect
from planrail.plan.model import Step
from planrail.plan.refs import NON_TEXT_SCALARS, STR_ONLY, Reference, json_path
from planrail.plan.validate_context import Context, Level, output_schema_of

__all__ = ["SYNTAXES", "Placeholder", "find_placeholders", "placeholders_pass"]

_PATH = r"(?:\.[A-Za-z_0-9][\w-]*)*"


@dataclass(frozen=True, slots=True)
class _Pattern:
    syntax: str
    regex: re.Pattern[str]
    gate: str
    """A substring the text must hold for the regex to be tried (the common case is none)."""


# (syntax, regex, gate); groups: "head" a name (a step id, a field, node-1, output_of_x),
# "path" its .a.b, "num" a number, "expr" a template hole's expression
_TABLE = (
    ("{{…}} template hole", r"\{\{(?P<expr>[^{}]{1,200})\}\}", "{{"),
    ("$name$ (NESTFUL)", rf"(?<![\w$])\$(?P<head>[A-Za-z_]\w*)(?P<path>{_PATH})\$(?!\w)", "$"),
    ("$name.field", rf"(?<![\w$])\$(?P<head>[A-Za-z_]\w*)(?P<path>{_PATH})(?![\w${{(])", "$"),
    ("$N (LLMCompiler)", r"^\s*\$(?P<num>\d{1,4})\s*$", "$"),
    ("#E1 (ReWOO)", r"(?<![\w#&])#E(?P<num>\d{1,4})(?![\w])", "#E"),
    ("<name> hole", rf"(?<![\w<])<(?P<head>[A-Za-z_][\w-]*)(?P<path>{_PATH})>", "<"),
    ("{name} format hole", rf"(?<![$\w{{]){{(?P<head>[A-Za-z_]\w*)(?P<path>{_PATH})}}(?!}})", "{"),
)
_PATTERNS = tuple(_Pattern(syntax, re.compile(rx), gate) for syntax, rx, gate in _TABLE)
SYNTAXES: tuple[str, ...] = (*(p.syntax for p in _PATTERNS), "TBD-style sentinel")
"""The placeholder syntaxes recognised, as the messages name them."""

_SENTINELS = frozenset(
    {
        "tbd",
        "tba",
        "todo",
        "fixme",
        "placeholder",
        "xxx",
        "xxxx",
        "???",
        "to be determined",
        "fill in",
        "fill_in",
        "insert here",
        "insert_here",
    }
)
_HTML = frozenset(
    {"a", "abbr", "b", "blockquote", "body", "br", "code", "dd", "del", "div", "dl", "dt", "em",
     "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "html", "i", "img", "ins", "kbd", "li",
     "ol", "p", "pre", "q", "s", "small", "span", "strong", "sub", "sup", "table", "tbody", "td",
     "th", "thead", "title", "tr", "u", "ul"}
)  # fmt: skip
_MONEY = re.compile(r"price|cost|amount|fee|total|budget|salary|usd|dollar|money|pay|balance", re.I)
_TRAILING_NUMBER = re.compile(r"(\d+)$")
_STRIP_PREFIX = re.compile(r"^(?:output_of_|result_of_|output_|result_|outputs?_from_)", re.I)
_NODE = re.compile(r"^node[-_]?(\d+)$", re.I)
_DOTTED = re.compile(rf"([A-Za-z_][\w-]*)({_PATH})")


@dataclass(frozen=True, slots=True)
class Placeholder:
    """One placeholder found in a string: its text, its syntax, and the name or number in it."""

    text: str
    syntax: str
    head: str | None = None
    path: tuple[str, ...] = ()
    number: int | None = None


def find_placeholders(text: str, *, step_ids: frozenset[str] = frozenset()) -> list[Placeholder]:
    """Every placeholder in ``text``. ``step_ids`` are the plan's steps: ``$name`` and
    ``{name}`` count only when ``name`` is one (``$HOME``, ``{0}`` and prose stay unflagged),
    and ``$N`` only when a step is numbered ``N``."""
    found: list[Placeholder] = []
    if _sentinel(text):
        return [Placeholder(text.strip(), "TBD-style sentinel")]
    dollars = "$" in text and text.count("$") != text.count("${") + text.count("$$")
    braces = "{" in text and text.count("{") != text.count("${")
    for pattern in _PATTERNS:
        # the usual string holds only references (and escapes): no regex runs for it
        if pattern.gate == "$":
            if not dollars:
                continue
        elif pattern.gate == "{":
            if not braces:
                continue
        elif pattern.gate not in text:
            continue
        for m in pattern.regex.finditer(text):
            hit = _placeholder(pattern.syntax, m, text, step_ids)
            if hit is not None:
                found.append(hit)
    return found


def _placeholder(
    syntax: str, m: re.Match[str], text: str, step_ids: frozenset[str]
) -> Placeholder | None:
    groups = m.groupdict()
    head: str | None = groups.get("head")
    raw_path = groups.get("path") or ""
    num = groups.get("num")
    expr = groups.get("expr")
    if expr is not None:  # {{ a.user_id }}: a hint only when the hole is a plain path
        plain = _DOTTED.fullmatch(expr.strip().strip("-").strip())
        head, raw_path = (plain.group(1), plain.group(2)) if plain else (None, "")
    path = tuple(p for p in raw_path.split(".") if p)
    whole = m.group(0).strip() == text.strip()
    if syntax == "$name.field" and not path and head not in step_ids:
        return None  # $HOME, $PATH: shell variables, not references
    if syntax == "$name$ (NESTFUL)" and not (
        path or head in step_ids or re.fullmatch(r"var_?\d+", head or "")
    ):
        return None  # LaTeX $x$
    if syntax == "$N (LLMCompiler)" and not _numbered(int(num or 0), step_ids):
        return None  # a price
    if syntax == "<name> hole" and head is not None:
        markers = any(c in head for c in "_-0123456789") or path or head in step_ids
        if head.lower() in _HTML or not (markers or whole):
            return None
    if syntax == "{name} format hole" and head not in step_ids:
        return None
    return Placeholder(m.group(0), syntax, head, path, int(num) if num is not None else None)


def _numbered(n: int, step_ids: frozenset[str]) -> bool:
    return any(_number_of(s) == n for s in step_ids)


def _number_of(step_id: str) -> int | None:
    m = _TRAILING_NUMBER.search(step_id)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------- the pass


def placeholders_pass(ctx: Context) -> None:
    """placeholder_literal: a warning (an error under ``strict``, or in the arguments of a
    side-effecting step when ``placeholders_in_side_effects`` says so)."""
    options = ctx.options
    may_err = options.strict or options.placeholders_in_side_effects == "error"
    if ctx.level("error" if may_err else "warning") == "off":
        return  # every finding would be a warning, and none is kept
    ids = frozenset(ctx.known)
    order = [s.id for s in ctx.steps]
    params: dict[str | None, tuple[dict[str, Any], frozenset[str]]] = {}
    none: tuple[dict[str, Any], frozenset[str]] = ({}, frozenset())

    for step in ctx.steps:
        fields: list[tuple[str, Any, str | None]] = []
        if step.args:
            fields.append(("args", step.args, step.tool))
        if step.fallback is not None:  # the rarer fields
            fields.append(("fallback.args", step.fallback.args, step.fallback.tool))
            if "value" in step.fallback.model_fields_set:
                fields.append(("fallback.value", step.fallback.value, None))
        if step.prompt is not None:
            fields.append(("prompt", step.prompt, None))
        for name, value, tool in fields:
            is_args = name[-4:] == "args"
            if is_args:
                found = params.get(tool)
                if found is None:
                    found = params[tool] = _params(ctx, tool)
                props, templates = found
            else:
                props, templates = none
            for segs, text in _candidates(ctx, value, templates):
                for hit in find_placeholders(text, step_ids=ids):
                    param = segs[0] if is_args and segs else None
                    if isinstance(param, str) and _money(hit, param, props.get(param)):
                        continue
                    path = json_path(f"{ctx.at(step)}.{name}", segs)
                    level = _level(ctx, tool if is_args else None)
                    message = _message(ctx, step, hit, order)
                    ctx.report(level, "placeholder_literal", step.id, path, message)
    output = ctx.raw.get("output")
    if output is not None:
        for segs, text in _candidates(ctx, output, frozenset()):
            for hit in find_placeholders(text, step_ids=ids):
                message = _message(ctx, None, hit, order)
                level = "error" if ctx.options.strict else "warning"
                ctx.report(level, "placeholder_literal", None, json_path("$.output", segs), message)


def _params(ctx: Context, tool: str | None) -> tuple[dict[str, Any], frozenset[str]]:
    """A tool's parameters, and those that take a template (never scanned)."""
    spec = ctx.registry.spec(tool or "")
    props = spec.input_schema.get("properties") if spec is not None else None
    props = props if isinstance(props, dict) else {}
    return props, frozenset(k for k, v in props.items() if _takes_template(k, v))


def _level(ctx: Context, tool: str | None) -> Level:
    if ctx.options.strict:
        return "error"
    if tool and tool_effect(ctx.registry.spec(tool)).changes_world:
        return ctx.options.placeholders_in_side_effects  # unknown tools are taken as unsafe
    return "warning"


def _candidates(
    ctx: Context, value: Any, skip: frozenset[str]
) -> list[tuple[tuple[str | int, ...], str]]:
    """``(path, literal text)`` for every string that may hold a placeholder — the text
    outside its references; top-level keys in ``skip`` (template parameters) are left out."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = []
    templates = ctx.templates
    if type(value) is dict:
        for k, v in value.items():
            if type(v) is str:  # the usual argument: checked here, without the stack
                if "$" in v:
                    t = templates.get(v)
                    if t is not None and (t.single is not None or _references_only(v)):
                        continue  # exactly one reference, or references and escapes only
                elif not ("{" in v or "<" in v or "#E" in v) and (
                    len(v) > 20
                    or (v.strip().lower() not in _SENTINELS and v[:5].lower() != "your_")
                ):
                    continue  # plain text without a trigger, not a sentinel: as _literal says
                text = _literal(ctx, v)
                if text is not None and k not in skip:
                    out.append(((k,), text))
            elif type(v) in NON_TEXT_SCALARS:
                continue  # a number, a boolean, null: no text to hold a placeholder
            elif k not in skip:
                stack.append(((k,), v))
    else:
        stack.append(((), value))
    while stack:
        segs, v = stack.pop()
        if type(v) is str:
            text = _literal(ctx, v)
            if text is not None:
                out.append((segs, text))
        elif type(v) is dict:
            stack.extend(((*segs, k), x) for k, x in v.items())
        elif type(v) is list:
            if STR_ONLY.issuperset(map(type, v)):  # a list of strings: its items, as popped
                for i in range(len(v) - 1, -1, -1):
                    text = _literal(ctx, v[i])
                    if text is not None:
                        out.append(((*segs, i), text))
            else:
                stack.extend(((*segs, i), x) for i, x in enumerate(v))
    return out


def _literal(ctx: Context, v: str) -> str | None:
    """The text of ``v`` outside its references if it may hold a placeholder, else None."""
    if "$" in v:
        t = ctx.templates.get(v)  # parsed by the references pass
        if t is not None:
            if t.single is not None or _references_only(v):
                return None  # the usual case
            return "\0".join(p for p in t.parts if type(p) is str)
        return v
    if "{" in v or "<" in v or "#E" in v:
        return v
    if len(v) <= 20 and (v.strip().lower() in _SENTINELS or v[:5].lower() == "your_"):
        return v
    return None


def _references_only(v: str) -> bool:
    """Whether parsed text ``v`` holds only references and ``$${`` escapes besides plain text
    without a trigger (``{``, ``<``, ``#E``): nothing in it may be a placeholder."""
    n = v.count("${")
    return (
        v.count("{") == n and v.count("$") == n + v.count("$$") and "<" not in v and "#E" not in v
    )


def _sentinel(v: str) -> bool:
    low = v.strip().lower()
    return low in _SENTINELS or (low.startswith("your_") and " " not in low)


def _takes_template(name: str, schema: Any) -> bool:
    if "template" in name.lower():
        return True
    if not isinstance(schema, dict):
        return False
    if schema.get("format") == "template":
        return True
    words = f"{schema.get('title', '')} {schema.get('description', '')}".lower()
    return "template" in words


def _money(hit: Placeholder, name: str, schema: Any) -> bool:
    """A ``$N`` given to a parameter about money is a price, not a reference."""
    if hit.syntax != "$N (LLMCompiler)":
        return False
    text = name + (str(schema.get("description", "")) if isinstance(schema, dict) else "")
    return bool(_MONEY.search(text))


def _message(ctx: Context, step: Step | None, hit: Placeholder, order: list[str]) -> str:
    text = hit.text.replace("\0", "${…}")  # where a reference stood
    shown = text if len(text) <= 60 else text[:60] + "…"
    base = (
        f"{shown!r} looks like a placeholder ({hit.syntax}), not a value: it would be passed"
        " on as this text"
    )
    ref = _meant(ctx, step, hit, order)
    if ref is None:
        return base + "; to use another step's output write a reference such as ${step.field}"
    hint = f"; did you mean `{ref}`?"
    if step is not None and ref.step not in step.depends_on:
        hint += f" (and add '{ref.step}' to depends_on)"
    return base + hint


def _meant(ctx: Context, step: Step | None, hit: Placeholder, order: list[str]) -> Reference | None:
    """The reference the placeholder most likely stands for, when a step and field match."""
    target: str | None = None
    head = hit.head
    if head is not None:
        node = _NODE.match(head)
        if node is not None and int(node.group(1)) < len(order):
            target = order[int(node.group(1))]  # TaskBench numbers nodes from 0
        elif head in ctx.known:
            target = head
        elif _STRIP_PREFIX.sub("", head) in ctx.known:
            target = _STRIP_PREFIX.sub("", head)
    if target is None and (hit.number is not None or (head and _number_of(head) is not None)):
        n = hit.number if hit.number is not None else _number_of(head or "")
        numbered = [s for s in ctx.known if _number_of(s) == n]
        target = numbered[0] if len(numbered) == 1 else None
    if target is not None:
        return ctx.reference_to(target, hit.path)
    if head is not None and not hit.path:  # <user_id>: a field of exactly one earlier step
        return _field_owner(ctx, step, head)
    return None


def _fields(schema: Any) -> list[str]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    return list(props) if isinstance(props, dict) else []


def _field_owner(ctx: Context, step: Step | None, name: str) -> Reference | None:
    candidates = step.depends_on if step is not None and step.depends_on else tuple(ctx.first)
    owners = [
        c
        for c in candidates
        if c in ctx.first
        and (step is None or c != step.id)
        and name in _fields(output_schema_of(ctx.first[c], ctx.registry))
    ]
    return Reference(owners[0], (name,)) if len(owners) == 1 else None
