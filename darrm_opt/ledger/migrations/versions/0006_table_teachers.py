"""γ tables say their teacher setting (shared | disjoint-private | disjoint-nonprivate), part of their id.

``teachers`` defaults to ``shared`` for the rows stored before it. A binary disjoint-nonprivate (PATE) table
has no m and no teacher Δ; like a multi-class table (0005) its row stores ``m = 1``, ``teacher_delta = 0``
and ``epsilon`` = the per-answer ε (so m·ε is its per-answer cost); ``teachers`` tells it from a shared table
with those values, and is part of its id. The columns stay NOT NULL because SQLite can only relax them by
rebuilding ``gamma_tables``, which the rows of ``ledger_usage`` and ``spends`` reference and which cannot be
dropped inside the migration's transaction with foreign keys enforced.

Revision ID: 0006_table_teachers
Revises: 0005_multiclass_tables
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_table_teachers"
down_revision = "0005_multiclass_tables"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("gamma_tables", sa.Column("teachers", sa.String(32), nullable=False, server_default="shared"))
    op.execute("UPDATE gamma_tables SET teachers = 'disjoint-nonprivate' WHERE classes IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("gamma_tables") as batch:
        batch.drop_column("teachers")
