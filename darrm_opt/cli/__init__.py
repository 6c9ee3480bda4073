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
)

#: Each command is the function of the same name in the module of the same name.
COMMANDS = ("solve", "verify", "grid", "compare", "plot", "budget", "demo", "serve")

for _name in COMMANDS:
    app.command(_name)(getattr(importlib.import_module(f"{__name__}.{_name}"), _name))


def main() -> None:
    app()
