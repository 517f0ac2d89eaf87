"""Contract tests of the named seams: every implementation passes the same tests."""
