"""MCP servers as tool sources: real servers (the SDK's ``MCPServer``) over stdio and HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import planrail
from planrail.errors import ToolLoadError
from planrail.integrations.mcp import MCPHub, MCPTool, ServerConfig, apply_pins, mcp_tools, pins
from planrail.plan.validate import validate
from planrail.types import StepStatus

from .conftest import START_BUDGET, stdio_probe

Probe = Callable[..., ServerConfig]


def run(doc: dict[str, Any], tools: list[MCPTool]) -> planrail.RunResult:
    """Run ``doc`` approved (the tests are about the calls, not the approval)."""
    return planrail.run(doc, tools, approve=True)


def tools_of(hub: MCPHub) -> list[MCPTool]:
    return list(hub.submit(mcp_tools(hub)).result(timeout=60))


def plan(*steps: dict[str, Any], output: Any = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"goal": "probe", "steps": list(steps)}
    if output is not None:
        doc["output"] = output
    return doc


WHO = {"id": "who", "tool": "probe.lookup", "args": {"name": "Alice"}}


def test_structured_output_flows_on_and_a_wrong_field_is_caught_by_validate(probe: Probe) -> None:
    """The output schema types references into an MCP tool's structured content: a field it
    does not declare is an ``unknown_output_field`` before anything runs; a right one carries
    the real value to the next step."""
    with MCPHub([probe()]) as hub:
        tools = tools_of(hub)

        def echo(ref: str) -> dict[str, Any]:
            return {"id": "echo", "tool": "probe.lookup", "args": {"name": ref},
                    "depends_on": ["who"]}  # fmt: skip

        report = validate(plan(WHO, echo("${who.user}")), tools)
        assert [(i.code, i.step) for i in report.errors] == [("unknown_output_field", "echo")]
        good = plan(WHO, echo("${who.user_id}"), output="${echo.name}")
        result = run(good, tools)
        assert result.status == "succeeded", result.error
        assert result.output == "usr_alice"


def test_input_schema_checks_arguments_at_validation_time(probe: Probe) -> None:
    """A missing or unknown argument of an MCP tool is reported by ``validate``."""
    with MCPHub([probe()]) as hub:
        report = validate(
            plan({"id": "who", "tool": "probe.lookup", "args": {"nam": "x"}}), tools_of(hub)
        )
    assert {i.code for i in report.errors} == {"missing_argument", "unknown_argument"}


def test_one_session_serves_every_call_of_a_run(probe_dir: Any) -> None:
    """Parallel steps on one server share its one long-lived session (one process)."""
    steps = [{"id": f"s{i}", "tool": "probe.lookup", "args": {"name": f"n{i}"}} for i in range(6)]
    with MCPHub([stdio_probe()]) as hub:
        result = run(plan(*steps), tools_of(hub))
        assert result.status == "succeeded"
        assert len({result.steps[s["id"]].output["pid"] for s in steps}) == 1
        assert hub.sessions_started("probe") == 1


def test_annotations_decide_the_effect_class_only_for_trusted_servers(probe_dir: Any) -> None:
    """Trusted: read-only → none, idempotent → idempotent, else unsafe. Untrusted: every tool
    is unsafe and needs approval, whatever it claims; the operator's config entry wins (and
    can name secret parameters)."""
    servers = [
        stdio_probe(),
        ServerConfig(
            name="stranger",
            command=stdio_probe().command,
            tools={"upsert": {"side_effects": "keyed", "secret_params": ["label"]}},
        ),
    ]
    with MCPHub(servers) as hub:
        specs = {t.name: t.spec for t in tools_of(hub)}
    assert (specs["probe.lookup"].side_effects, specs["probe.lookup"].requires_approval) == (
        "none",
        None,
    )
    assert specs["probe.upsert"].side_effects == "idempotent"
    assert specs["probe.charge"].side_effects == "unsafe"
    assert (specs["stranger.lookup"].side_effects, specs["stranger.lookup"].requires_approval) == (
        "unsafe",
        True,
    )
    assert specs["stranger.upsert"].side_effects == "keyed"
    assert specs["stranger.upsert"].secret_params == {"label"}


def test_the_idempotency_key_is_in_the_requests_meta(probe: Probe) -> None:
    """Each call carries the step's idempotency key (and run, step, attempt) in ``_meta``."""
    with MCPHub([probe()]) as hub:
        result = run(plan({"id": "s", "tool": "probe.seen", "args": {}}), tools_of(hub))
    assert result.steps["s"].output == {
        "planrail/idempotency_key": f"{result.run_id}:s",
        "planrail/run_id": result.run_id,
        "planrail/step_id": "s",
        "planrail/attempt": 1,
    }


