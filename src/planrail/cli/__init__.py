"""Layer 6: the ``planrail`` command line."""

from planrail.cli.app import app, main

__all__ = ["app", "main"]
