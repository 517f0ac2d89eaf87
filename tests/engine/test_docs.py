"""The Python examples in docs/execution.md run as written and their assertions hold."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "execution.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_page_has_an_example() -> None:
    """docs/execution.md shows the Python API with at least one runnable example."""
    assert EXAMPLES


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_example_runs(source: str) -> None:
    """The example runs in a fresh thread (it calls ``asyncio.run``) without raising."""
    with ThreadPoolExecutor(1) as pool:
        code = compile(source, str(DOC), "exec")
        pool.submit(exec, code, {"__name__": "__main__"}).result()
