"""Tenants and their bearer keys: every key belongs to one tenant, whose ledgers it alone may use.

A *principal* is what a key grants: its tenant, and its scope, ``tenant`` (the tenant's own ledgers) or
``admin`` (an operator's: reads every tenant's ledgers and spend history, still spends only from its own
tenant's ledgers).

Keys come from two places, both checked on every request:

- the ``api_keys`` table: keys made by :func:`add_key` (``darrm-opt keys add``) are random, 256 bits
  (``darrm_`` + 43 URL-safe characters), shown once and stored only as their SHA-256 digest; revoked
  (:func:`revoke_key`) by setting ``revoked_at``. A server rereads the table every few seconds, so keys
  are added and revoked without a restart;
- the environment, ``DARRM_API_KEYS`` (and ``DARRM_ADMIN_KEYS`` for admin scope): comma-separated entries
  ``KEY`` or ``TENANT:KEY``; a key without a tenant belongs to the tenant :data:`DEFAULT_TENANT`.

A stored digest of a high-entropy key reveals nothing usable; an environment key of low entropy is as weak
as it is, digest or not.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update

from darrm_opt.errors import InvalidParameter

from .db import Database
from .schema import DEFAULT_TENANT, ApiKey, aware, utcnow

__all__ = ["DEFAULT_TENANT", "Principal", "add_key", "digest", "env_principals", "list_keys", "load_keys",
           "revoke_key"]

TENANT = "tenant"
ADMIN = "admin"
SCOPES = (TENANT, ADMIN)
#: a tenant's name: letters, digits, '.', '_', '-' (1 to 64); the part before ':' in an environment entry
TENANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
KEY_PREFIX = "darrm_"


@dataclass(frozen=True)
class Principal:
    """Who a request's key speaks for: a tenant, with admin scope or not; ``key_id`` names the key in logs."""

    tenant: str
    admin: bool = False
    key_id: str = ""


def digest(key: str | bytes) -> str:
    """SHA-256 (hex) of a key's text: what is stored and compared, never the key."""
    return hashlib.sha256(key.encode() if isinstance(key, str) else key).hexdigest()


def check_tenant(tenant: str) -> str:
    if not isinstance(tenant, str) or TENANT_PATTERN.fullmatch(tenant) is None:
        raise InvalidParameter("tenant", "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter "
                                         "or digit", tenant)
    return tenant


def env_principals(entries: list[str], *, admin: bool = False) -> dict[str, Principal]:
    """Digest → principal of environment entries ``KEY`` (tenant ``default``) or ``TENANT:KEY``.

    The text before the first ':' is a tenant when it is a valid tenant name and a key follows; otherwise
    the whole entry is the key (so a key that itself holds ':' must be written with its tenant)."""
    out: dict[str, Principal] = {}
    for entry in entries:
        head, sep, rest = entry.partition(":")
        tenant, key = (head, rest) if sep and rest and TENANT_PATTERN.fullmatch(head) else (DEFAULT_TENANT, entry)
        d = digest(key)
        out[d] = Principal(tenant, admin, "env:" + d[:8])
    return out


def load_keys(db: Database) -> dict[str, Principal]:
    """Digest → principal of every unrevoked key in ``api_keys``."""
    with db.read() as conn:
        rows = conn.execute(select(ApiKey.id, ApiKey.digest, ApiKey.tenant, ApiKey.scope)
                            .where(ApiKey.revoked_at.is_(None))).all()
    return {r.digest: Principal(r.tenant, r.scope == ADMIN, r.id) for r in rows}


def add_key(db: Database, tenant: str, *, scope: str = TENANT, name: str = "") -> tuple[str, str]:
    """Make a new random key for ``tenant``; (its id, the key). Only the digest is stored: the key is
    returned once and cannot be recovered."""
    check_tenant(tenant)
    if scope not in SCOPES:
        raise InvalidParameter("scope", f"must be one of {', '.join(SCOPES)}", scope)
    if len(name) > 200:
        raise InvalidParameter("name", "must be at most 200 characters", name)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    key_id = secrets.token_hex(6)
    with db.write() as conn:
        conn.execute(insert(ApiKey).values(id=key_id, digest=digest(key), tenant=tenant, scope=scope, name=name,
                                           created_at=utcnow(), revoked_at=None))
    return key_id, key


def revoke_key(db: Database, key_id: str) -> bool:
    """Revoke the key ``key_id``; False if there is no such unrevoked key."""
    with db.write() as conn:
        done = conn.execute(update(ApiKey).where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
                            .values(revoked_at=utcnow()))
    return bool(done.rowcount)


def list_keys(db: Database, *, tenant: str | None = None, revoked: bool = False) -> list[dict[str, Any]]:
    """The keys (never their text or digest), oldest first; ``revoked``: include revoked keys."""
    query = select(ApiKey.id, ApiKey.tenant, ApiKey.scope, ApiKey.name, ApiKey.created_at, ApiKey.revoked_at)
    if tenant is not None:
        query = query.where(ApiKey.tenant == tenant)
    if not revoked:
        query = query.where(ApiKey.revoked_at.is_(None))
    with db.read() as conn:
        rows = conn.execute(query.order_by(ApiKey.created_at, ApiKey.id)).all()
    return [{"id": r.id, "tenant": r.tenant, "scope": r.scope, "name": r.name,
             "created_at": aware(r.created_at).isoformat(),
             "revoked_at": None if r.revoked_at is None else aware(r.revoked_at).isoformat()} for r in rows]