def test_is_error_fails_the_step_and_is_retried_only_when_the_policy_says_so(
    probe: Probe,
) -> None:
    """An ``isError`` result is a step failure (MCPToolError, not retryable by itself); a
    retry policy naming it retries it."""
    with MCPHub([probe()]) as hub:
        tools = tools_of(hub)
        once = run(plan({"id": "f", "tool": "probe.fail", "args": {"message": "no"}}), tools)
        again = run(
            plan(
                {
                    "id": "f",
                    "tool": "probe.fail",
                    "args": {"message": "no"},
                    "retry": {"max_attempts": 2, "initial_delay": 0, "retry_on": ["MCPToolError"]},
                }
            ),
            tools,
        )
    step = once.steps["f"]
    assert (step.status, step.attempts) == (StepStatus.FAILED, 1)
    assert step.error is not None
    assert step.error["type"] == "MCPToolError"
    assert "no" in step.error["message"]
    assert step.error["retryable"] is False
    assert again.steps["f"].attempts == 2


def test_a_call_past_its_timeout_is_cancelled_on_the_server(probe: Probe) -> None:
    """``call_timeout`` is the tools' attempt timeout: the step times out, and the request is
    cancelled on the server (its sleep saw the cancellation)."""
    with MCPHub([probe(call_timeout=0.5)]) as hub:
        tools = tools_of(hub)
        result = run(plan({"id": "s", "tool": "probe.sleep", "args": {"seconds": 60}}), tools)
        step = result.steps["s"]
        assert step.status == StepStatus.FAILED
        assert step.error is not None
        assert step.error["type"] == "AttemptTimeoutError"
        asked = run(plan({"id": "c", "tool": "probe.was_cancelled", "args": {}}), tools)
    assert asked.steps["c"].output == {"result": True}


def test_a_non_idempotent_call_past_its_timeout_is_in_doubt_and_sent_once(
    probe: Probe, probe_dir: Any
) -> None:
    """The payment reached the server before the timeout cut the call: the step is
    ``in_doubt`` after one call (its three attempts unused), and the server's own ledger holds
    one payment. Before, the timeout was retried and the server paid three times."""
    retry = {"max_attempts": 3, "initial_delay": 0}
    with MCPHub([probe(call_timeout=2)]) as hub:
        step = {"id": "p", "tool": "probe.pay", "args": {"label": "t"}, "retry": retry}
        result = run(plan(step), tools_of(hub))
    pay = result.steps["p"]
    assert pay.status == StepStatus.IN_DOUBT, pay.error
    assert pay.attempts == 1
    assert pay.error is not None
    assert pay.error["type"] == "CallCrashedError"
    assert len((probe_dir / "paid-t").read_text().split()) == 1


