"""Security policies: decide, before each tool call, whether it may run, must be approved, or is
refused — from where its arguments come from (:mod:`planrail.plan.provenance`) and, when a rule
asks, from their resolved values.

A :class:`SecurityPolicy` is a frozen value: ``strict`` mode, ordered :class:`Rule` s and a cap
on tool calls. :meth:`SecurityPolicy.decide` is a pure function of the step, the provenance and
the resolved arguments. The run-time side, :class:`planrail.engine.guard.SecurityGuard`, is
called by the executor right before every attempt: it counts calls, asks the policy, calls the
approval callback when the answer is *approve*, and reports each decision.

How a decision is made (``docs/security.md`` has examples):

1. Every rule that matches the call contributes its action; ``deny`` beats ``approve`` beats
   ``allow``.
2. In strict mode, for a tool with side effects (``side_effects`` other than ``none``, or
   ``requires_approval``): if no ``allow`` rule matches the call, it is denied (default-deny);
   an argument that derives from a tool's or an LLM's output needs approval, unless an
   ``allow`` rule naming that argument accepts those sources.
3. Otherwise the call is allowed. Read-only tools are never touched by the strict checks.

Errors (extending :mod:`planrail.errors`)::

    ExecutionError
    ├── PolicyDeniedError          a policy refused a tool call; the step fails with the reason
    │   └── CallNotApprovedError   the call needed approval and got none (also an
    │                              ApprovalRefusedError)
    └── ToolCallLimitError         the run made SecurityPolicy.max_tool_calls calls (stops it)
    ApprovalRefusedError
    └── ApprovalMismatchError      the approval was given for another plan (its hash differs)
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from planrail._json import canonical, digest
from planrail.errors import ApprovalRefusedError, ExecutionError, PlanError, PlanrailError
from planrail.plan.copied import in_goal
from planrail.plan.effects import tool_effect
from planrail.plan.loader import PlanLimits, load_document, read_bounded
from planrail.plan.model import Step
from planrail.plan.predicates import Predicate, check_predicate, compile_predicate
from planrail.plan.provenance import USER, Provenance, Source, Sources, check_pattern, labels
from planrail.plan.tools import ToolSpec

__all__ = [
    "ACTIONS",
    "ApprovalMismatchError",
    "ApproveCall",
    "CallApprovalRequest",
    "CallNotApprovedError",
    "Decision",
    "PolicyDeniedError",
    "Rule",
    "SecurityPolicy",
    "SecurityPolicyError",
    "ToolCallLimitError",
    "args_digest",
    "check_approval",
    "check_security",
    "denial_of",
]

PolicyAction = Literal["allow", "approve", "deny"]
ACTIONS: tuple[str, ...] = ("allow", "approve", "deny")
MAX_POLICY_BYTES = 1024 * 1024
"""The largest security policy file read."""
_SEVERITY = {"allow": 0, "approve": 1, "deny": 2}
_USER_ONLY: Sources = frozenset({USER})


# ---------------------------------------------------------------- errors


class PolicyDeniedError(ExecutionError):
    """A security policy refused a tool call; the step fails with the policy's reason."""

    code = "policy_denied"


class CallNotApprovedError(PolicyDeniedError, ApprovalRefusedError):
    """A tool call needed approval at run time and did not get it."""

    code = "call_not_approved"


class ToolCallLimitError(ExecutionError):
    """The run reached ``SecurityPolicy.max_tool_calls``: it stops. ``fatal``: a run-wide
    limit (as the LLM budget's), the end of the run rather than a failure of its step."""

    code = "tool_call_limit"
    fatal = True


class ApprovalMismatchError(ApprovalRefusedError):
    """The approval handed to a run was given for another plan: its hash differs."""

    code = "approval_mismatch"


class SecurityPolicyError(PlanError):
    """A security policy document is malformed (``problems`` lists every issue)."""

    code = "invalid_security_policy"

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        super().__init__("invalid security policy: " + "; ".join(problems[:3]) + more)


