"""Exact compositions shared by every server process.

``compositions`` (darrm_opt.ledger.compositions): an exact composition's ε by its key, or a claim (NULL ε)
while one process computes it, so that the other processes wait for it instead of computing it again.

Revision ID: 0010_shared_compositions
Revises: 0009_ledger_modes
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_shared_compositions"
down_revision = "0009_ledger_modes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "compositions",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("epsilon", sa.Double(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_compositions_updated_at", "compositions", ["updated_at"])


def downgrade() -> None:
    op.drop_index("ix_compositions_updated_at", table_name="compositions")
    op.drop_table("compositions")
