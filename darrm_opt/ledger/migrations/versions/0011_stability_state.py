"""The runtime state of jobs a ledger runs across calls (the stability-based release's sparse-vector test).

``job_states`` (darrm_opt.ledger.job_state): per ledger and table, the kind's private state of its current
job as text (for the stability kind: the threshold noise ρ, the count of unstable answers, the queries asked
and answered, the jobs opened) and a version that every update bumps (compare and swap). The state is
private: no view serves it.

Revision ID: 0011_stability_state
Revises: 0010_shared_compositions
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_stability_state"
down_revision = "0010_shared_compositions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_states",
        sa.Column("ledger_id", sa.String(32), sa.ForeignKey("ledgers.id"), primary_key=True),
        sa.Column("table_id", sa.String(32), sa.ForeignKey("gamma_tables.id"), primary_key=True),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("job_states")