def test_exit_mid_call_leaves_a_non_idempotent_step_in_doubt(probe_dir: Any) -> None:
    """The server exits during a call of a tool that does not honour keys: the step is
    ``in_doubt`` (not failed, not retried) and its dependents wait; the server is restarted for
    the next call."""
    with MCPHub([stdio_probe()]) as hub:
        tools = tools_of(hub)
        result = run(
            plan(
                {
                    "id": "pay",
                    "tool": "probe.charge",
                    "args": {"label": "p"},
                    "retry": {"max_attempts": 3, "initial_delay": 0},
                },
                {
                    "id": "after",
                    "tool": "probe.lookup",
                    "args": {"name": "${pay.result}"},
                    "depends_on": ["pay"],
                },
            ),
            tools,
        )
        pay = result.steps["pay"]
        assert (pay.status, pay.attempts) == (StepStatus.IN_DOUBT, 1)
        assert pay.error is not None
        assert pay.error["type"] == "OutcomeUnknownError"
        assert result.steps["after"].status == StepStatus.PENDING
        assert result.status == "failed"
        assert "planrail resolve" in (result.error or "")
        later = run(plan(WHO), tools)
        assert later.status == "succeeded"
        assert hub.sessions_started("probe") == 2


def test_a_server_gone_between_calls_is_restarted_and_the_next_call_made(probe_dir: Any) -> None:
    """The server answers, then exits before the next step: the next call starts a new server
    and is made there — not "dropped during the call" (OutcomeUnknownError, ``in_doubt`` for
    this untrusted server's unsafe tools) though nothing was sent. Before, the dead session was
    kept, and the SDK refused every later call on it."""
    with MCPHub([stdio_probe(trusted=False)]) as hub:
        tools = tools_of(hub)
        first = run(plan({"id": "bye", "tool": "probe.leave", "args": {}}), tools)
        assert first.status == "succeeded", first.error
        hub.submit(hub.connection("probe").ended()).result(timeout=START_BUDGET)
        later = run(plan(WHO), tools)
        assert later.status == "succeeded", later.steps["who"].error
        assert later.steps["who"].output["pid"] != first.steps["bye"].output["result"]
        assert hub.sessions_started("probe") == 2


