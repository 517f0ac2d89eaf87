"""Property-based fuzzing of everything that reads untrusted plans: loading, reference parsing,
validation, predicates, provenance and policy decisions, and secret scrubbing.

Each target runs a small number of examples in the default suite and many more under
``-m slow`` (``make soak``). A *crash* is any exception other than the documented planrail
error for bad input; a *hang* is caught by the per-test timeout. The number of examples each
target ran is printed in the terminal summary.
"""

from __future__ import annotations

import contextlib
import gc
import json
import string
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planrail.errors import PlanError, PlanLoadError, PlanrailError, ReferenceSyntaxError
from planrail.plan.loader import PlanLimits, load_document
from planrail.plan.predicates import PredicateSyntaxError, compile_predicate
from planrail.plan.provenance import analyze
from planrail.plan.refs import parse_reference, parse_template
from planrail.plan.secrets import REDACTED, Redactor
from planrail.plan.validate import validate
from planrail.policies.security import Rule, SecurityPolicy

from .kit import FUZZ_EXAMPLES, SecretWorld, World

EXAMPLES = FUZZ_EXAMPLES

SMALL = 150
LARGE = 20_000

REG = World().registry()
TOOLS = [t.name for t in REG]

# Text biased towards the grammar's own characters, so the parser's corners get hit.
_GRAMMAR = "${}[].\"'\\0123456789_ab" + "é\u200bｓ"
ref_text = st.text(
    alphabet=st.sampled_from(list(_GRAMMAR) + list(string.ascii_letters)), max_size=200
) | st.text(max_size=100)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ref_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ref_text, inner, max_size=4),
    max_leaves=20,
)

step_ids = st.sampled_from(["a", "b", "c", "d", "item", "self", "1x", "a b"])


@st.composite
def plan_like(draw: Any) -> dict[str, Any]:
    """Plan-shaped documents: mostly well-formed, with references, bad ids, odd fields."""
    steps = []
    for sid in draw(st.lists(step_ids, min_size=0, max_size=5)):
        step: dict[str, Any] = {"id": sid}
        kind = draw(st.sampled_from(["tool", "llm", "cond", "junk"]))
        if kind == "tool":
            step["tool"] = draw(st.sampled_from([*TOOLS, "nope"]))
            step["args"] = draw(
                st.dictionaries(
                    st.sampled_from(["path", "payee", "amount", "to", "body", "name", "x"]),
                    st.sampled_from(["${a}", "${b.payee}", "${c.x.0}", "lit", "${item.payee}"])
                    | json_values,
                    max_size=3,
                )
            )
        elif kind == "llm":
            step["action"] = "llm_call"
            step["prompt"] = draw(ref_text)
        elif kind == "cond":
            step["action"] = "condition_check"
            step["condition"] = draw(json_values)
        else:
            step.update(
                draw(
                    st.dictionaries(
                        st.sampled_from(
                            ["when", "for_each", "fallback", "repeat", "join", "retry"]
                        ),
                        json_values,
                        max_size=2,
                    )
                )
            )
        step["depends_on"] = draw(st.lists(step_ids, max_size=3))
        steps.append(step)
    return {"goal": draw(ref_text), "steps": steps}


