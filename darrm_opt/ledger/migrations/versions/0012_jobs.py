"""Labelling jobs of the service (``/v1/jobs``).

``label_jobs`` (darrm_opt.ledger.jobs): a tenant's named job, its plan inputs, the ledger that pays it and its
table once planned; the answers stay in the ledger's spend records.

Revision ID: 0012_jobs
Revises: 0011_stability_state
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_jobs"
down_revision = "0011_stability_state"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "label_jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("ledger_id", sa.String(32), sa.ForeignKey("ledgers.id"), nullable=False),
        sa.Column("table_id", sa.String(32), sa.ForeignKey("gamma_tables.id"), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("tenant", "name", name="uq_label_jobs_tenant_name"),
    )


def downgrade() -> None:
    op.drop_table("label_jobs")
