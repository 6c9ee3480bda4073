"""Migration 0007 on a database written before it: table ids become content hashes, references follow."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from alembic import command
from sqlalchemy import text

from darrm_opt.certify.certificate import certify
from darrm_opt.ledger.db import Database, alembic_config, migration_connection
from darrm_opt.ledger.local import Ledger
from darrm_opt.mechanisms import params_key
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve
from darrm_opt.privacy.table import table_id


def _upgrade(db: Database, revision: str) -> None:
    with migration_connection(db) as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'old.db'}"
    return request.getfixturevalue("empty_pg_database")


def test_0007_rekeys_tables_by_content_and_keeps_every_reference(url):
    params = Params(5, 2)
    gamma = [float(g) for g in solve(params).gamma]
    cert = json.dumps(certify(params, gamma).to_dict())
    now = datetime.now(UTC)
    db = Database(url)
    try:
        _upgrade(db, "0006_table_teachers")
        old = params.key()  # ids before 0007: the parameters' hash, γ left out
        with db.write() as conn:
            conn.execute(text(
                "INSERT INTO gamma_tables (id, \"K\", m, epsilon, teacher_delta, delta, prior, teachers, solver, "
                "gamma, certificate, expected_error, solve_seconds, created_at) VALUES (:id, 5, 2, 0.1, 1e-05, :delta, "
                "'paper', 'shared', 'highs', :gamma, :cert, 0.1, 0.5, :now)"),
                {"id": old, "delta": params.delta, "gamma": json.dumps(gamma), "cert": cert, "now": now})
            conn.execute(text(
                "INSERT INTO ledgers (id, name, epsilon_budget, delta_budget, answers, epsilon_spent, delta_spent, "
                "composition, created_at, updated_at) VALUES ('l1', 'old', 5, 0.001, 7, 1.4, 0.0001, 'basic', "
                ":now, :now)"), {"now": now})
            conn.execute(text("INSERT INTO ledger_usage (ledger_id, table_id, epsilon0, delta0, answers) "
                              "VALUES ('l1', :id, 0.2, :delta, 7)"), {"id": old, "delta": params.delta})
            conn.execute(text(
                "INSERT INTO spends (ledger_id, table_id, rows, epsilon_spent, delta_spent, composition, created_at) "
                "VALUES ('l1', :id, 7, 1.4, 0.0001, 'basic', :now)"), {"id": old, "now": now})
        _upgrade(db, "head")
        new = table_id("darrm", params, "shared", gamma)
        assert new != old
        with db.read() as conn:
            assert conn.execute(text("SELECT id, params_key, kind FROM gamma_tables")).all() == [
                (new, params_key(params, "shared"), "darrm")]
            stored = conn.execute(text("SELECT params FROM gamma_tables")).scalar_one()
            assert json.loads(stored) == params.canonical()
            assert conn.execute(text("SELECT table_id, answers FROM ledger_usage")).all() == [(new, 7)]
            assert conn.execute(text("SELECT table_id, debit_id FROM spends")).all() == [(new, None)]
    finally:
        db.dispose()
    with Ledger(url, "old") as book:  # the migrated ledger keeps its answers under the table's new id
        view = book.view()
        assert view["answers"] == 7 and view["groups"][0]["table_id"] == new