@pytest.fixture(autouse=True, scope="module")
def _collect_earlier_garbage() -> Iterator[None]:
    """Collect what earlier test modules left behind before fuzzing starts.

    These targets allocate a lot, so the garbage collector runs inside them; an event loop
    left unclosed by an earlier module (pytest-asyncio and ``asyncio.run`` in other suites)
    would be finalised here and its ResourceWarning blamed on a fuzz target.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    return


def _settings(n: int) -> settings:
    return settings(
        max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )


# ---------------------------------------------------------------- targets


def fuzz_references(text: str) -> None:
    EXAMPLES["reference parsing"] += 1
    try:
        template = parse_template(text)
    except ReferenceSyntaxError as exc:
        position = exc.position
    else:
        position = None
    if position is not None:
        assert 0 <= position <= len(text)
        return
    for ref in template.references:
        assert parse_reference(str(ref)) == ref  # printing a reference round-trips


def fuzz_loading(text: str) -> None:
    EXAMPLES["plan loading"] += 1
    with contextlib.suppress(PlanLoadError):
        load_document(text, PlanLimits(max_plan_bytes=64 * 1024, max_depth=16))


def fuzz_validation(doc: dict[str, Any]) -> None:
    EXAMPLES["validation"] += 1
    report = validate(doc, REG)
    json.dumps(report.to_dict())
    if report.plan is None:
        assert report.errors
        return
    # a valid plan also goes through provenance and a strict policy without crashing
    EXAMPLES["provenance + policy"] += 1
    prov = analyze(report.plan, REG)
    policy = SecurityPolicy(
        strict=True,
        rules=(
            Rule(tool="pay_bill", action="allow"),
            Rule(tool="*", arg="to", sources=("external",), action="deny"),
            Rule(tool="send_*", action="approve", when={"gt": ["${args.amount}", 1]}),
        ),
    )
    for step in report.plan.steps:
        d = policy.decide(step, prov)
        assert d.action in ("allow", "approve", "deny")


def fuzz_predicates(pred: Any, outputs: dict[str, Any]) -> None:
    EXAMPLES["predicates"] += 1
    try:
        compiled = compile_predicate(pred)
    except PredicateSyntaxError:
        return
    except PlanError:
        return
    with contextlib.suppress(PlanrailError):
        assert compiled.evaluate(outputs) in (True, False)


def fuzz_scrubbing(secret: str, text: str) -> None:
    EXAMPLES["secret scrubbing"] += 1
    reg = SecretWorld().registry()
    plan = validate(
        {"steps": [{"id": "c", "tool": "leaky", "args": {"key": "x"}}]}, reg
    ).raise_for_errors()
    red = Redactor.for_plan(plan, reg)
    assert red is not None
    red.learn(secret)
    out = red.text(text + secret + text)
    if len(secret) >= 4 and REDACTED not in secret:
        assert secret not in out


outputs_st = st.dictionaries(step_ids, json_values, max_size=3)


# ---------------------------------------------------------------- default suite (small)


@given(ref_text)
@_settings(SMALL)
def test_fuzz_reference_parsing(text: str) -> None:
    """Any text parses into a template or raises ReferenceSyntaxError (with an offset inside
    the text); printed references parse back to themselves."""
    fuzz_references(text)


@given(st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
@_settings(SMALL)
def test_fuzz_plan_loading(text: str) -> None:
    """Any text loads as JSON/YAML or raises PlanLoadError — nothing else."""
    fuzz_loading(text)


@given(plan_like())
@_settings(SMALL)
def test_fuzz_validation_provenance_and_policy(doc: dict[str, Any]) -> None:
    """Any plan-shaped document gives a report (never an exception); valid ones go through
    provenance and a strict policy."""
    fuzz_validation(doc)


@given(json_values, outputs_st)
@_settings(SMALL)
def test_fuzz_predicates(pred: Any, outputs: dict[str, Any]) -> None:
    """Any JSON is a predicate or a PredicateSyntaxError; evaluating one gives a boolean or a
    planrail error."""
    fuzz_predicates(pred, outputs)


@given(st.text(min_size=1, max_size=40), st.text(max_size=80))
@_settings(SMALL)
def test_fuzz_secret_scrubbing(secret: str, text: str) -> None:
    """A learned secret of four characters or more never survives scrubbing, whatever is
    around it (regex metacharacters included)."""
    fuzz_scrubbing(secret, text)


# ---------------------------------------------------------------- soak (large)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_fuzz_everything_at_length() -> None:
    """The same targets, many more examples each (``make soak``)."""
    for target, strategy in (
        (fuzz_references, st.tuples(ref_text)),
        (fuzz_loading, st.tuples(st.text(max_size=2000))),
        (fuzz_validation, st.tuples(plan_like())),
        (fuzz_predicates, st.tuples(json_values, outputs_st)),
        (fuzz_scrubbing, st.tuples(st.text(min_size=1, max_size=40), st.text(max_size=200))),
    ):
        n = LARGE // 4 if target is fuzz_validation else LARGE
        _soak(target, strategy, n)


def _soak(target: Any, strategy: Any, n: int) -> None:
    @given(strategy)
    @_settings(n)
    def check(args: tuple[Any, ...]) -> None:
        target(*args)

    check()
