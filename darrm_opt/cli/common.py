"""Shared CLI plumbing: domain errors → exit codes, progress on stderr, atomic output files."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from darrm_opt.errors import DarrmError

err_console = Console(stderr=True, highlight=False)


@contextlib.contextmanager
def handle_errors():
    """Turn domain errors into one line on stderr and their exit code; Ctrl-C into exit 130."""
    try:
        yield
    except DarrmError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)  # messages may hold [ ]
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        err_console.print("interrupted: nothing was written")
        raise typer.Exit(130) from None


class ProgressReporter:
    """Receives optimiser events; shows a progress bar on stderr for sweeps of ≥ 10⁶ multisets."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._phase: str | None = None

    def phase(self, name: str) -> None:
        """A new phase of a command (its sweeps' bars are labelled with it; a plain line in logs)."""
        self._phase = name
        if not self.quiet and not err_console.is_terminal:
            err_console.print(f"{name} ...")

    def certify_progress(self, done: int, total: int, worst: float) -> None:
        """The ``progress`` callback of :func:`darrm_opt.certify.certificate.certify`."""
        self("certify-progress", done=done, total=total, worst=worst)

    def __call__(self, stage: str, **info) -> None:
        if self.quiet:
            return
        if stage in ("sweep-progress", "certify-progress") and info.get("total", 0) >= 1_000_000:
            label = self._phase or ("certifying" if stage == "certify-progress" else "sweeping")
            if not err_console.is_terminal:  # logs and pipes: one plain line per finished sweep
                if info["done"] >= info["total"]:
                    err_console.print(f"{label}: {info['total']:,} multisets swept, worst cost {info['worst']:.10g}",
                                      soft_wrap=True)
                return
            if self._progress is None:
                self._progress = Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    TextColumn("{task.completed:,.0f}/{task.total:,.0f} multisets"),
                    TextColumn("worst {task.fields[worst]:.6g}"),
                    TimeElapsedColumn(),
                    console=err_console,
                    transient=True,
                )
                self._progress.start()
            if self._task is None:
                self._task = self._progress.add_task(label, total=info["total"], worst=info["worst"])
            self._progress.update(self._task, description=label, completed=info["done"],
                                  total=info["total"], worst=info["worst"])
            if info["done"] >= info["total"]:
                self._progress.remove_task(self._task)
                self._task = None

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def write_output(text: str, out: Path | None) -> None:
    """Print to stdout, or write ``out`` atomically (a temp file renamed into place)."""
    if out is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    target = Path(out)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        with os.fdopen(fd, "w") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
        os.replace(tmp, target)
    except OSError as exc:
        from darrm_opt.errors import TableFileError

        raise TableFileError(f"cannot write output file {str(out)!r}: {exc.strerror or exc}") from None
