"""Initial schema: γ tables, solve jobs, ledgers, per-table usage and spend records.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ts = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "gamma_tables",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("K", sa.Integer, nullable=False),
        sa.Column("m", sa.Double, nullable=False),
        sa.Column("epsilon", sa.Double, nullable=False),
        sa.Column("teacher_delta", sa.Double, nullable=False),
        sa.Column("delta", sa.Double, nullable=False),
        sa.Column("prior", sa.String(100), nullable=False),
        sa.Column("solver", sa.String(20), nullable=False),
        sa.Column("gamma", sa.Text, nullable=False),
        sa.Column("certificate", sa.Text, nullable=False),
        sa.Column("expected_error", sa.Double, nullable=False),
        sa.Column("solve_seconds", sa.Double, nullable=False),
        sa.Column("created_at", _ts, nullable=False),
    )
    op.create_index("ix_gamma_tables_K", "gamma_tables", ["K"])
    op.create_table(
        "solve_jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("params", sa.Text, nullable=False),
        sa.Column("solver", sa.String(20), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stage", sa.String(32), nullable=False),
        sa.Column("progress", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("created_at", _ts, nullable=False),
        sa.Column("updated_at", _ts, nullable=False),
    )
    op.create_table(
        "ledgers",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("epsilon_budget", sa.Double, nullable=False),
        sa.Column("delta_budget", sa.Double, nullable=False),
        sa.Column("answers", sa.BigInteger, nullable=False),
        sa.Column("epsilon_spent", sa.Double, nullable=False),
        sa.Column("delta_spent", sa.Double, nullable=False),
        sa.Column("composition", sa.String(32), nullable=False),
        sa.Column("created_at", _ts, nullable=False),
        sa.Column("updated_at", _ts, nullable=False),
    )
    op.create_table(
        "ledger_usage",
        sa.Column("ledger_id", sa.String(32), sa.ForeignKey("ledgers.id"), primary_key=True),
        sa.Column("table_id", sa.String(32), sa.ForeignKey("gamma_tables.id"), primary_key=True),
        sa.Column("epsilon0", sa.Double, nullable=False),
        sa.Column("delta0", sa.Double, nullable=False),
        sa.Column("answers", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "spends",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("ledger_id", sa.String(32), sa.ForeignKey("ledgers.id"), nullable=False),
        sa.Column("table_id", sa.String(32), sa.ForeignKey("gamma_tables.id"), nullable=False),
        sa.Column("rows", sa.Integer, nullable=False),
        sa.Column("epsilon_spent", sa.Double, nullable=False),
        sa.Column("delta_spent", sa.Double, nullable=False),
        sa.Column("composition", sa.String(32), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("answers", sa.Text, nullable=True),
        sa.Column("created_at", _ts, nullable=False),
        sa.UniqueConstraint("ledger_id", "idempotency_key", name="uq_spends_ledger_key"),
    )
    op.create_index("ix_spends_ledger_id", "spends", ["ledger_id"])


def downgrade() -> None:
    op.drop_index("ix_spends_ledger_id", table_name="spends")
    op.drop_table("spends")
    op.drop_table("ledger_usage")
    op.drop_table("ledgers")
    op.drop_table("solve_jobs")
    op.drop_index("ix_gamma_tables_K", table_name="gamma_tables")
    op.drop_table("gamma_tables")
