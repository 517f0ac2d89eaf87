"""Security tests: report how many fuzz examples each target ran."""

from __future__ import annotations

from typing import Any

from .kit import FUZZ_EXAMPLES as EXAMPLES


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if EXAMPLES:
        counts = ", ".join(f"{k}: {v:,}" for k, v in sorted(EXAMPLES.items()))
        terminalreporter.write_line(f"security fuzz examples run — {counts}")
