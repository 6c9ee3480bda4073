"""Alembic environment: migrates the connection handed in by :func:`darrm_opt.ledger.db.migrate`, or the database of
``sqlalchemy.url`` / ``DARRM_DATABASE_URL`` when run from the ``alembic`` command line."""

from __future__ import annotations

from alembic import context

from darrm_opt.ledger.schema import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    import os

    from darrm_opt.ledger.db import DEFAULT_URL, normalize_url

    url = config.get_main_option("sqlalchemy.url") or os.environ.get("DARRM_DATABASE_URL") or DEFAULT_URL
    return normalize_url(url).render_as_string(hide_password=False)


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def _run(connection) -> None:  # noqa: ANN001
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():  # a no-op inside the caller's transaction
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from darrm_opt.ledger.db import Database, migration_connection

    db = Database(_url())
    try:
        with migration_connection(db) as conn:  # SQLite write lock / PostgreSQL advisory lock
            _run(conn)
    finally:
        db.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