def denial_of(exc: BaseException) -> PolicyDeniedError | None:
    """``exc`` if it is a policy denial, or the denial inside an exception group (a fan-out
    raises one); else ``None``."""
    if isinstance(exc, PolicyDeniedError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = denial_of(inner)
            if found is not None:
                return found
    return None


def check_approval(approval: Mapping[str, Any] | None, plan_hash: str) -> None:
    """Raise :class:`ApprovalMismatchError` unless ``approval`` is for the plan hashed
    ``plan_hash`` (no approval at all is not checked here)."""
    if approval is None:
        return
    given = approval.get("plan_hash")
    if given != plan_hash:
        shown = f"{given[:19]}…" if isinstance(given, str) else "no plan hash"
        raise ApprovalMismatchError(
            f"the approval is for another plan ({shown}); this plan is {plan_hash[:19]}…:"
            " a changed plan needs its own approval, nothing was run"
        )


def args_digest(args: Any) -> str:
    """``sha256:`` + the hex digest of ``args`` as canonical JSON (what an approval binds)."""
    return digest(canonical(args))


# ---------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class Rule:
    """One line of a security policy. A rule *matches* a call when every condition it sets
    holds; it then contributes ``action``."""

    action: PolicyAction
    """``allow``, ``approve`` (a person must say yes at run time) or ``deny``."""
    tool: str = "*"
    """Tool name, or an fnmatch pattern (``send_*``); ``*`` is every tool."""
    arg: str | None = None
    """The argument the rule is about (an fnmatch pattern). Without it, the call as a whole."""
    sources: tuple[str, ...] = ()
    """(``from`` in a policy file) Matches when the argument — any argument when ``arg`` is
    unset — derives from a source matching one of these patterns (``user``, ``tool``,
    ``tool:NAME``, ``llm``, ``llm:STEP``, ``external``, ``private``, ``secret``, ``*``).
    On an ``allow`` rule naming an argument, these are the sources the strict mode accepts."""
    when: Any = None
    """A predicate over the resolved arguments, as ``${args.NAME}``
    (``{"gt": ["${args.amount}", 100]}``); known only at run time."""
    reason: str | None = None
    """Said when the rule denies or asks for approval."""

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise SecurityPolicyError(problems)

    def problems(self) -> list[str]:
        found: list[str] = []
        if self.action not in ACTIONS:
            found.append(f"action must be one of {', '.join(ACTIONS)}, got {self.action!r}")
        if not isinstance(self.tool, str) or not self.tool:
            found.append("tool must be a tool name or pattern")
        if self.arg is not None and (not isinstance(self.arg, str) or not self.arg):
            found.append("arg must be an argument name or pattern")
        for p in self.sources:
            problem = check_pattern(p)
            if problem:
                found.append(problem)
        if self.when is not None:
            found.extend(f"when{path}: {msg}" for path, msg in check_predicate(self.when))
        return found

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Rule:
        """From ``{"tool", "action", "arg", "from", "when", "reason"}``."""
        unknown = set(data) - {"tool", "action", "arg", "from", "when", "reason"}
        if unknown:
            raise SecurityPolicyError([f"unknown rule fields: {', '.join(sorted(unknown))}"])
        sources = data.get("from", ())
        if isinstance(sources, str):
            sources = (sources,)
        if not isinstance(sources, list | tuple):
            raise SecurityPolicyError(["from must be a list of source patterns"])
        return cls(
            action=data.get("action", ""),
            tool=data.get("tool", "*"),
            arg=data.get("arg"),
            sources=tuple(sources),
            when=data.get("when"),
            reason=data.get("reason"),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool": self.tool, "action": self.action}
        if self.arg is not None:
            out["arg"] = self.arg
        if self.sources:
            out["from"] = list(self.sources)
        if self.when is not None:
            out["when"] = self.when
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    def names_tool(self, tool: str) -> bool:
        return fnmatch.fnmatchcase(tool, self.tool)

    def names_arg(self, arg: str) -> bool:
        return self.arg is not None and fnmatch.fnmatchcase(arg, self.arg)

    def accepts(self, source: Source) -> bool:
        return not self.sources or any(source.matches(p) for p in self.sources)


@dataclass(frozen=True, slots=True)
class Decision:
    """What a policy says about one call."""

    action: PolicyAction
    reason: str
    rule: int | None = None
    """Index of the rule that decided, or ``None`` for a built-in (strict mode, default)."""
    final: bool = True
    """False when the answer depends on argument values not known yet (a rule's ``when``)."""
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Each argument's source labels."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "reason": self.reason,
            "rule": self.rule,
            "final": self.final,
            "sources": {k: list(v) for k, v in self.sources.items()},
        }


@dataclass(frozen=True, slots=True)
class SecurityPolicy:
    """How tool calls are vetted (``Execution(..., security=SecurityPolicy(...))``)."""

    strict: bool = False
    """Side-effecting tools need an ``allow`` rule (default-deny), and their arguments that
    derive from tool or LLM output need approval unless an ``allow`` rule accepts them."""
    rules: tuple[Rule, ...] = ()
    """Every matching rule counts; ``deny`` beats ``approve`` beats ``allow``."""
    max_tool_calls: int | None = None
    """Most tool calls (attempts, fallbacks and fan-out items included) one run may make;
    the call that would exceed it stops the run with :class:`ToolCallLimitError`."""
    trusted: tuple[str, ...] = ()
    """Sources declared trustworthy once: ``tool:NAME`` (the whole output of that tool, e.g.
    the user's own contacts or the clock) or ``tool:NAME.FIELD`` (one field; ``*`` for list
    indexes, fnmatch globs), e.g. ``tool:get_account.iban``. Values read from them count as
    trusted: strict mode does not hold them back, ``from: [untrusted]`` does not match them."""

    def __post_init__(self) -> None:
        if self.max_tool_calls is not None and (
            type(self.max_tool_calls) is not int or self.max_tool_calls < 0
        ):
            raise SecurityPolicyError(
                [f"max_tool_calls must be an integer >= 0, got {self.max_tool_calls!r}"]
            )
        bad = [p for p in self.trusted if not _trusted_pattern(p)]
        if bad:
            raise SecurityPolicyError(
                [f"trusted: {p!r} is not tool:NAME or tool:NAME.FIELD" for p in bad]
            )

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> SecurityPolicy:
        """From ``{"strict": bool, "max_tool_calls": int, "rules": [rule, ...]}``; every
        problem is reported at once in a :class:`SecurityPolicyError`."""
        if not isinstance(data, Mapping):
            raise SecurityPolicyError(["a security policy is an object with 'rules'"])
        problems: list[str] = []
        unknown = set(data) - {"strict", "rules", "max_tool_calls", "trusted", "description"}
        if unknown:
            problems.append(f"unknown fields: {', '.join(sorted(unknown))}")
        strict = data.get("strict", False)
        if type(strict) is not bool:
            problems.append("strict must be true or false")
        raw_rules = data.get("rules", [])
        rules: list[Rule] = []
        if not isinstance(raw_rules, list):
            problems.append("rules must be a list")
            raw_rules = []
        for i, raw in enumerate(raw_rules):
            if not isinstance(raw, Mapping):
                problems.append(f"rules[{i}]: a rule is an object")
                continue
            try:
                rules.append(Rule.from_mapping(raw))
            except SecurityPolicyError as exc:
                problems.extend(f"rules[{i}]: {p}" for p in exc.problems)
        limit = data.get("max_tool_calls")
        if limit is not None and (type(limit) is not int or limit < 0):
            problems.append(f"max_tool_calls must be an integer >= 0, got {limit!r}")
        trusted = data.get("trusted", [])
        if isinstance(trusted, str):
            trusted = [trusted]
        if not isinstance(trusted, list):
            problems.append("trusted must be a list of tool:NAME[.FIELD] patterns")
            trusted = []
        problems.extend(
            f"trusted: {p!r} is not tool:NAME or tool:NAME.FIELD"
            for p in trusted
            if not _trusted_pattern(p)
        )
        if problems:
            raise SecurityPolicyError(problems)
        return cls(
            strict=bool(strict), rules=tuple(rules), max_tool_calls=limit, trusted=tuple(trusted)
        )

    @classmethod
    def load(cls, path: str | Path) -> SecurityPolicy:
        """From a JSON or YAML file (read with the plan loader's size and depth limits); every
        error's message starts with the file's path."""
        limits = PlanLimits(max_plan_bytes=MAX_POLICY_BYTES)
        text = read_bounded(path, MAX_POLICY_BYTES, "the policy", "1 MiB")  # errors name the file
        fmt = "yaml" if str(path).endswith((".yaml", ".yml")) else None
        try:
            return cls.from_mapping(load_document(text, limits, fmt=fmt, what="the policy"))
        except PlanError as exc:  # what is wrong inside it: named too
            exc.message = f"{path}: {exc.message}"
            exc.args = (exc.message,)
            raise

    @classmethod
    def default(cls) -> SecurityPolicy:
        """The documented default policy (``--policy default``; the file is
        ``planrail/policies/default_policy.json``, see docs/security.md)."""
        from importlib.resources import files

        text = files("planrail.policies").joinpath("default_policy.json").read_text("utf-8")
        return cls.from_mapping(json.loads(text))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"strict": self.strict, "rules": [r.to_dict() for r in self.rules]}
        if self.max_tool_calls is not None:
            out["max_tool_calls"] = self.max_tool_calls
        if self.trusted:
            out["trusted"] = list(self.trusted)
        return out

    # ------------------------------------------------------------------ deciding

    def decide(
        self,
        step: Step,
        provenance: Provenance,
        resolved_args: Mapping[str, Any] | None = None,
        *,
        available: Any = None,
    ) -> Decision:
        """The decision for ``step``'s tool call.

        Without ``resolved_args`` (before the run) a rule with ``when`` cannot be evaluated:
        it is left out and the decision is marked ``final=False``. ``available`` (the ids of
        steps with an output) narrows ``$first`` to the candidate really used.
        """
        if step.action != "tool_call" or not step.tool:
            return Decision("allow", f"a {step.action} step calls no tool")
        tool = step.tool
        spec = provenance.spec(tool)
        arg_sources = provenance.args(step, available=available)
        if resolved_args is not None and provenance.goal:
            # a value the user typed in the goal is the user's, whatever carried it here
            for name in arg_sources:
                if name in resolved_args and in_goal(resolved_args[name], provenance.goal):
                    arg_sources[name] = _USER_ONLY
        shown = {k: tuple(labels(v)) for k, v in arg_sources.items()}
        final = True
        matched: list[tuple[int, Rule]] = []
        for i, rule in enumerate(self.rules):
            if not rule.names_tool(tool) or not _sources_match(rule, arg_sources):
                continue
            if rule.when is not None:
                if resolved_args is None:
                    final = False
                    continue
                if not _holds(rule, resolved_args, provenance.goal):
                    continue
            matched.append((i, rule))

        verdicts: list[Decision] = []
        for i, rule in matched:
            if rule.action != "allow":
                verdicts.append(
                    Decision(
                        rule.action, rule.reason or _default_reason(rule, tool), i, final, shown
                    )
                )
        if self.strict and _changes_world(spec):
            allows = [r for _, r in matched if r.action == "allow"]
            if not allows:
                verdicts.append(
                    Decision(
                        "deny",
                        f"strict mode: no rule allows calling '{tool}', a tool with side"
                        f" effects ({spec.side_effects if spec else 'unknown tool'})",
                        None,
                        final,
                        shown,
                    )
                )
            tainted = _tainted(arg_sources, allows)
            if tainted:
                parts = [f"'{a}' derives from {', '.join(labels(s))}" for a, s in tainted.items()]
                verdicts.append(
                    Decision(
                        "approve",
                        f"strict mode: argument {'; '.join(parts)} (not from the user)",
                        None,
                        final,
                        shown,
                    )
                )
        if verdicts:
            worst = max(verdicts, key=lambda d: _SEVERITY[d.action])
            return worst
        allowed_by = next((i for i, r in matched if r.action == "allow"), None)
        reason = (
            f"allowed by rule {allowed_by}"
            if allowed_by is not None
            else "read-only tool"
            if not _changes_world(spec)
            else "no rule applies"
        )
        return Decision("allow", reason, allowed_by, final, shown)

    def review(self, provenance: Provenance, steps: Any) -> dict[str, Decision]:
        """Static decisions for every tool call of ``steps`` (fallback calls as
        ``STEP.fallback``): what the run will do, as far as the plan alone can tell."""
        out: dict[str, Decision] = {}
        for step in steps:
            if step.action == "tool_call" and step.tool:
                out[step.id] = self.decide(step, provenance)
            if step.fallback is not None and step.fallback.tool:
                out[f"{step.id}.fallback"] = self.decide(fallback_call(step), provenance)
        return out


