"""Fixtures for the service tests (servers, clients, a fresh PostgreSQL database); see svc_helpers."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import httpx
import pytest
from svc_helpers import PG_URL, Server


@pytest.fixture(scope="session")
def sqlite_server(tmp_path_factory) -> Iterator[Server]:
    """The shared server: SQLite file, small inline-solve limit (K = 7 with Δ > 0 goes to a job)."""
    d = tmp_path_factory.mktemp("sqlite-server")
    server = Server(d, f"sqlite:///{d / 'darrm.db'}", env={
        "DARRM_INLINE_MAX_MULTISETS": "1000",  # K <= 5 with Δ > 0, K <= 15 pure: inline
        "DARRM_MAX_MULTISETS": "200000",
        "DARRM_MAX_ROWS": "30000",
    }).start()
    yield server
    server.stop()


@pytest.fixture
def client(sqlite_server) -> Iterator[httpx.Client]:
    with sqlite_server.client() as c:
        yield c


@contextlib.contextmanager
def fresh_pg_database() -> Iterator[str]:
    """A new, empty PostgreSQL database (dropped on exit); skips without the server."""
    if not PG_URL:
        pytest.skip("DARRM_TEST_POSTGRES_URL is not set")
    import psycopg
    from sqlalchemy.engine import make_url

    name = "darrm_test_" + uuid.uuid4().hex[:12]
    admin_url = PG_URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test run (dropped afterwards); skips without the server."""
    with fresh_pg_database() as url:
        yield url


@pytest.fixture
def empty_pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test (dropped afterwards); skips without the server."""
    with fresh_pg_database() as url:
        yield url
