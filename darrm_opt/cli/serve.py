"""``darrm-opt serve``: run the REST service (``darrm_opt.api.main:create_app``) under uvicorn."""

from __future__ import annotations

import os

import typer

from darrm_opt.cli.common import err_console


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="TCP port."),
    database_url: str | None = typer.Option(
        None,
        "--database-url",
        help="sqlite:///PATH (default sqlite:///darrm.db in the working directory, WAL) or "
        "postgresql://USER@HOST/DB (several servers can share one ledger). Default: $DARRM_DATABASE_URL.",
    ),
    workers: int = typer.Option(1, "--workers", min=1, help="Server processes."),
) -> None:
    """Serve certified γ tables, private majority answers and the privacy ledger over HTTP.

    Settings also come from DARRM_* environment variables (DARRM_API_KEYS: comma-separated bearer keys).
    The database schema is migrated before the server starts. Needs the service extra.

    \b
    Example:
      DARRM_API_KEYS=change-me darrm-opt serve --port 8000
    """
    from darrm_opt.cli.common import handle_errors
    from darrm_opt.extras import require

    with handle_errors():
        require("service", "darrm-opt serve")
    import uvicorn
    from sqlalchemy.exc import SQLAlchemyError

    from darrm_opt.api.settings import Settings
    from darrm_opt.ledger.db import Database, migrate

    if database_url:
        os.environ["DARRM_DATABASE_URL"] = database_url  # the workers read their settings from here
    try:
        settings = Settings()
        db = Database(settings.database_url, sqlite_synchronous=settings.sqlite_synchronous)
        try:
            migrate(db)
        finally:
            db.dispose()
    except (ValueError, SQLAlchemyError) as exc:
        err_console.print(f"[bold red]error:[/] cannot use the database: {exc}", soft_wrap=True)
        raise typer.Exit(2) from None
    if not settings.api_keys:
        err_console.print("warning: DARRM_API_KEYS is empty: every /v1 endpoint will answer 401")
    uvicorn.run("darrm_opt.api.main:create_app", factory=True, host=host, port=port, workers=workers)

