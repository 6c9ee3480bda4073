"""Data-dependent ledgers: PATE's data-dependent accounting published as a sanitised ε.

``data_dependent_ledgers`` (darrm_opt.ledger.dd_account): the public policy, the query counts, the
private account (``state``: never served) and the one published, sanitised ε (NULL until sealed).
The data-independent ledgers (``ledgers``) are unchanged.

Revision ID: 0009_ledger_modes
Revises: 0008_tenants
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_ledger_modes"
down_revision = "0008_tenants"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "data_dependent_ledgers",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("policy", sa.Text(), nullable=False),
        sa.Column("queries", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("answered", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("published_epsilon", sa.Double(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False, server_default="default"),
    )
    op.create_index("ix_data_dependent_ledgers_tenant", "data_dependent_ledgers", ["tenant"])


def downgrade() -> None:
    op.drop_index("ix_data_dependent_ledgers_tenant", table_name="data_dependent_ledgers")
    op.drop_table("data_dependent_ledgers")