def test_a_request_written_just_before_the_server_exits_is_in_doubt_not_retried(
    probe_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server exits right after its stdin got a call of a tool that does not honour keys,
    without running it (it leaves a ``received-charge`` marker): planrail cannot tell this
    from a server that ran it and then died, so the step is ``in_doubt`` — not failed, not
    retried on the restarted server though its policy allows three attempts — its dependents
    wait, and the run says how to resolve it. A later call is made on a new server."""
    monkeypatch.setenv("PROBE_EXIT_ON_CALL", "charge")
    pay = {"id": "pay", "tool": "probe.charge", "args": {"label": "w"},
           "retry": {"max_attempts": 3, "initial_delay": 0}}  # fmt: skip
    then = {"id": "after", "tool": "probe.lookup", "args": {"name": "${pay.result}"},
            "depends_on": ["pay"]}  # fmt: skip
    with MCPHub([stdio_probe()]) as hub:
        tools = tools_of(hub)
        result = run(plan(pay, then), tools)
        assert hub.sessions_started("probe") == 1  # no second attempt started a server
        later = run(plan(WHO), tools)
        assert hub.sessions_started("probe") == 2
    step = result.steps["pay"]
    assert (step.status, step.attempts) == (StepStatus.IN_DOUBT, 1)
    assert step.error is not None
    assert step.error["type"] == "OutcomeUnknownError"
    assert step.error["retryable"] is False
    assert "dropped during the call of 'probe.charge'" in step.error["message"]
    assert result.steps["after"].status == StepStatus.PENDING
    assert "planrail resolve" in (result.error or "")
    assert (probe_dir / "received-charge").exists()  # it was written to the server...
    assert not (probe_dir / "crashed-w").exists()  # ...which never ran it
    assert later.status == "succeeded", later.steps["who"].error


def test_exit_mid_call_of_an_idempotent_tool_is_retried_on_a_restarted_server(
    probe_dir: Any,
) -> None:
    """The same drop on a tool that honours keys is retryable: the retry runs on a new server
    process and succeeds."""
    with MCPHub([stdio_probe()]) as hub:
        result = run(
            plan(
                {
                    "id": "put",
                    "tool": "probe.upsert",
                    "args": {"label": "u"},
                    "retry": {"max_attempts": 2, "initial_delay": 0},
                }
            ),
            tools_of(hub),
        )
        assert hub.sessions_started("probe") == 2
    put = result.steps["put"]
    assert (put.status, put.attempts) == (StepStatus.SUCCEEDED, 2)
    assert put.attempt_history[0]["error"]["type"] == "OutcomeUnknownError"


GARBLE = {"id": "g", "tool": "probe.garble", "args": {"label": "g"}}
SLOW = START_BUDGET * 4
"""A call timeout no test should reach: a garbled answer must end the call long before it."""


def test_a_line_that_is_not_json_rpc_in_reply_leaves_the_step_in_doubt_at_once(
    probe_dir: Any,
) -> None:
    """The server answers a call with a line that is not JSON (its answer cut in half): the
    step fails at once with OutcomeUnknownError naming the server, ``in_doubt`` (the tool ran,
    and does not honour keys: not retried, though its policy would), its dependents wait; the
    session goes on serving calls. Before, the line was logged and dropped, the step waited
    its whole timeout, then failed as a retryable AttemptTimeoutError: the tool ran again."""
    retry = {"max_attempts": 3, "initial_delay": 0}
    then = {
        "id": "after",
        "tool": "probe.lookup",
        "args": {"name": "${g.result}"},
        "depends_on": ["g"],
    }
    with MCPHub([stdio_probe(call_timeout=SLOW)]) as hub:
        tools = tools_of(hub)
        result = run(plan({**GARBLE, "retry": retry}, then), tools)
        later = run(plan(WHO), tools)
        assert hub.sessions_started("probe") == 1
    step = result.steps["g"]
    assert (step.status, step.attempts) == (StepStatus.IN_DOUBT, 1)
    assert step.error is not None
    assert step.error["type"] == "OutcomeUnknownError", step.error
    said = step.error["message"]
    assert "MCP server 'probe' wrote a line on stdout that is not JSON-RPC" in said
    assert "while the call of 'probe.garble' was in flight" in said
    assert "it may or may not have happened" in said
    assert result.steps["after"].status == StepStatus.PENDING
    assert "planrail resolve" in (result.error or "")
    assert (probe_dir / "garbled-g").exists()  # it did run
    assert later.status == "succeeded", later.steps["who"].error


def test_a_garbled_answer_of_a_tool_that_honours_keys_is_retried(probe_dir: Any) -> None:
    """The same garbled answer for a tool the operator says honours keys: retryable, and the
    retry (same key) is answered."""
    keyed = stdio_probe(call_timeout=SLOW, tools={"garble": {"side_effects": "keyed"}})
    with MCPHub([keyed]) as hub:
        result = run(plan({**GARBLE, "retry": {"max_attempts": 2, "initial_delay": 0}}),
                     tools_of(hub))  # fmt: skip
    step = result.steps["g"]
    assert (step.status, step.attempts) == (StepStatus.SUCCEEDED, 2), step.error
    assert step.attempt_history[0]["error"]["type"] == "OutcomeUnknownError"


def test_a_garbled_line_ends_every_call_in_flight_it_may_have_answered(probe_dir: Any) -> None:
    """A line that is no JSON-RPC message names no request: with a ``sleep`` in flight too, it
    may have been that call's answer, so both calls end at once, outcome unknown."""
    nap = {"id": "nap", "tool": "probe.sleep", "args": {"seconds": SLOW}}
    garble = {**GARBLE, "args": {"label": "g", "after_sleep": True}}
    with MCPHub([stdio_probe(call_timeout=SLOW)]) as hub:
        result = run(plan(nap, garble), tools_of(hub))
    errors = {s: result.steps[s].error for s in ("nap", "g")}
    assert {s: (e or {}).get("type") for s, e in errors.items()} == {
        "nap": "OutcomeUnknownError",
        "g": "OutcomeUnknownError",
    }, errors
    assert result.steps["g"].status == StepStatus.IN_DOUBT
    assert result.steps["nap"].status == StepStatus.FAILED  # read-only: not in doubt


def test_exit_mid_call_over_http_is_classified_too(http_url: str) -> None:
    """Over Streamable HTTP a server that dies mid-call gives the same unknown outcome."""
    with MCPHub([ServerConfig(name="probe", url=http_url, trusted=True)]) as hub:
        result = run(
            plan({"id": "pay", "tool": "probe.charge", "args": {"label": "h"}}), tools_of(hub)
        )
    assert result.steps["pay"].status == StepStatus.IN_DOUBT


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, "OutputTooLargeError"),
        ({"on_large_output": "truncate"}, 1024 * 1024),
        ({"max_output_bytes": 8_000_000}, 5_000_000),
    ],
)
def test_a_5mb_output_fails_clearly_is_truncated_or_passes_as_configured(
    probe: Probe, options: dict[str, Any], expected: Any
) -> None:
    """Over ``max_output_bytes`` (1 MiB by default) an output fails with a clear error, or is
    cut to the limit with ``on_large_output: truncate``; under a higher limit it passes whole."""
    with MCPHub([probe(**options)]) as hub:
        result = run(
            plan({"id": "b", "tool": "probe.big", "args": {"megabytes": 5}}), tools_of(hub)
        )
    step = result.steps["b"]
    if isinstance(expected, str):
        assert step.error is not None
        assert step.error["type"] == expected
        assert "max_output_bytes" in step.error["message"]
    else:
        assert step.status == StepStatus.SUCCEEDED
        assert step.output.count("x") == expected