def fallback_call(step: Step) -> Step:
    """The stand-in step for ``step``'s fallback tool call (as the step runner builds it)."""
    assert step.fallback is not None
    return step.model_copy(
        update={
            "action": "tool_call",
            "tool": step.fallback.tool,
            "args": step.fallback.args,
            "fallback": None,
        }
    )


def _changes_world(spec: ToolSpec | None) -> bool:
    return tool_effect(spec).guarded


def _sources_match(rule: Rule, arg_sources: Mapping[str, Sources]) -> bool:
    """Whether the rule's ``arg`` and ``from`` conditions hold for a call.

    ``deny``/``approve``: the argument (any argument, without ``arg``) has a source matching
    ``from``. ``allow``: with ``arg``, the argument is present (``from`` then limits what the
    rule vouches for); without ``arg``, every source of every argument matches ``from``.
    """
    if rule.arg is not None:
        named = [s for a, s in arg_sources.items() if rule.names_arg(a)]
        if not named:
            return False
    else:
        named = list(arg_sources.values())
    if not rule.sources:
        return True
    if rule.action == "allow":
        return rule.arg is not None or all(rule.accepts(src) for s in named for src in s)
    return any(src.matches(p) for s in named for src in s for p in rule.sources)


def _trusted_pattern(p: Any) -> bool:
    if not isinstance(p, str):
        return False
    kind, sep, glob = p.partition(":")
    return kind == "tool" and bool(sep) and bool(glob)


