"""Tables are identified by their content; debits by their own id.

- ``gamma_tables.id`` becomes the table's content hash (:func:`darrm_opt.privacy.table.table_id`: kind,
  setting, parameters and γ), so two certified tables with equal parameters are two rows and a ledger
  prices each answer with its own table's profile. The service's solve of a parameter set is found by the
  new ``params_key`` (unique; NULL for tables registered from files). Each row is copied under its new id,
  the ``ledger_usage`` and ``spends`` rows that name it follow, and the old row is deleted (foreign keys
  stay enforced throughout). A row whose parameters cannot be read keeps its id and no ``params_key``
  (it is not servable either way).
- ``spends.debit_id`` (unique): the debit's own id, so that a retried transaction whose commit went through
  (its acknowledgement lost with the connection) is recognised and charged nothing more.

Revision ID: 0007_table_content_ids
Revises: 0006_table_teachers
Create Date: 2026-11-23
"""

from __future__ import annotations

from types import SimpleNamespace

import sqlalchemy as sa
from alembic import op

revision = "0007_table_content_ids"
down_revision = "0006_table_teachers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from darrm_opt.ledger.tables import row_id, row_params
    from darrm_opt.privacy.table import params_key

    op.add_column("gamma_tables", sa.Column("params_key", sa.String(32), nullable=True))
    op.add_column("spends", sa.Column("debit_id", sa.String(32), nullable=True))
    bind = op.get_bind()
    tables = sa.table("gamma_tables", sa.column("id"), sa.column("params_key"))
    rows = bind.execute(sa.text("SELECT * FROM gamma_tables")).mappings().all()
    for row in rows:
        r = SimpleNamespace(**dict(row))
        try:
            new_id = row_id(r)
            params, teachers = row_params(r)
            key = None if r.solver == "file" else params_key(params, teachers)
        except Exception:  # noqa: BLE001 - unreadable legacy row: left as it is
            continue
        if new_id != r.id:
            columns = ", ".join(f'"{c}"' for c in row.keys() if c != "id")  # quoted: "K" keeps its case
            bind.execute(sa.text(f"INSERT INTO gamma_tables (id, {columns}) SELECT :new, {columns} "
                                 "FROM gamma_tables WHERE id = :old"), {"new": new_id, "old": r.id})
            for child in ("ledger_usage", "spends"):
                bind.execute(sa.text(f"UPDATE {child} SET table_id = :new WHERE table_id = :old"),
                             {"new": new_id, "old": r.id})
            bind.execute(sa.text("DELETE FROM gamma_tables WHERE id = :old"), {"old": r.id})
        bind.execute(tables.update().where(tables.c.id == new_id).values(params_key=key))
    op.create_index("ix_gamma_tables_params_key", "gamma_tables", ["params_key"], unique=True)
    op.create_index("ix_spends_debit_id", "spends", ["debit_id"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_spends_debit_id", "spends")
    op.drop_index("ix_gamma_tables_params_key", "gamma_tables")
    with op.batch_alter_table("spends") as batch:
        batch.drop_column("debit_id")
    with op.batch_alter_table("gamma_tables") as batch:
        batch.drop_column("params_key")
