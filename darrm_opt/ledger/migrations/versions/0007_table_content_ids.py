"""Tables say their kind and parameters and are identified by their content; debits by their own id.

- ``gamma_tables.kind`` (the mechanism: darrm, darrm-pate, darrm-multiclass) and ``gamma_tables.params`` (the
  kind's canonical parameters as JSON) become what a table is; the older parameter columns stay for list
  filters (darrm_opt.ledger.tables).
- ``gamma_tables.id`` becomes the table's content hash (darrm_opt.privacy.table.table_id: kind, parameters,
  setting and γ), so two certified tables with equal parameters are two rows and a ledger prices each
  answer with its own table's profile. The service's solve of a parameter set is found by the new
  ``params_key`` (unique; NULL for tables registered from files). Each row is copied under its new id, the
  ``ledger_usage`` and ``spends`` rows that name it follow, and the old row is deleted (foreign keys stay
  enforced throughout). A row whose parameters cannot be read keeps its id, kind 'unreadable' and no
  ``params_key`` (it was not servable either way).
- ``spends.debit_id`` (unique): the debit's own id, so that a retried transaction whose commit went through
  (its acknowledgement lost with the connection) is recognised and charged nothing more.

The hash and the reading of the older columns are written out here, as they were when this revision was
made.

Revision ID: 0007_table_content_ids
Revises: 0006_table_teachers
Create Date: 2026-11-23
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007_table_content_ids"
down_revision = "0006_table_teachers"
branch_labels = None
depends_on = None


def _digest(doc: dict) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def _kind_and_params(row: Any) -> tuple[str, dict, str]:
    """(kind, canonical parameters, teachers) of a row written before this revision."""
    from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior
    from darrm_opt.model.neighbours import PateParams
    from darrm_opt.model.params import Params

    teachers = row["teachers"] or "shared"
    if row["classes"] is not None:
        p: Any = MulticlassParams(row["K"], row["classes"], row["epsilon"], row["delta"],
                                  MulticlassPrior.parse(row["prior"]))
        return "darrm-multiclass", p.canonical(), "disjoint-nonprivate"
    if teachers == "disjoint-nonprivate":
        return "darrm-pate", PateParams(row["K"], row["epsilon"], row["delta"], row["prior"]).canonical(), teachers
    p = Params(row["K"], row["m"], row["epsilon"], row["teacher_delta"], row["delta"], row["prior"])
    return "darrm", p.canonical(), teachers


def _params_key(kind: str, canonical: dict, teachers: str) -> str:
    """The key of the parameters in their setting (the service's solve job id before and after)."""
    default = {"darrm": "shared", "darrm-pate": "disjoint-nonprivate", "darrm-multiclass": "disjoint-nonprivate"}
    return _digest(canonical if teachers == default[kind] else {**canonical, "teachers": teachers})


def upgrade() -> None:
    op.add_column("gamma_tables", sa.Column("kind", sa.String(40), nullable=False, server_default="unreadable"))
    op.add_column("gamma_tables", sa.Column("params", sa.Text, nullable=False, server_default="{}"))
    op.add_column("gamma_tables", sa.Column("params_key", sa.String(32), nullable=True))
    op.add_column("spends", sa.Column("debit_id", sa.String(32), nullable=True))
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT * FROM gamma_tables")).mappings().all()
    for row in rows:
        try:
            kind, canonical, teachers = _kind_and_params(row)
            gamma = [float(g) + 0.0 for g in json.loads(row["gamma"])]
        except Exception:  # noqa: BLE001 - unreadable legacy row: left as it is
            continue
        new_id = _digest({"format": "darrm-table-id-v1", "kind": kind, "params": canonical, "teachers": teachers,
                          "gamma": gamma})
        key = None if row["solver"] == "file" else _params_key(kind, canonical, teachers)
        old_id = row["id"]
        if new_id != old_id:
            columns = ", ".join(f'"{c}"' for c in row.keys() if c != "id")  # quoted: "K" keeps its case
            bind.execute(sa.text(f"INSERT INTO gamma_tables (id, {columns}) SELECT :new, {columns} "
                                 "FROM gamma_tables WHERE id = :old"), {"new": new_id, "old": old_id})
            for child in ("ledger_usage", "spends"):
                bind.execute(sa.text(f"UPDATE {child} SET table_id = :new WHERE table_id = :old"),
                             {"new": new_id, "old": old_id})
            bind.execute(sa.text("DELETE FROM gamma_tables WHERE id = :old"), {"old": old_id})
        bind.execute(sa.text("UPDATE gamma_tables SET kind = :kind, params = :params, params_key = :key, "
                             "teachers = :teachers WHERE id = :id"),
                     {"kind": kind, "params": json.dumps(canonical, sort_keys=True), "key": key,
                      "teachers": teachers, "id": new_id})
    op.create_index("ix_gamma_tables_params_key", "gamma_tables", ["params_key"], unique=True)
    op.create_index("ix_spends_debit_id", "spends", ["debit_id"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_spends_debit_id", "spends")
    op.drop_index("ix_gamma_tables_params_key", "gamma_tables")
    with op.batch_alter_table("spends") as batch:
        batch.drop_column("debit_id")
    with op.batch_alter_table("gamma_tables") as batch:
        for column in ("params_key", "params", "kind"):
            batch.drop_column(column)
