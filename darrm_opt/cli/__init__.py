"""The ``darrm-opt`` command line: thin Typer commands over the library, one module per command.

Help is plain click text (no boxes), wrapped to the terminal; a usage error is one line on stderr
(``error: …``, exit 2), like every domain error (:func:`darrm_opt.cli.common.handle_errors`)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from darrm_opt.cli.common import usage_error_line

#: the exceptions of the click that Typer uses (its own vendored copy in recent releases, click before)
_click_errors: Any = importlib.import_module(typer.BadParameter.__module__)
#: what an interrupted prompt raises (click's Abort, which typer re-exports; its own exceptions module may lack it)
_ABORTS: tuple[type[BaseException], ...] = tuple({getattr(_click_errors, "Abort", typer.Abort), typer.Abort})


class _OneLineErrors(TyperGroup):
    """The root group: click's usage errors (unknown option, bad value, missing option) as one line."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, windows_expand_args: bool = True,
             **extra: Any) -> Any:
        try:
            rv = super().main(args=args, prog_name=prog_name or "darrm-opt", complete_var=complete_var,
                              standalone_mode=False, windows_expand_args=windows_expand_args, **extra)
        except _click_errors.UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:  # `darrm-opt` alone: the help
                typer.echo(exc.ctx.get_help())
            else:
                typer.echo(usage_error_line(exc), err=True)
            code = 2
        except _click_errors.ClickException as exc:
            typer.echo(usage_error_line(exc), err=True)
            code = exc.exit_code
        except _ABORTS:
            typer.echo("aborted", err=True)
            code = 1
        else:
            if not standalone_mode:
                return rv
            code = rv if isinstance(rv, int) else 0
        if not standalone_mode:
            return code
        sys.exit(code)


app = typer.Typer(
    name="darrm-opt",
    cls=_OneLineErrors,
    help="Certified optimal DaRRM noise functions for private majority ensembling.\n\n"
         "Run `darrm-opt COMMAND --help` for a command's options and an example.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
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
    """Certified optimal DaRRM noise functions for private majority ensembling.

    Run `darrm-opt COMMAND --help` for a command's options and an example."""

#: Each command is the function of the same name in the module of the same name.
COMMANDS = ("solve", "verify", "aggregate", "grid", "compare", "plot", "budget", "demo", "serve", "plan", "gaussian",
            "label")

for _name in COMMANDS:
    app.command(_name)(getattr(importlib.import_module(f"{__name__}.{_name}"), _name))

#: command groups: the Typer app of the module of the same name
GROUPS = ("keys", "data_dependent")

for _name in GROUPS:
    app.add_typer(importlib.import_module(f"{__name__}.{_name}").app, name=_name.replace("_", "-"))


def main() -> None:
    app()
