"""``darrm-opt verify``: recompute the certificate of any γ table file."""

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
    file: Path = typer.Argument(..., help="a γ table JSON file (K, m, epsilon, teacher_delta, delta, gamma; or a "
                                          "PATE table: teachers disjoint-nonprivate, K, epsilon, delta, gamma)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
    dask_scheduler: Optional[str] = typer.Option(None, "--dask-scheduler",
                                                 help="run sweeps on this Dask scheduler (tcp://HOST:PORT)"),
) -> None:
    """Recompute the privacy certificate of any γ table; exit 1 if it violates the bound, or if a statement of
    the file's privacy_profile (when present) is below the true privacy profile or cannot be proven.

    \b
    Example:
      darrm-opt solve --K 11 --m 3 --format json --out t11.json
      darrm-opt verify t11.json
    """
    from darrm_opt.mechanisms import mechanism_for
    from darrm_opt.release.table_file import load_any_table, stored_profile

    with handle_errors():
        params, gamma = load_any_table(file)
        stored = stored_profile(file)
        m = mechanism_for(params)
        reporter = ProgressReporter(quiet)
        executor = dask_executor(dask_scheduler)
        try:
            cert = m.certify(params, gamma, executor=executor,
                             progress=lambda d, t, w: reporter("certify-progress", done=d, total=t, worst=w))
            check = None if stored is None else m.check_profile(params, gamma, stored, cert, executor=executor)
        finally:
            reporter.close()
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
