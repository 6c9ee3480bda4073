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
    quiet: bool = typer.Option(False, "--quiet", "-q"),
    dask_scheduler: Optional[str] = typer.Option(None, "--dask-scheduler"),
) -> None:
    """Recompute the privacy certificate of any γ table; exit 1 if it violates the bound, or if a statement of
    the file's ``privacy_profile`` (when present) is below the true privacy profile or cannot be proven."""
    from darrm_opt.model.neighbours import PateParams
    from darrm_opt.model.params import Params
    from darrm_opt.release.table_file import load_any_table, stored_profile

    with handle_errors():
        params, gamma = load_any_table(file)
        stored = stored_profile(file)
        if isinstance(params, PateParams):
            _verify_pate(params, gamma, stored, fmt)
        elif isinstance(params, Params):
            _verify_shared(params, gamma, stored, fmt, quiet, dask_scheduler)
        else:
            _verify_multiclass(params, gamma, stored, fmt)


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


def _verify_shared(params, gamma, stored, fmt: OutputFormat, quiet: bool,  # noqa: ANN001
                   dask_scheduler: str | None) -> None:
    """``verify`` of a shared-data table: the exhaustive sweep, and each statement of the stored profile (if
    any) proven against the true profile (darrm_opt.privacy.statements)."""
    from darrm_opt.certify.certificate import certify
    from darrm_opt.cli.render import certificate_line
    from darrm_opt.privacy.statements import check_shared_profile

    reporter = ProgressReporter(quiet)
    executor = dask_executor(dask_scheduler)
    try:
        cert = certify(params, gamma, executor=executor,
                       progress=lambda d, t, w: reporter("certify-progress", done=d, total=t, worst=w))
        check = None if stored is None else check_shared_profile(params, gamma, stored, cert, executor=executor)
    finally:
        reporter.close()

    def failure() -> str:
        note = tight_note(params, gamma, cert)
        return (f"[bold red]not certified:[/] {note}" if note else
                f"[bold red]violation:[/] multiset {cert.worst_multiset} of corners {cert.corners} "
                f"has privacy cost {cert.max_privacy_cost:.12g} > bound {cert.bound:.12g}")

    _report(params, cert, check, fmt, certificate_line(cert), failure)


def _verify_multiclass(params, gamma, stored, fmt: OutputFormat) -> None:  # noqa: ANN001
    """``verify`` of a multi-class table: every neighbouring histogram type, and each statement of the stored
    profile (if any) proven in exact arithmetic."""
    from darrm_opt.certify.multiclass import certify_multiclass  # scipy.stats: only for multi-class tables
    from darrm_opt.privacy.pair_profile import multiclass_profile_check

    cert = certify_multiclass(params, gamma)
    check = None if stored is None else multiclass_profile_check(params, gamma, stored)
    head = f"multi-class table, K={params.K}, C={params.C}, per-answer (ε, δ) = ({params.epsilon:g}, " \
           f"{params.delta:g})"
    line = (f"CERTIFIED: {head}; max divergence {cert.max_hockey_stick:.12g} <= δ over "
            f"{cert.types_checked} ordered histogram types ({cert.exact_checked} re-checked exactly)"
            if cert.certified else f"NOT CERTIFIED: {head}: {cert.reason}")
    _report(params, cert, check, fmt, line,
            lambda: f"[bold red]violation:[/] {cert.reason} (max divergence {cert.max_hockey_stick:.12g} > "
                    f"δ = {params.delta:.12g})")


SHRINK = 1e-12


def tight_note(params, gamma, cert) -> str | None:  # noqa: ANN001
    """A plain explanation when the rejected table's worst multiset is an undecided tie: its excess interval
    still straddles 0 at the last precision of the interval re-check (certify/exact.py), as for exactly
    tight tables (γ_DSub; γ ≡ 1 at K = 3, m = 2). Equality cannot be proven in interval arithmetic, so the
    table is not accepted; says whether γ·(1 − 1e-12) certifies (checked here)."""
    import mpmath
    import numpy as np

    from darrm_opt.certify.certificate import certify, is_symmetric
    from darrm_opt.certify.exact import decide

    g = np.asarray(gamma, dtype=np.float64)
    if not cert.worst_multiset:
        return None
    d = decide(params, g, cert.worst_multiset, not is_symmetric(g))
    if d.verdict != "undecided":
        return None
    shrunk = certify(params, g * (1.0 - SHRINK))
    if shrunk.certified:
        fix = (f"the table scaled by (1 - {SHRINK:g}) certifies "
               f"(bound - max cost = {shrunk.bound - shrunk.max_privacy_cost:.3g})")
    else:
        fix = f"scaling it by (1 - {SHRINK:g}) does not certify either"
    return (f"the table meets the bound with equality to {d.digits} digits at multiset {cert.worst_multiset} "
            f"(interval arithmetic at {d.digits} digits puts (cost - bound)/2 in [{mpmath.nstr(d.lo, 3)}, "
            f"{mpmath.nstr(d.hi, 3)}], bound {cert.bound:.12g}); whether it exceeds the bound cannot be proven, "
            f"so the verifier does not accept it; {fix}.")


def _verify_pate(params, gamma, stored, fmt: OutputFormat) -> None:  # noqa: ANN001
    """``verify`` of a PATE-setting table: every (l, l ± 1, output) row, and each statement of the stored profile
    (if any) proven in exact arithmetic; exit 1 on a violation, as for shared-data tables."""
    from darrm_opt.certify.pairs import certify_pairs
    from darrm_opt.privacy.pair_profile import pate_profile_check

    cert = certify_pairs(params, gamma)
    check = None if stored is None else pate_profile_check(params, gamma, stored)
    verdict = "CERTIFIED" if cert.certified else "NOT CERTIFIED"
    line = (f"certificate: {verdict}: max privacy cost {cert.max_privacy_cost:.12g} vs bound {cert.bound:.12g} "
            f"over all {cert.pairs_checked} (l, l ± 1, output) rows of the PATE setting "
            f"({cert.high_precision_checked} re-checked in interval arithmetic, 40 to 320 digits)"
            + ("" if check is None else f"; stored privacy profile {'valid' if check.valid else 'NOT PROVEN'}"))
    _report(params, cert, check, fmt, line, lambda: f"[bold red]violation:[/] {cert.reason}")
