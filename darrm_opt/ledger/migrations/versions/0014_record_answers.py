"""Free re-answers by record id.

``record_answers`` (darrm_opt.ledger.schema.RecordAnswer): per (ledger, client's record id) the answer the
ledger released for it, the table that released it and a digest of the row's votes; written in the debit's
transaction.

Revision ID: 0014_record_answers
Revises: 0013_plans
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_record_answers"
down_revision = "0013_plans"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "record_answers",
        sa.Column("ledger_id", sa.String(32), sa.ForeignKey("ledgers.id"), primary_key=True),
        sa.Column("record_id", sa.String(200), primary_key=True),
        sa.Column("table_id", sa.String(32), sa.ForeignKey("gamma_tables.id"), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("votes_digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("record_answers")
