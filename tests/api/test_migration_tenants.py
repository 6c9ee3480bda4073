"""Migration 0008 on a database written before it: every ledger belongs to the tenant ``default``, the
tenant of a plain ``DARRM_API_KEYS`` key, and keys made afterwards are stored by digest."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alembic import command
from sqlalchemy import text

from darrm_opt.ledger.db import Database, alembic_config, migration_connection
from darrm_opt.ledger.keys import add_key, load_keys
from darrm_opt.ledger.views import LedgerStore


def _migrate(db: Database, revision: str, down: bool = False) -> None:
    with migration_connection(db) as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'old.db'}"
    return request.getfixturevalue("empty_pg_database")


def test_0008_gives_old_ledgers_to_the_default_tenant(url):
    now = datetime.now(UTC)
    db = Database(url)
    try:
        _migrate(db, "0007_table_content_ids")
        with db.write() as conn:
            conn.execute(text(
                "INSERT INTO ledgers (id, name, epsilon_budget, delta_budget, answers, epsilon_spent, delta_spent, "
                "composition, created_at, updated_at) VALUES ('a' || :x, 'old', 1.0, 0.001, 0, 0, 0, 'basic', :now, "
                ":now)"), {"x": "0" * 31, "now": now})
        _migrate(db, "head")
        store = LedgerStore(db)
        old = "a" + "0" * 31
        assert store.get(old, "default")["tenant"] == "default"
        assert store.get(old, "acme") is None
        assert [v["id"] for v in store.list(10, 0, "default")[0]] == [old]
        key_id, key = add_key(db, "acme")
        assert [p.tenant for p in load_keys(db).values()] == ["acme"]
        _migrate(db, "0007_table_content_ids", down=True)  # and back: the keys go, the ledger stays
        with db.read() as conn:
            assert conn.execute(text("SELECT count(*) FROM ledgers")).scalar_one() == 1
    finally:
        db.dispose()