def _holds(rule: Rule, args: Mapping[str, Any], goal: str = "") -> bool:
    """Evaluate ``when`` (``${args.NAME}``, and ``${goal}``: what the user typed); an error
    counts as "holds" for deny/approve and "not" for allow, so a malformed value never lowers
    the answer."""
    pred: Predicate = _compiled(rule)
    try:
        return pred.evaluate({"args": dict(args), "goal": goal})
    except (PlanrailError, ValueError, TypeError):
        return rule.action != "allow"


_PREDICATES: dict[int, tuple[Any, Predicate]] = {}


def _compiled(rule: Rule) -> Predicate:
    key = id(rule)
    hit = _PREDICATES.get(key)
    if hit is None or hit[0] is not rule.when:
        hit = _PREDICATES[key] = (rule.when, compile_predicate(rule.when))
    return hit[1]


def _tainted(arg_sources: Mapping[str, Sources], allows: list[Rule]) -> dict[str, Sources]:
    out: dict[str, Sources] = {}
    for arg, sources in arg_sources.items():
        accepting = [r for r in allows if r.names_arg(arg) or (r.arg is None and r.sources)]
        left = frozenset(
            s
            for s in sources
            if s.kind != "user" and not s.trusted and not any(r.accepts(s) for r in accepting)
        )
        if left:
            out[arg] = left
    return out


