"""Strict JSON on the command line: everything the CLI prints as JSON parses with any parser.

``NaN`` and ``Infinity`` are not JSON; outputs holding them are refused when a tool returns them
(:mod:`planrail.plan.strict_json`), and should one arrive from elsewhere (an old record, an
error's data) it is printed as a string rather than as a bare ``NaN``.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["json_text"]


def json_text(value: Any, *, indent: int | None = None) -> str:
    """``value`` as strict JSON text (``allow_nan=False``); other objects as their ``str``."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=str, indent=indent)
    except ValueError:  # a non-finite number (or a cycle): print what can be printed
        return json.dumps(
            _finite(value, 0), ensure_ascii=False, allow_nan=False, default=str, indent=indent
        )


def _finite(value: Any, depth: int) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if depth > 100:
        return "…"
    if isinstance(value, dict):
        return {k: _finite(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v, depth + 1) for v in value]
    return value
