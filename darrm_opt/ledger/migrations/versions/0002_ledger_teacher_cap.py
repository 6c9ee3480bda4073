"""Ledgers of disjoint-shard private teachers: the teachers' (ε, Δ) caps the total (parallel composition).

Revision ID: 0002_ledger_teacher_cap
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_ledger_teacher_cap"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ledgers", sa.Column("cap_epsilon", sa.Double, nullable=True))
    op.add_column("ledgers", sa.Column("cap_delta", sa.Double, nullable=True))


def downgrade() -> None:
    op.drop_column("ledgers", "cap_delta")
    op.drop_column("ledgers", "cap_epsilon")