def _default_reason(rule: Rule, tool: str) -> str:
    what = f"argument '{rule.arg}' of '{tool}'" if rule.arg else f"calling '{tool}'"
    src = f" from {', '.join(rule.sources)}" if rule.sources else ""
    verb = "is denied" if rule.action == "deny" else "needs approval"
    return f"{what}{src} {verb} by policy"


# ---------------------------------------------------------------- run time


@dataclass(frozen=True, slots=True)
class CallApprovalRequest:
    """What an approval callback is asked about: one tool call, with its arguments resolved."""

    run_id: str
    step_id: str
    tool: str
    args: Any
    """The resolved arguments, secret parameters redacted (show these to a person)."""
    args_hash: str
    """:func:`args_digest` of the real arguments; an approval may return it to bind itself."""
    decision: Decision
    item: int | None = None
    attempt: int = 1


ApproveCall = Callable[[CallApprovalRequest], "bool | Mapping[str, Any] | Awaitable[Any]"]
"""``approve_call(request)`` → True/False, or an approval record ``{"args_hash", "by", ...}``
whose ``args_hash`` must equal the request's (anything else is a refusal). May be async."""


def check_security(security: object) -> None:
    """A TypeError unless ``security`` is None or a :class:`SecurityPolicy` (a dict or a path
    given for one would otherwise fail far from where it was given)."""
    if security is not None and not isinstance(security, SecurityPolicy):
        raise TypeError(
            f"security must be a planrail.SecurityPolicy, not {type(security).__name__}"
            " (SecurityPolicy.load(path) reads one from a file)"
        )
