"""`planrail ui` as a command: it serves on 127.0.0.1 and prints the URL with the token."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx


def test_planrail_ui_prints_a_token_url_that_signs_in(tmp_path: Path) -> None:
    """The printed URL is on 127.0.0.1 (a free port with --port 0) with a random token; it sets
    the session cookie (the page then loads), while the same page without the token is 401."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    cmd = [sys.executable, "-c", "from planrail.cli import main; main()", "ui"]
    cmd += ["--store", f"sqlite:///{tmp_path / 'store.db'}", "--port", "0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:(\d+)/\?token=(\S+))", line)
        assert found, line
        port = int(found.group(2))
        with httpx.Client(timeout=10) as http:
            bare = http.get(f"http://127.0.0.1:{port}/")  # listening before the URL is printed
            assert bare.status_code == 401
            signed = http.get(found.group(1), follow_redirects=True)
            assert signed.status_code == 200
            assert "planrail" in signed.text
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
