"""A table's prior is text of any length.

``gamma_tables.prior`` was VARCHAR(100): a ``counts:`` prior (the law of the count of 1-votes written out, up to
K + 1 items) does not fit, and PostgreSQL enforces the length. SQLite does not enforce a VARCHAR's length, so
there the column is left as it is: altering it means recreating ``gamma_tables``, whose rows other tables
reference (the ledger's foreign keys are on, and dropping the old table fails).

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
    if op.get_bind().dialect.name == "sqlite":
        return
    op.alter_column("gamma_tables", "prior", existing_type=sa.String(100), type_=sa.Text(), existing_nullable=False)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    op.alter_column("gamma_tables", "prior", existing_type=sa.Text(), type_=sa.String(100), existing_nullable=False)
