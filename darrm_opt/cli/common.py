"""Shared CLI plumbing: domain errors → exit codes, progress on stderr, atomic output files."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from darrm_opt.errors import DarrmError

err_console = Console(stderr=True, highlight=False)

#: set by Ctrl-C: Python raises KeyboardInterrupt wherever the main thread is, and one raised inside a
#: garbage-collector callback (a weakref's, a __del__) is printed and dropped; the flag keeps it, and the
#: next progress event and any output check it, so an interrupted command always stops and writes nothing
interrupted = threading.Event()


def _on_sigint(signum: int, frame: object) -> None:
    interrupted.set()
    raise KeyboardInterrupt


def _unraisable(args: object) -> None:
    """Python's hook for exceptions it cannot raise: a Ctrl-C dropped in a garbage-collector callback is
    kept by :data:`interrupted` and needs no traceback on stderr; anything else is reported as usual."""
    if isinstance(getattr(args, "exc_value", None), KeyboardInterrupt) and interrupted.is_set():
        return
    sys.__unraisablehook__(args)  # type: ignore[arg-type]


def check_interrupted() -> None:
    """KeyboardInterrupt if Ctrl-C was pressed (even if the first one was swallowed)."""
    if interrupted.is_set():
        raise KeyboardInterrupt


@contextlib.contextmanager
def handle_errors():
    """Turn domain errors into one line on stderr and their exit code; Ctrl-C into exit 130."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is \
            signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
        sys.unraisablehook = _unraisable
    try:
        yield
        check_interrupted()
    except DarrmError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)  # messages may hold [ ]
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        err_console.print("interrupted: nothing was written")
        raise typer.Exit(130) from None
    except MemoryError as exc:  # numpy's _ArrayMemoryError says how much it asked for
        detail = f" ({' '.join(str(exc).split())})" if str(exc) else ""
        err_console.print(f"[bold red]error:[/] not enough memory for this problem{escape(detail)}; choose a "
                          "smaller --K (the number of teachers)", soft_wrap=True)
        raise typer.Exit(2) from None


def usage_error_line(exc: Exception) -> str:
    """One line for a usage error of click (unknown option, bad value, missing option): the message and
    where to read on, ``error: … (see `darrm-opt solve --help`)``."""
    message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    return f"error: {message}{hint}"


class ProgressReporter:
    """Receives optimiser events and shows progress on stderr: on a terminal, a line per phase (pulsing, with
    its elapsed time and latest event) and a bar per sweep of ≥ 10⁶ multisets; in logs and pipes, plain
    lines: one when a phase starts, one per finished sweep, one per round of the privacy profile."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._phase_task: TaskID | None = None
        self._phase: str | None = None
        self._sweeps: str | None = None

    def phase(self, name: str, sweeps: str | None = None) -> None:
        """A new phase of a command (a plain line in logs); its sweeps are labelled ``sweeps``, else ``name``."""
        check_interrupted()
        self._phase, self._sweeps = name, sweeps
        if self.quiet:
            return
        if not err_console.is_terminal:
            err_console.print(f"{name} ...", soft_wrap=True)
            return
        bar = self._bar()
        if self._phase_task is None:
            self._phase_task = bar.add_task(name, total=None, info="")
        else:
            bar.reset(self._phase_task, description=name, total=None, info="")

    def certify_progress(self, done: int, total: int, worst: float) -> None:
        """The ``progress`` callback of :func:`darrm_opt.certify.certificate.certify`."""
        self("certify-progress", done=done, total=total, worst=worst)

    def __call__(self, stage: str, **info) -> None:
        check_interrupted()
        if self.quiet:
            return
        if stage in ("sweep-progress", "certify-progress"):
            if info.get("total", 0) >= 1_000_000:
                self._sweep(stage, info)
        elif stage in ("lp", "profile"):
            note = (f"{info['sweeps']} sweeps" if stage == "profile" else
                    f"LP {info['iteration']}, {info['active']:,} rows")
            if not err_console.is_terminal:
                if stage == "profile":
                    err_console.print(f"{self._phase or 'privacy profile'}: {note}", soft_wrap=True)
            elif self._phase_task is not None:
                self._bar().update(self._phase_task, info=note)

    def _sweep(self, stage: str, info: dict) -> None:
        label = self._sweeps or self._phase or ("certifying" if stage == "certify-progress" else "sweeping")
        done, total, worst = info["done"], info["total"], info["worst"]
        if not err_console.is_terminal:  # logs and pipes: one plain line per finished sweep
            if done >= total:
                err_console.print(f"{label}: {total:,} multisets swept, worst cost {worst:.10g}", soft_wrap=True)
            return
        bar = self._bar()
        text = f"{done:,.0f}/{total:,.0f} multisets, worst {worst:.6g}"
        if self._task is None:
            self._task = bar.add_task(label, total=total, info=text)
        bar.update(self._task, description=label, completed=done, total=total, info=text)
        if done >= total:
            bar.remove_task(self._task)
            self._task = None

    def _bar(self) -> Progress:
        if self._progress is None:
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                                      TimeElapsedColumn(), console=err_console, transient=True)
            self._progress.start()
        return self._progress

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self._task = self._phase_task = None


class JobProgress(ProgressReporter):
    """A job's steps (``plan_job``'s and ``label``'s events): a phase per mechanism's offer as it is searched
    (``plan: KIND (i/n)``), a line per offer made, and the solves' sweeps as ``solve`` shows them."""

    def __call__(self, stage: str, **info) -> None:
        if self.quiet or stage not in ("kind", "offer"):
            return super().__call__(stage, **info)
        if stage == "kind":
            self.phase(f"plan: {info['kind']} ({info['index']}/{info['total']})")
        else:
            self.line(f"plan: {info['kind']} offers E[error] {info['expected_error']:.4g}")

    def line(self, text: str) -> None:
        """One line on stderr, above the bars."""
        check_interrupted()
        if not self.quiet:
            (self._progress.console if self._progress is not None else err_console).print(
                text, markup=False, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def working(label: str, quiet: bool = False):
    """Progress for a command whose steps report nothing themselves: on a terminal a spinner with the elapsed
    time on stderr, in logs and pipes one plain line when it starts."""
    if quiet:
        yield
        return
    if not err_console.is_terminal:
        err_console.print(f"{label} ...", soft_wrap=True)
        yield
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=err_console,
                  transient=True) as bar:
        bar.add_task(label, total=None)
        yield


def write_output(text: str, out: Path | None) -> None:
    """Print to stdout, or write ``out`` atomically (a temp file renamed into place); nothing after Ctrl-C."""
    check_interrupted()
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
