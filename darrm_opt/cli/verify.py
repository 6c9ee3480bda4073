"""``darrm-opt verify``: recompute the certificate of a table file and accept the file only as darrm-opt writes it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape

from darrm_opt.cli.common import (
    ProgressReporter,
    err_console,
    handle_errors,
    write_output,
)
from darrm_opt.cli.options import OutputFormat, dask_executor

if TYPE_CHECKING:  # pragma: no cover
    from darrm_opt.privacy.statements import ProfileCheck


def verify(
    file: Path = typer.Argument(..., help="a table file darrm-opt wrote (solve, plan or gaussian --format json, "
                                          "or the library's table document)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
    dask_scheduler: Optional[str] = typer.Option(None, "--dask-scheduler",
                                                 help="run sweeps on this Dask scheduler (tcp://HOST:PORT)"),
) -> None:
    """Recompute the privacy certificate of a table file darrm-opt wrote; exit 1 if it violates the bound, if a
    statement of its privacy_profile is below the true privacy profile or cannot be proven, or if any value
    it states differs from the one recomputed for its table (its certificate, id, expected error, kind, the ε
    its planned answers spend, ...); exit 2 if it lacks a field darrm-opt writes, has one it does not write,
    or states an unknown schema_version. A file is accepted only as darrm-opt writes it.

    \b
    Example:
      darrm-opt solve --K 11 --m 3 --format json --out t11.json
      darrm-opt verify t11.json
    """
    from darrm_opt.release.verify import verify_file

    with handle_errors():
        reporter = ProgressReporter(quiet)
        executor = dask_executor(dask_scheduler)
        try:
            result = verify_file(file, executor=executor,
                                 progress=lambda d, t, w: reporter("certify-progress", done=d, total=t, worst=w))
        finally:
            reporter.close()
        m, params, gamma, cert, check = (result.mechanism, result.params, result.gamma, result.certificate,
                                         result.profile_check)
        line = m.verdict_line(params, cert)
        if check is not None:
            line += f"\nstored privacy profile: {'valid' if check.valid else 'NOT PROVEN'}"
        _report(params, cert, check, fmt, line, lambda: m.failure(params, gamma, cert))


def _report(params, cert, check: ProfileCheck | None, fmt: OutputFormat, line: str,  # noqa: ANN001
            failure: Callable[[], str]) -> None:
    """What every kind of table's verification prints: the certificate (JSON, or ``line``) with the stored
    profile's verdict; exit 1 when a statement of the stored profile is proven false or cannot be proven, or
    the table is not certified (``failure()`` on stderr, computed only then)."""
    doc = {**params.canonical(), "certificate": cert.to_dict()}
    if check is not None:
        doc["privacy_profile_valid"] = check.valid
        doc["privacy_profile_check"] = check.to_dict()
    write_output(json.dumps(doc, indent=2) if fmt is OutputFormat.json else line, None)
    if check is not None and not check.valid:
        head = "violation" if check.verdict == "optimistic" else "not certified"
        err_console.print(f"[bold red]{head}:[/] {escape(check.message())}", soft_wrap=True)
        raise typer.Exit(1)
    if not cert.certified:
        err_console.print(failure(), soft_wrap=True)
        raise typer.Exit(1)
