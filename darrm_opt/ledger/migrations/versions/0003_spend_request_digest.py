"""Spends: the SHA-256 digest of the request an idempotency key was first used for.

A key reused with a different request (other table, ledger or votes) is refused (422 naming
``idempotency_key``) instead of replaying answers that belong to other votes. Rows written before this
revision have no digest; for them the old check (same table and row count) still applies.

Revision ID: 7c1e5a9d2b40
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "7c1e5a9d2b40"
down_revision = "0002_ledger_teacher_cap"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("spends") as batch:
        batch.add_column(sa.Column("request_digest", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("spends") as batch:
        batch.drop_column("request_digest")
