"""``darrm-opt verify``: recompute the certificate of any γ table file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import (
    ProgressReporter,
    err_console,
    handle_errors,
    write_output,
)
from darrm_opt.cli.options import OutputFormat, dask_executor


def verify(
    file: Path = typer.Argument(..., help="a γ table JSON file (K, m, epsilon, teacher_delta, delta, gamma)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    quiet: bool = typer.Option(False, "--quiet", "-q"),
    dask_scheduler: Optional[str] = typer.Option(None, "--dask-scheduler"),
) -> None:
    """Recompute the privacy certificate of any γ table; exit 1 if it violates the bound."""
    from darrm_opt.certify.certificate import certify
    from darrm_opt.cli.render import certificate_line
    from darrm_opt.release.table_file import load_table

    with handle_errors():
        params, gamma = load_table(file)
        reporter = ProgressReporter(quiet)
        try:
            cert = certify(params, gamma, executor=dask_executor(dask_scheduler),
                           progress=lambda d, t, w: reporter("certify-progress", done=d, total=t, worst=w))
        finally:
            reporter.close()
        if fmt is OutputFormat.json:
            write_output(json.dumps({**params.canonical(), "certificate": cert.to_dict()}, indent=2), None)
        else:
            write_output(certificate_line(cert), None)
        if not cert.certified:
            err_console.print(
                f"[bold red]violation:[/] multiset {cert.worst_multiset} of corners {cert.corners} "
                f"has privacy cost {cert.max_privacy_cost:.12g} > bound {cert.bound:.12g}"
            )
            raise typer.Exit(1)
