"""``planrail resume --max-concurrency N --fail-fast``: how a resumed run runs, as its tools see it.

A run's ``--max-concurrency`` and ``--fail-fast`` are stored with it; a resume given neither runs
as the run last ran, and one given either runs so — and stores it, so that later resumes run so
too. ``resume`` had neither option: a stored run could not be resumed any wider or narrower, nor
made to stop at its first failure. The runs here wait for approval first (``run`` without
``--yes`` and without a terminal: exit 4, nothing called), so that the resume runs every step.

And a resume's stored plan is validated once, by the run path, under the security policy the
run resumes under: a plan ``--strict --override-policy`` makes invalid exits 3 with its issues,
as ``run`` and ``validate`` do (it exited 2, a one-line error, after a check without a policy).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import DATA, Cli

TOOLS = str(DATA / "flight_tools.py")


class Flight:
    """What ``flight_tools.call_api`` saw: which calls started, and most under way at once."""

    def __init__(self, log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log = log
        self._env = monkeypatch

    def expect(self, *, width: int = 1, failing: tuple[str, ...] = ()) -> None:
        """The next command's calls wait for ``width`` of them to be under way together;
        those named ``failing`` fail. Forgets the calls seen so far."""
        self._env.setenv("PLANRAIL_TEST_WIDTH", str(width))
        self._env.setenv("PLANRAIL_TEST_FAIL", ",".join(failing))
        self.log.unlink(missing_ok=True)

    def _lines(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    @property
    def calls(self) -> list[str]:
        return [line[1:] for line in self._lines() if line.startswith("+")]

    @property
    def peak(self) -> int:
        now = most = 0
        for line in self._lines():
            now += 1 if line.startswith("+") else -1
            most = max(most, now)
        return most


@pytest.fixture
def flight(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Flight:
    monkeypatch.setenv("PLANRAIL_TEST_FLIGHT", str(cli.cwd / "flight.txt"))
    found = Flight(cli.cwd / "flight.txt", monkeypatch)
    found.expect()
    return found


def _stored_waiting(cli: Cli, flight: Flight, args: list[dict[str, str]], *options: str) -> None:
    """Run ``R`` of a plan with one ``call_api`` step per ``args``, stored waiting for
    approval (started with ``options``): nothing called."""
    steps = [
        {"id": f"s{i}", "tool": "call_api", "args": arg} for i, arg in enumerate(args, start=1)
    ]
    plan = cli.cwd / "plan.json"
    plan.write_text(json.dumps({"goal": "call the API", "steps": steps}))
    result = cli("run", str(plan), "--tools", TOOLS, "--run-id", "R", *options)
    assert result.exit_code == 4, result.output
    assert flight.calls == []


def _statuses(data: dict[str, object]) -> dict[str, object]:
    steps = data["steps"]
    assert isinstance(steps, list)
    return {s["id"]: s["status"] for s in steps}


def test_max_concurrency_given_to_resume_is_the_runs_from_then_on(cli: Cli, flight: Flight) -> None:
    """Started with ``--max-concurrency 1``: ``resume --max-concurrency 3`` has its three
    steps under way at once (they all fail); the next resume, given nothing, runs them again
    three at once — the run's limit is now 3, not the 1 it started with."""
    _stored_waiting(cli, flight, [{"name": n} for n in "abc"], "--max-concurrency", "1")

    flight.expect(width=3, failing=("a", "b", "c"))
    code, data = cli.json(
        "resume", "R", "--tools", TOOLS, "--max-concurrency", "3", "--yes", "--json"
    )
    assert code == 1
    assert set(_statuses(data).values()) == {"failed"}
    assert sorted(flight.calls) == ["a", "b", "c"]
    assert flight.peak == 3

    flight.expect(width=3)
    code, data = cli.json("resume", "R", "--tools", TOOLS, "--json")
    assert code == 0, data
    assert sorted(flight.calls) == ["a", "b", "c"]
    assert flight.peak == 3


