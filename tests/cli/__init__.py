"""Tests of the ``planrail`` command line: validate, run, exit codes, JSON shapes, the demo."""
