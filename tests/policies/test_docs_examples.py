"""Every Python example in docs/policies.md runs as written and its assertions hold."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "policies.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_page_has_an_example_per_policy() -> None:
    """One runnable example per section (retries … testing), at least nine."""
    assert len(EXAMPLES) >= 9


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_example_runs(source: str) -> None:
    """The example runs in a fresh thread (it calls asyncio.run) without raising."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(exec, compile(source, str(DOC), "exec"), {"__name__": "__main__"}).result()
