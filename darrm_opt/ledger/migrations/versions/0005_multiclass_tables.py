"""Multi-class γ tables (PATE setting, class-label votes): a nullable ``classes`` column.

A row with ``classes`` = C is a multi-class table for disjoint non-private teachers (id =
``MulticlassParams.key()``): ``epsilon`` holds its per-answer ε, ``delta`` its per-answer δ, ``m`` = 1 and
``teacher_delta`` = 0 (so the per-answer cost m·ε is its ε); NULL is a binary table, as before.

Revision ID: 0005_multiclass_tables
Revises: 0002_privacy_profile
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_multiclass_tables"
down_revision = "0002_privacy_profile"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gamma_tables") as batch:
        batch.add_column(sa.Column("classes", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gamma_tables") as batch:
        batch.drop_column("classes")
