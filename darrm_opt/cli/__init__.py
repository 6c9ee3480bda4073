"""The ``darrm-opt`` command line: thin Typer commands over the library, one module per command."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="darrm-opt",
    help="Certified optimal DaRRM noise functions for private majority ensembling.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        import darrm_opt

        typer.echo(f"darrm-opt {darrm_opt.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Certified optimal DaRRM noise functions for private majority ensembling."""

#: Each command is the function of the same name in the module of the same name.
COMMANDS = ("solve", "verify", "aggregate", "grid", "compare", "plot", "budget", "demo", "serve", "plan", "gaussian")

for _name in COMMANDS:
    app.command(_name)(getattr(importlib.import_module(f"{__name__}.{_name}"), _name))


def main() -> None:
    app()