def test_fail_fast_given_to_resume_stops_the_run_and_holds_on_later_resumes(
    cli: Cli, flight: Flight
) -> None:
    """Started without ``--fail-fast``: ``resume --fail-fast --max-concurrency 1`` calls
    ``bad`` (first in plan order), which fails, and then nothing else — the independent
    ``x`` and ``y`` are not called. A resume given neither option stops so again; once ``bad``
    succeeds, one more resume runs the rest, still one call at a time."""
    _stored_waiting(cli, flight, [{"name": "bad"}, {"name": "x"}, {"name": "y"}])

    flight.expect(failing=("bad",))
    code, data = cli.json(
        "resume", "R", "--tools", TOOLS, "--fail-fast", "--max-concurrency", "1", "--yes", "--json"
    )
    assert code == 1
    assert flight.calls == ["bad"]
    statuses = _statuses(data)
    assert statuses["s1"] == "failed"
    assert statuses["s2"] in ("skipped", "cancelled")
    assert statuses["s3"] in ("skipped", "cancelled")

    flight.expect(failing=("bad",))
    code, data = cli.json("resume", "R", "--tools", TOOLS, "--json")
    assert code == 1
    assert flight.calls == ["bad"]

    flight.expect()
    code, data = cli.json("resume", "R", "--tools", TOOLS, "--json")
    assert code == 0, data
    assert sorted(flight.calls) == ["bad", "x", "y"]
    assert flight.peak == 1


def test_a_stored_plan_invalid_under_the_policy_it_resumes_under_exits_3(
    cli: Cli, flight: Flight
) -> None:
    """Run ``R`` started without a policy has a placeholder literal (``<user_id>``) in the
    arguments of a step that changes the world: a warning then. Resumed under ``--strict
    --override-policy`` it is an error: exit 3 with the ``validate --json`` object (and, without
    ``--json``, the issues naming the run's plan); nothing is called."""
    _stored_waiting(cli, flight, [{"name": "<user_id>"}])

    args = ["resume", "R", "--tools", TOOLS, "--strict", "--override-policy", "--yes"]
    result = cli(*args, "--json")
    assert result.exit_code == 3, result.output
    data = json.loads(result.stdout)
    assert data["valid"] is False
    assert [(e["code"], e["step"]) for e in data["errors"]] == [("placeholder_literal", "s1")]

    result = cli(*args)
    assert result.exit_code == 3
    assert "the plan of run R is invalid" in result.output
    assert "placeholder_literal" in result.output
    assert flight.calls == []


def test_no_fail_fast_given_to_resume_goes_on_past_failures_from_then_on(
    cli: Cli, flight: Flight
) -> None:
    """Started with ``--fail-fast``: ``resume --no-fail-fast`` calls ``x`` after ``bad``
    failed (one call at a time, in plan order), and so does the next resume, given neither."""
    _stored_waiting(
        cli, flight, [{"name": "bad"}, {"name": "x"}], "--fail-fast", "--max-concurrency", "1"
    )
    for given in (["--no-fail-fast"], []):
        flight.expect(failing=("bad", "x"))
        code, data = cli.json("resume", "R", "--tools", TOOLS, *given, "--yes", "--json")
        assert code == 1
        assert flight.calls == ["bad", "x"]
        assert _statuses(data) == {"s1": "failed", "s2": "failed"}


def test_a_ray_resume_sizes_its_runner_to_the_runs_width(
    cli: Cli, flight: Flight, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``resume --backend ray`` given no ``--max-concurrency`` builds its Ray runner as wide as
    the run will run (its stored width), as ``run`` builds it for the width given: it was 64
    whatever the run's, so a run started 100 wide resumed 64 wide. (The runner is recorded and
    the local one used: what Ray does with the width is ``tests/runners``'.)"""
    from planrail.cli import runs_cmd

    widths: list[int | None] = []

    def recorded(backend: str, address: str | None, width: int | None, console: object) -> None:
        widths.append(width)

    monkeypatch.setattr(runs_cmd, "tool_runner_for", recorded)
    _stored_waiting(cli, flight, [{"name": "a"}], "--max-concurrency", "100")
    code, _ = cli.json("resume", "R", "--tools", TOOLS, "--backend", "ray", "--yes", "--json")
    assert code == 0
    assert widths == [100]
