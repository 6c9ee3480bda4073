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

    Settings also come from DARRM_* environment variables (DARRM_API_KEYS: comma-separated bearer keys, KEY or
    TENANT:KEY); keys can also be kept in the database with `darrm-opt keys add` (docs/tenancy.md).
    The database schema is migrated before the server starts: a database that cannot be used exits with
    status 2, a server process that fails to start with status 3. Needs the service extra.

    \b
    Example:
      DARRM_API_KEYS=change-me darrm-opt serve --port 8000
    """
    from darrm_opt.cli.common import handle_errors
    from darrm_opt.extras import require

    with handle_errors():
        require("service", "darrm-opt serve")
    from sqlalchemy.exc import SQLAlchemyError

    from darrm_opt.api.settings import Settings
    from darrm_opt.ledger.db import Database, migrate

    if database_url:
        os.environ["DARRM_DATABASE_URL"] = database_url  # the workers read their settings from here
    try:
        settings = Settings()
    except ValueError as exc:  # pydantic's ValidationError names the setting and its rule
        err_console.print(f"[bold red]error:[/] invalid DARRM_ setting: {exc}", soft_wrap=True)
        raise typer.Exit(2) from None
    try:
        db = Database(settings.database_url, sqlite_synchronous=settings.sqlite_synchronous)
        try:
            migrate(db)
        finally:
            db.dispose()
    except (ValueError, SQLAlchemyError) as exc:
        err_console.print(f"[bold red]error:[/] cannot use the database: {exc}", soft_wrap=True)
        raise typer.Exit(2) from None
    if not settings.api_keys and not settings.admin_keys:
        err_console.print("note: DARRM_API_KEYS is empty: /v1 takes only the keys made with `darrm-opt keys add` "
                          "(none: every /v1 endpoint answers 401)")
    if not _run(host, port, workers):
        err_console.print("[bold red]error:[/] the server did not start (its log above says why)", soft_wrap=True)
        raise typer.Exit(3)


def _run(host: str, port: int, workers: int) -> bool:
    """Run the service until it stops; False when a server process failed to start.

    ``uvicorn.run`` with several workers returns normally when its workers fail to start (the supervisor
    stops them all and exits 0), so the supervisor is run here and its workers' exit statuses read."""
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    from darrm_opt.api.protocol import HeaderTimeoutProtocol

    config = uvicorn.Config("darrm_opt.api.main:create_app", factory=True, host=host, port=port, workers=workers,
                            http=HeaderTimeoutProtocol)
    if workers == 1:
        server = uvicorn.Server(config)
        try:
            server.run()
        except SystemExit as exc:  # uvicorn exits on a failed start (lifespan, bind)
            return exc.code in (0, None)
        except KeyboardInterrupt:  # uvicorn raises the signal again once it has shut down
            pass
        return server.started
    supervisor = Multiprocess(config, sockets=[config.bind_socket()])
    supervisor.run()
    return not any(p.exitcode == STARTUP_FAILURE for p in supervisor.processes)

