"""Budget plans shared by every server process.

``plans`` (api/plan_store.py): one row per plan id (a hash of its inputs): the request that rebuilds its
work, its status (queued | running | done | failed), progress, result or error, the planned table's id and
the last ledger opened with it; ``attempts`` counts the runs started (first claim, retry after a failure,
takeover); ``owner`` and ``updated_at`` are a heartbeated lease
(darrm_opt.ledger.leases), so a plan whose process died is taken over by another within seconds.

Revision ID: 0013_plans
Revises: 0012_jobs
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_plans"
down_revision = "0012_jobs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "plans",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("progress", sa.Text(), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("table_id", sa.String(32), nullable=True),
        sa.Column("ledger_id", sa.String(32), nullable=True),
        sa.Column("ledger_tenant", sa.String(64), nullable=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("plans")
