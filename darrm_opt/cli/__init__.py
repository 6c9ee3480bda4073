"""The ``darrm-opt`` command line (thin Typer commands over the library)."""

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

#: Command modules; each exports ``register(app)``. A module that is absent is skipped.
COMMAND_MODULES = ("solve", "serve", "compare", "grid")

for _name in COMMAND_MODULES:
    try:
        _mod = importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _exc:  # a command module not written yet
        if _exc.name != f"{__name__}.{_name}":
            raise
        continue
    _mod.register(app)


def main() -> None:
    app()
