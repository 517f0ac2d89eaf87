"""Shared fixtures. PostgreSQL fixtures come from ``conftest_pg`` (see scripts/test-services.sh)."""

pytest_plugins = ["conftest_pg"]
