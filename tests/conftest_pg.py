"""pytest plugin: a PostgreSQL database for tests, with a fresh schema for every test.

``scripts/test-services.sh`` exports ``PLANRAIL_TEST_PG_URL`` (``make test`` sources it). Without
it, a server on 127.0.0.1:5432 with a database ``test`` is tried. With no server at all the
PostgreSQL tests skip, or fail when the ``CI`` environment variable is set.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

_LOCAL = "postgresql://postgres@127.0.0.1:5432/test"


def with_search_path(url: str, schema: str) -> str:
    """``url`` with ``options=-csearch_path=<schema>`` added, keeping any other options."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["options"] = f"{query.get('options', '')} -csearch_path={schema}".strip()
    return urlunsplit(parts._replace(query=urlencode(query)))


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    """The URL of a PostgreSQL database the tests may create schemas in (skips if none)."""
    url = os.environ.get("PLANRAIL_TEST_PG_URL") or _LOCAL
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=3).close()
    except Exception as exc:
        detail = (str(exc).strip() or repr(exc)).splitlines()[0]
        message = (
            f"no PostgreSQL for the tests at {url} ({type(exc).__name__}: {detail}); "
            "run `source scripts/test-services.sh` first (make test does), or set "
            "PLANRAIL_TEST_PG_URL"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return url


@pytest.fixture
def pg_url(pg_server_url: str) -> Iterator[str]:
    """A URL whose connections use a new, empty schema that is dropped after the test."""
    import psycopg
    from psycopg import sql

    schema = f"planrail_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield with_search_path(pg_server_url, schema)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
