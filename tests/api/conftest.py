"""Fixtures for the service tests (servers, clients, a fresh PostgreSQL database); see svc_helpers.

``client`` is the application in this process (the functional tests need HTTP semantics, not a process: they
run in the fast tier); ``sqlite_server`` is a real uvicorn process with the same settings, for the tests of
what only a process shows (those are marked ``slow``)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import httpx
import pytest
from svc_helpers import PG_URL, Server, in_process_client

#: the shared service's limits: K <= 5 with Δ > 0 and K <= 15 pure are solved inline, larger tables are jobs
SHARED = {"inline_max_multisets": 1000, "max_multisets": 200_000, "max_rows": 30_000}


@pytest.fixture(scope="session")
def sqlite_server(tmp_path_factory) -> Iterator[Server]:
    """The shared server: a real process, SQLite file, the SHARED limits (K = 7 with Δ > 0 goes to a job)."""
    d = tmp_path_factory.mktemp("sqlite-server")
    server = Server(d, f"sqlite:///{d / 'darrm.db'}",
                    env={f"DARRM_{name.upper()}": str(value) for name, value in SHARED.items()}).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def app_client(tmp_path_factory) -> Iterator[httpx.Client]:
    """The shared service in this process: its own SQLite file, the SHARED limits, the first key on every
    request; its lifespan (migrations, debit writer, solve pool) spans the session."""
    d = tmp_path_factory.mktemp("in-process")
    with in_process_client(f"sqlite:///{d / 'darrm.db'}", **SHARED) as c:
        yield c


@pytest.fixture
def client(app_client) -> httpx.Client:
    return app_client


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


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path) -> Iterator[str]:
    """A new SQLite file, then a new PostgreSQL database (skipped without the server): one test on each."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        with fresh_pg_database() as url:
            yield url
