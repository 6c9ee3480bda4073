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
    """Recompute the privacy certificate of any γ table; exit 1 if it violates the bound, or if the file's
    ``privacy_profile`` (when present) is optimistic against the recomputed one."""
    from darrm_opt.certify.certificate import certify
    from darrm_opt.cli.render import certificate_line
    from darrm_opt.release.table_file import load_table, stored_profile

    with handle_errors():
        params, gamma = load_table(file)
        stored = stored_profile(file)
        reporter = ProgressReporter(quiet)
        executor = dask_executor(dask_scheduler)
        try:
            if stored is None:
                cert = certify(params, gamma, executor=executor,
                               progress=lambda d, t, w: reporter("certify-progress", done=d, total=t, worst=w))
                profile_ok = None
            else:
                cert, profile_ok = _check_profile(params, gamma, stored, executor, reporter)
        finally:
            reporter.close()
        doc = {**params.canonical(), "certificate": cert.to_dict()}
        if profile_ok is not None:
            doc["privacy_profile_valid"] = profile_ok
        if fmt is OutputFormat.json:
            write_output(json.dumps(doc, indent=2), None)
        else:
            write_output(certificate_line(cert), None)
        if profile_ok is False:
            err_console.print("[bold red]violation:[/] the stored privacy_profile is optimistic: it is below the "
                              "recomputed profile of this γ")
            raise typer.Exit(1)
        if not cert.certified:
            err_console.print(
                f"[bold red]violation:[/] multiset {cert.worst_multiset} of corners {cert.corners} "
                f"has privacy cost {cert.max_privacy_cost:.12g} > bound {cert.bound:.12g}"
            )
            raise typer.Exit(1)


def _check_profile(params, gamma, stored, executor, reporter):
    """(certificate, stored profile is valid): the stored profile must dominate the recomputed one with
    every hull edge confirmed (the true hull plus the safety margin), less that margin."""
    from darrm_opt.privacy.profile import FULL_ROUNDS, MARGIN, profile_and_certificate

    profile, cert = profile_and_certificate(params, gamma, executor=executor, progress=reporter,
                                            rounds=FULL_ROUNDS)
    return cert, stored.dominates(profile, tol=MARGIN)
