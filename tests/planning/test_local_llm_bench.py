"""The model evaluation (``bench.local_llm.evaluate --react``) end to end against the local
test server in llama.cpp's dialect: the planner's request and the ReAct loop's requests, the
summary line and the economy table. A smoke test of the benchmark code, not a measurement."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from planrail.testing.llm_server import LLMTestServer, RecordedRequest

ROOT = Path(__file__).resolve().parents[2]

PLAN = {
    "steps": [{"id": "weather", "tool": "get_weather", "args": {"city": "Paris"}, "depends_on": []}]
}


def _answer(request: RecordedRequest) -> dict[str, Any]:
    schema = (request.response_format or {}).get("schema") or {}
    if "steps" in schema.get("properties", {}):
        return PLAN
    if "Result of get_weather" in request.text:
        return {"final": "18.5 C, light rain"}
    return {"tool": "get_weather", "args": {"city": "Paris"}}


def test_evaluate_with_react_prints_the_economy_table(tmp_path: Path) -> None:
    """Plan-then-execute makes one model call for the weather goal; the ReAct loop two (the
    call, then the final answer after seeing the tool's result in the transcript). Both reach
    the expected call; the figures go to the JSON file."""
    out = tmp_path / "eval.json"
    with LLMTestServer(respond=_answer, dialect="llama_cpp") as srv:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.local_llm.evaluate",
                "--base-url",
                srv.url,
                "--model",
                "m",
                "--only",
                "weather",
                "--react",
                "--out",
                str(out),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        answered = [r for r in srv.completions if r.response_format.get("type") == "json_object"]
        react_requests = [r for r in answered if "steps" not in str(r.response_format)]
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == (
        "local model: 1/1 valid plans within 2 attempts, 1/1 reached the expected calls"
    )
    row = next(line for line in lines if line.startswith("| weather |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == ["1", "2"]  # model calls: planrail, ReAct
    assert cells[-1] == "yes / yes"
    # the second ReAct request carries the transcript: the first answer and the tool's result
    assert len(react_requests) == 2
    roles = [m["role"] for m in react_requests[1].messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert "light rain in Paris" in react_requests[1].messages[-1]["content"]
    react = json.loads(out.read_text())["goals"][0]["react"]
    assert (react["stopped"], react["executed"]) == ("final", ["get_weather"])


CALL_EVERY_TOOL = """
import json
from bench.local_llm import tools
samples = {"string": "Alice Smith", "number": 2.5}
for t in tools.TOOLS.values():
    props = t.spec.input_schema["properties"]
    t.output(t.fn(**t.call_kwargs({k: samples[p["type"]] for k, p in props.items()}, None)))
print(json.dumps([name for name, _ in tools.CALLS]))
"""


def test_every_bench_tool_answers_and_records_its_call() -> None:
    """Each tool of the goal set's catalogs runs with arguments of its input types and records
    the call (get_contact once clashed with the recorder's own parameter and always failed)."""
    proc = subprocess.run(
        [sys.executable, "-c", CALL_EVERY_TOOL],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    called = json.loads(proc.stdout)
    assert len(called) == 13
    assert "get_contact" in called