def test_a_schema_changed_since_approval_refuses_the_step(
    probe_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approval pins each MCP tool's schema hash; when the server later reports another
    schema (here: restarted with a new version), the step is refused until re-approved."""
    step = {"id": "v", "tool": "probe.versioned", "args": {"x": 1}}
    with MCPHub([stdio_probe()]) as hub:
        approved = pins(tools_of(hub))
    monkeypatch.setenv("PROBE_VARIANT", "b")
    with MCPHub([stdio_probe()]) as hub:
        tools = tools_of(hub)
        apply_pins(tools, approved)
        refused = run(plan(step), tools)
        reapproved = run(plan(step), tools_of(hub))
    error = refused.steps["v"].error
    assert error is not None
    assert error["type"] == "SchemaChangedError"
    assert "start a new run of the plan" in error["message"]  # it cannot be approved again
    assert refused.steps["v"].attempts == 1
    assert reapproved.status == "succeeded"


def test_a_schema_changed_during_the_run_refuses_the_step(probe_dir: Any) -> None:
    """A server that changes a tool's schema and says so (``tools/list_changed``) mid-run:
    the later step calling it is refused, its approval being for the old schema. (Over stdio
    the event precedes the answer on the one pipe; over HTTP it comes on its own stream, so
    only calls starting after it arrived are sure to see it.)"""
    with MCPHub([stdio_probe()]) as hub:
        result = run(
            plan(
                {"id": "e", "tool": "probe.evolve", "args": {}},
                {"id": "v", "tool": "probe.versioned", "args": {"x": 1}, "depends_on": ["e"]},
            ),
            tools_of(hub),
        )
    assert result.steps["e"].status == StepStatus.SUCCEEDED
    error = result.steps["v"].error
    assert error is not None
    assert error["type"] == "SchemaChangedError"


def test_max_inflight_bounds_the_calls_in_flight_on_a_server(probe: Probe) -> None:
    """Six independent steps on a server with ``max_inflight: 2``: the server never sees more
    than two calls at once, and all six succeed."""
    sleeps = [{"seconds": 0.05 + i / 1000} for i in range(6)]  # distinct: not repeated calls
    steps = [{"id": f"z{i}", "tool": "probe.sleep", "args": a} for i, a in enumerate(sleeps)]
    with MCPHub([probe(max_inflight=2)]) as hub:
        tools = tools_of(hub)
        result = run(plan(*steps), tools)
        assert result.status == "succeeded"
        asked = run(plan({"id": "p", "tool": "probe.peak", "args": {}}), tools)
    assert asked.steps["p"].output == {"result": 2}


@pytest.mark.parametrize(("code", "attempts"), [(-32001, 2), (-32602, 1)])
def test_a_json_rpc_error_is_classified_by_its_code(probe: Probe, code: int, attempts: int) -> None:
    """A JSON-RPC error answer is MCPRequestError with its code: a request timeout (-32001)
    is retried, invalid params (-32602) are not."""
    retry = {"max_attempts": 2, "initial_delay": 0}
    with MCPHub([probe()]) as hub:
        result = run(
            plan({"id": "r", "tool": "probe.refuse", "args": {"code": code}, "retry": retry}),
            tools_of(hub),
        )
    step = result.steps["r"]
    assert step.error is not None
    assert (step.error["type"], step.attempts) == ("MCPRequestError", attempts)
    assert f"JSON-RPC error {code}" in step.error["message"]


BROKEN_SCHEMAS = [
    ({"type": "object", "properties": {"x": {"type": "nonsense"}}}, "properties/x/type"),
    ({"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}}, "'regex'"),
    ({"type": "object", "patternProperties": {"(": {}}}, "'regex'"),
]


@pytest.mark.parametrize(("schema", "said"), BROKEN_SCHEMAS)
def test_an_input_schema_that_is_not_json_schema_is_refused_when_listed(
    probe_dir: Any, monkeypatch: pytest.MonkeyPatch, schema: dict[str, Any], said: str
) -> None:
    """A tool whose ``inputSchema`` is not JSON Schema is an error naming the server and the
    tool when it is listed; before, it passed validation and approval and every call failed
    with the validator's own exception (UnknownType, re.error)."""
    monkeypatch.setenv("PROBE_SCHEMA", json.dumps(schema))
    with MCPHub([stdio_probe()]) as hub, pytest.raises(ToolLoadError) as caught:
        tools_of(hub)
    message = caught.value.message
    assert "MCP server 'probe': tool 'shaped' has an inputSchema that is not valid" in message
    assert said in message


DRAFT_07 = "http://json-schema.org/draft-07/schema#"
TUPLE = {"type": "object", "properties": {"pair": {"type": "array", "items": [
    {"type": "string"}, {"type": "integer"}]}}}  # fmt: skip


@pytest.mark.parametrize("schema", [{"$schema": DRAFT_07, **TUPLE}, TUPLE])
def test_a_draft_07_tuple_schema_checks_arguments_by_draft_07(
    probe_dir: Any, monkeypatch: pytest.MonkeyPatch, schema: dict[str, Any]
) -> None:
    """Draft-07's tuple ``items: [...]`` (named by ``$schema``, or not: only draft-07 accepts
    it) is applied as draft-07: a fitting pair is called, a wrong one is an ArgumentError.
    Before, every call failed with an AttributeError from the 2020-12 validator."""
    monkeypatch.setenv("PROBE_SCHEMA", json.dumps(schema))
    with MCPHub([stdio_probe()]) as hub:
        tools = tools_of(hub)
        good = run(plan({"id": "s", "tool": "probe.shaped", "args": {"pair": ["a", 1]}}), tools)
        bad = run(plan({"id": "s", "tool": "probe.shaped", "args": {"pair": [1, "a"]}}), tools)
    assert good.steps["s"].output == {"result": "fits"}, good.steps["s"].error
    error = bad.steps["s"].error
    assert error is not None
    assert error["type"] == "ArgumentError"
    assert "do not fit its input schema: pair." in error["message"]


DANGLING = [
    ({"properties": {"d": {"$ref": "#/$defs/nowhere"}}}, "#/$defs/nowhere", "nothing at"),
    ({"$defs": {"a": {"properties": {"x": {"$ref": "#/$defs/b"}}}},
      "properties": {"d": {"$ref": "#/$defs/a"}}}, "#/$defs/b", "nothing at"),
    ({"properties": {"d": {"$ref": "#point"}}}, "#point", "no anchor 'point'"),
    ({"properties": {"d": {"$ref": "http://127.0.0.1:9/s.json"}}}, "http://127.0.0.1:9/s.json",
     "planrail never fetches a schema"),
]  # fmt: skip


@pytest.mark.parametrize(("ref", "named", "why"), DANGLING)
def test_a_ref_that_resolves_nowhere_is_refused_when_listed(
    probe_dir: Any, monkeypatch: pytest.MonkeyPatch, ref: dict[str, Any], named: str, why: str
) -> None:
    """A ``$ref`` to a ``$defs`` entry (or anchor) the schema does not have, even one reached
    through another ``$ref``, or to a schema elsewhere, is an error naming the server, the
    tool and the ref when the tool is listed, before any plan runs. Before, it passed
    validation and approval, and each call failed with a ToolDefinitionError (and a remote
    ``$ref`` was fetched over the network by the validator, at call time)."""
    monkeypatch.setenv("PROBE_SCHEMA", json.dumps({"type": "object", **ref}))
    with MCPHub([stdio_probe()]) as hub, pytest.raises(ToolLoadError) as caught:
        tools_of(hub)
    message = caught.value.message
    assert (
        f"MCP server 'probe': tool 'shaped' has an inputSchema whose $ref {named!r} resolves"
        " nowhere" in message
    )
    assert why in message


def test_a_schema_that_cannot_be_applied_fails_the_call_clearly(
    probe_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop through ``anyOf`` (which may end, so the listing lets it be) shows when the
    arguments are checked: the step fails with a ToolDefinitionError naming the tool, nothing
    is sent — not a RecursionError. (A plain ``$ref`` loop is refused at listing:
    ``test_schemas.py``.)"""
    loop = {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}
    ref = {"$defs": {"a": loop}, "properties": {"d": {"$ref": "#/$defs/a"}}}
    monkeypatch.setenv("PROBE_SCHEMA", json.dumps({"type": "object", **ref}))
    with MCPHub([stdio_probe()]) as hub:
        result = run(plan({"id": "s", "tool": "probe.shaped", "args": {"d": "x"}}), tools_of(hub))
    error = result.steps["s"].error
    assert error is not None
    assert error["type"] == "ToolDefinitionError"
    assert "the input schema of MCP tool 'probe.shaped' cannot be applied" in error["message"]


def test_an_answer_the_sdk_cannot_read_fails_the_call_at_once(probe_dir: Any) -> None:
    """A stdio reply the SDK's parser refuses (an integer of 5,000 digits) is tied to its
    request by its ``id``: the step fails at once, saying the call was made and its result is
    lost (not retried, though the policy would). Before, the SDK dropped the line and the step
    waited its whole timeout, then failed as a timeout: retryable, so the tool ran again."""
    retry = {"max_attempts": 2, "initial_delay": 0}
    with MCPHub([stdio_probe(call_timeout=20)]) as hub:
        result = run(plan({"id": "h", "tool": "probe.huge", "args": {}, "retry": retry}),
                     tools_of(hub))  # fmt: skip
    step = result.steps["h"]
    assert step.error is not None
    assert (step.error["type"], step.attempts) == ("MCPRequestError", 1), step.error
    assert "a reply that cannot be read" in step.error["message"]


def test_a_tools_entry_for_a_tool_the_server_does_not_list_is_an_error(probe_dir: Any) -> None:
    """The config's ``tools`` entry for a tool the server does not list (a typo) is an error
    naming the server, the name and the tools it lists; before, it was ignored, and with it
    the operator's ``requires_approval``."""
    server = stdio_probe(tools={"lokup": {"requires_approval": True}, "lookup": {}})
    with MCPHub([server]) as hub, pytest.raises(ToolLoadError) as caught:
        tools_of(hub)
    message = caught.value.message
    assert "MCP server 'probe': the config's 'tools' name ['lokup'] it does not list" in message
    assert "(it lists: big, charge, evolve, fail, garble, huge, leave, lookup," in message
