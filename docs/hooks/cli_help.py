"""MkDocs hook: the marker ``<!-- darrm-opt --help -->`` in a page becomes the ``--help`` of every command,
rendered now at 80 columns (so the reference can never drift from the code)."""

from __future__ import annotations

import os

MARKER = "<!-- darrm-opt --help -->"


def _reference() -> str:
    from typer.testing import CliRunner

    from darrm_opt.cli import COMMANDS, app

    parts = []
    for name in (None, *COMMANDS):
        args = [name, "--help"] if name else ["--help"]
        result = CliRunner().invoke(app, args, env={**os.environ, "COLUMNS": "80"}, prog_name="darrm-opt")
        if result.exit_code != 0:
            raise RuntimeError(f"darrm-opt {' '.join(args)} exited {result.exit_code}: {result.output}")
        title = f"darrm-opt {name}" if name else "darrm-opt"
        parts.append(f"### `{title}`\n\n```text\n{result.output.rstrip()}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, **kwargs) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, _reference())
