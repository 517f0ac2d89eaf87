"""Debian's Chromium for browser tests and benchmarks of the dashboard (driven by Playwright).

Never a downloaded browser build: launch Playwright's Chromium with
``executable_path=CHROMIUM, args=CHROMIUM_ARGS`` (``scripts/ensure-chromium.sh`` installs the
Debian package when it can).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "chromium_missing"]

CHROMIUM = os.environ.get("PLANRAIL_CHROMIUM", "/usr/bin/chromium")
"""Debian's package; ``PLANRAIL_CHROMIUM`` names another binary (or a missing one, to check that
the browser tests skip cleanly)."""
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_missing() -> str | None:
    """Why a browser cannot be driven here (Chromium or Playwright missing), or None."""
    if not Path(CHROMIUM).exists():
        return f"no Debian chromium at {CHROMIUM} (make test installs it when it can)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright (Python) is not installed (it is in the test dependency group)"
    return None
