"""γ tables carry their privacy profile (exact accounting): a nullable JSON text column.

Revision ID: 0002_privacy_profile
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_privacy_profile"
down_revision = "7c1e5a9d2b40"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gamma_tables") as batch:
        batch.add_column(sa.Column("privacy_profile", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gamma_tables") as batch:
        batch.drop_column("privacy_profile")
