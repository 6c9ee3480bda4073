"""Tenants: every ledger belongs to one, and the service's bearer keys are stored hashed with theirs.

- ``ledgers.tenant``: the tenant that owns the ledger; only that tenant's keys spend from it, read it, its
  spend history or its idempotency records (others are told it does not exist). Ledgers made before this
  revision belong to the tenant ``default``, which is also the tenant of a ``DARRM_API_KEYS`` key given
  without one, so a service upgraded with its keys unchanged keeps serving its ledgers.
- ``api_keys``: bearer keys by SHA-256 digest (the key text is never stored), each with its tenant, its scope
  (``tenant`` or ``admin``), a name, and when it was revoked. ``darrm-opt keys add|list|revoke`` edits it;
  running servers reread it every few seconds (``DARRM_KEY_REFRESH_S``).

Revision ID: 0008_tenants
Revises: 0007_table_content_ids
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_tenants"
down_revision = "0007_table_content_ids"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ledgers", sa.Column("tenant", sa.String(64), nullable=False, server_default="default"))
    op.create_index("ix_ledgers_tenant_created", "ledgers", ["tenant", "created_at", "id"])
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant"])


def downgrade() -> None:
    op.drop_index("ix_api_keys_tenant", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_index("ix_ledgers_tenant_created", table_name="ledgers")
    with op.batch_alter_table("ledgers") as batch:
        batch.drop_column("tenant")
