"""A table's prior is text of any length.

``gamma_tables.prior`` was VARCHAR(100): a ``counts:`` prior (the law of the count of 1-votes written out, up to
K + 1 items) does not fit, and PostgreSQL enforces the length.

Revision ID: 0015_prior_text
Revises: 0014_record_answers
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_prior_text"
down_revision = "0014_record_answers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gamma_tables") as batch:
        batch.alter_column("prior", existing_type=sa.String(100), type_=sa.Text(), existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("gamma_tables") as batch:
        batch.alter_column("prior", existing_type=sa.Text(), type_=sa.String(100), existing_nullable=False)
