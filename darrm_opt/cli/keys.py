"""``darrm-opt keys add|list|revoke``: the service's bearer keys in its database (see docs/tenancy.md).

Keys are stored as SHA-256 digests; ``add`` prints the new key once (the only time it exists outside the
client that keeps it). Running servers reread the keys every ``DARRM_KEY_REFRESH_S`` seconds (2 s), so a key
works, or stops working, without a restart. The database is migrated first if it needs to be.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from darrm_opt.cli.common import err_console, handle_errors

T = TypeVar("T")

app = typer.Typer(name="keys", help="Add, list and revoke the service's API keys (tenants, admin scope).",
                  no_args_is_help=True, add_completion=False)

_DB = typer.Option(None, "--database-url", help="The service's database (default: $DARRM_DATABASE_URL, else "
                                                "sqlite:///darrm.db).")
_FORMAT = typer.Option("text", "--format", help="text | json")


def _on_database(url: str | None, work: Callable[[Any], T]) -> T:
    """``work(db)`` on the migrated key database (``--database-url``, else DARRM_DATABASE_URL, else the
    default), disposed of afterwards; exit 2 with one line when the database cannot be used."""
    db = _database(url)
    try:
        return work(db)
    finally:
        db.dispose()


def _database(url: str | None):  # noqa: ANN202
    import os

    from darrm_opt.extras import require

    require("service", "darrm-opt keys")
    from sqlalchemy.exc import SQLAlchemyError

    from darrm_opt.ledger.db import DEFAULT_URL, Database, migrate

    try:
        db = Database(url or os.environ.get("DARRM_DATABASE_URL") or DEFAULT_URL)
        migrate(db)
    except (ValueError, SQLAlchemyError) as exc:
        err_console.print(f"[bold red]error:[/] cannot use the database: {exc}", soft_wrap=True)
        raise typer.Exit(2) from None
    return db


def _check_format(fmt: str) -> None:
    if fmt not in ("text", "json"):
        err_console.print(f"[bold red]error:[/] --format must be text or json (got {fmt!r})")
        raise typer.Exit(2)


@app.command("add")
def add(
    tenant: str = typer.Option(..., "--tenant", help="The tenant the key speaks for (letters, digits, . _ -)."),
    admin: bool = typer.Option(False, "--admin", help="Admin scope: also reads every tenant's ledgers."),
    name: str = typer.Option("", "--name", help="A note to tell keys apart (e.g. who holds it)."),
    database_url: str | None = _DB,
    fmt: str = _FORMAT,
) -> None:
    """Make a new random key for TENANT and print it (once: only its digest is stored)."""
    _check_format(fmt)
    from darrm_opt.ledger.keys import ADMIN, TENANT, add_key

    with handle_errors():
        key_id, key = _on_database(database_url, lambda db: add_key(db, tenant, scope=ADMIN if admin else TENANT,
                                                                     name=name))
    if fmt == "json":
        typer.echo(json.dumps({"id": key_id, "tenant": tenant, "scope": ADMIN if admin else TENANT, "key": key}))
    else:
        typer.echo(key)
        err_console.print(f"key {key_id} for tenant {tenant}{' (admin)' if admin else ''}: keep it now, it is "
                          "not stored and cannot be shown again")


@app.command("list")
def list_(
    tenant: str | None = typer.Option(None, "--tenant", help="Only this tenant's keys."),
    revoked: bool = typer.Option(False, "--revoked", help="Include revoked keys."),
    database_url: str | None = _DB,
    fmt: str = _FORMAT,
) -> None:
    """The keys (id, tenant, scope, name, when made, when revoked); never the keys themselves."""
    _check_format(fmt)
    from darrm_opt.ledger.keys import list_keys

    with handle_errors():
        keys = _on_database(database_url, lambda db: list_keys(db, tenant=tenant, revoked=revoked))
    if fmt == "json":
        typer.echo(json.dumps(keys))
        return
    for k in keys:
        state = f"revoked {k['revoked_at']}" if k["revoked_at"] else "active"
        typer.echo(f"{k['id']}  {k['tenant']}  {k['scope']}  {state}  {k['created_at']}  {k['name']}")


@app.command("revoke")
def revoke(
    key_id: str = typer.Argument(..., help="The key's id (from `keys add` or `keys list`)."),
    database_url: str | None = _DB,
) -> None:
    """Revoke a key: servers refuse it within DARRM_KEY_REFRESH_S seconds. Exit 1 if no such active key."""
    from darrm_opt.ledger.keys import revoke_key

    with handle_errors():
        done = _on_database(database_url, lambda db: revoke_key(db, key_id))
    if not done:
        err_console.print(f"[bold red]error:[/] no active key with id {key_id!r}")
        raise typer.Exit(1)
    typer.echo(f"revoked {key_id}")
