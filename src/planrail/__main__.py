"""``python -m planrail``: the ``planrail`` command, for an environment whose scripts folder is
not on ``PATH`` (``.venv/bin/python -m planrail run plan.json``).

The same entry point as the script (``_planrail_entry``), so a Ctrl-C exits 130 with one line
here too — from the moment this module runs; ``python -m`` imports the ``planrail`` package
first, and a Ctrl-C during that import is Python's own ``KeyboardInterrupt``.
"""

from __future__ import annotations

import sys

from _planrail_entry import main

if __name__ == "__main__":
    sys.exit(main())
