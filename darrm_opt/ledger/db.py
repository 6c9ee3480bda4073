"""Database access: engines, write transactions that lock, and Alembic migrations.

SQLite (the embedded default): WAL journal, ``synchronous`` from the settings (FULL by default, so a
committed debit is on disk), ``busy_timeout`` 30 s. The driver's own transaction handling is switched off
and every transaction is begun explicitly: ``BEGIN IMMEDIATE`` for writes, which takes SQLite's single
write lock at the start (several server processes serialise there, and a read never has to be upgraded
to a write mid-transaction), plain ``BEGIN`` for reads (WAL readers never block the writer).

PostgreSQL: ``postgresql://`` URLs are rewritten to the psycopg 3 driver; writers lock the rows they
change with ``SELECT … FOR UPDATE`` (see :mod:`darrm_opt.ledger.writer`); migrations hold an advisory lock so
that several processes starting at once apply them once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.engine.url import URL

_WRITE = "darrm_write"
#: the database of the service and of ``aggregate --ledger`` when none is named (``DARRM_DATABASE_URL``)
DEFAULT_URL = "sqlite:///darrm.db"
#: pg_advisory_xact_lock key for migrations (arbitrary, fixed)
MIGRATION_LOCK = 7_247_301_811


def normalize_url(url: str) -> URL:
    """A SQLAlchemy URL; ``postgresql://`` and ``postgres://`` use the psycopg 3 driver."""
    text_url = url.strip()
    for prefix in ("postgresql://", "postgres://", "postgresql+psycopg2://"):
        if text_url.startswith(prefix):
            text_url = "postgresql+psycopg://" + text_url[len(prefix):]
            break
    parsed = make_url(text_url)
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise ValueError(f"unsupported database URL {parsed.render_as_string(hide_password=True)!r}: "
                         "use sqlite:///PATH or postgresql://USER@HOST/DB")
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise ValueError("an in-memory SQLite database cannot hold a ledger: use sqlite:///PATH")
    return parsed


class Database:
    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        if self.is_sqlite:
            self.engine: Engine = create_engine(
                self.url,
                connect_args={"check_same_thread": False, "timeout": 30},
                pool_size=8,
                max_overflow=16,
            )
            self._install_sqlite_hooks(sqlite_synchronous)
        else:
            self.engine = create_engine(self.url, pool_size=8, max_overflow=16, pool_pre_ping=True)

    def _install_sqlite_hooks(self, synchronous: str) -> None:
        if synchronous not in ("FULL", "EXTRA", "NORMAL"):
            raise ValueError(f"invalid SQLite synchronous mode {synchronous!r}")

        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_connection, _record):  # noqa: ANN001
            dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_connection.cursor()
            cur.execute("PRAGMA busy_timeout = 30000")
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute(f"PRAGMA synchronous = {synchronous}")
            cur.execute("PRAGMA foreign_keys = ON")
            cur.close()

        @event.listens_for(self.engine, "begin")
        def _on_begin(conn: Connection) -> None:
            immediate = conn.get_execution_options().get(_WRITE, False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    @property
    def description(self) -> str:
        return self.url.render_as_string(hide_password=True)

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that may write; committed on normal exit, rolled back on an exception.

        On SQLite it holds the database's write lock from its first statement (BEGIN IMMEDIATE)."""
        with self.engine.connect() as conn:
            conn = conn.execution_options(**{_WRITE: True})
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            with conn.begin():
                yield conn

    def ping(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1")).scalar_one()
            return True
        except Exception:  # noqa: BLE001 - readiness reports any failure as "not ready"
            return False

    def dispose(self) -> None:
        self.engine.dispose()


def alembic_config(url: str | None = None):
    """An Alembic ``Config`` for the packaged migrations (works after ``pip install .``)."""
    from alembic.config import Config

    here = Path(__file__).resolve().parent
    cfg = Config(str(here / "alembic.ini"))
    cfg.set_main_option("script_location", str(here / "migrations"))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", normalize_url(url).render_as_string(hide_password=False)
                            .replace("%", "%%"))
    return cfg


@contextlib.contextmanager
def migration_connection(db: Database) -> Iterator[Connection]:
    """A write transaction holding the lock that serialises migrations between processes."""
    with db.write() as conn:
        if not db.is_sqlite:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
        yield conn


def migrate(db: Database) -> None:
    """Bring the schema to the newest revision, once even when several processes start together."""
    from alembic import command

    with migration_connection(db) as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
