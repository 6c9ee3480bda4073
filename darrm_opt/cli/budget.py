"""``darrm-opt budget``: total privacy loss of Q answers under each composition rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import ProgressReporter, handle_errors, write_output
from darrm_opt.cli.options import OutputFormat, int_list, number_pair


def budget(
    per_query: Optional[str] = typer.Option(None, "--per-query", help="per-query EPS,DELTA"),
    table: Optional[Path] = typer.Option(None, "--table", help="a γ table JSON file of any kind: shared-data, "
                                         "PATE-setting or multi-class (exact accounting)"),
    queries: str = typer.Option("20,50,100", "--queries", help="numbers of queries Q"),
    delta_prime: float = typer.Option(
        1e-4, "--delta-prime", help="δ′ of general composition (with --table: δ_total = 1 − (1 − δ)^Q (1 − δ′))"),
    delta_total: Optional[float] = typer.Option(None, "--delta-total", help="total δ target (--table)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    out: Optional[Path] = typer.Option(None, "--out"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
) -> None:
    """Total privacy loss over Q queries: of a generic per-query (ε, δ) (--per-query: simple, general and
    the best, Table 2), or of a table's own answers (--table, any kind of table file: exact composition of
    its privacy profile against basic, general and optimal composition of its per-answer (ε, δ), at
    --delta-total)."""
    from darrm_opt.errors import InvalidParameter

    with handle_errors():
        if (per_query is None) == (table is None):
            raise InvalidParameter("per-query", "give exactly one of --per-query EPS,DELTA and --table FILE")
        qs = int_list(queries, "queries")
        if table is not None:
            text = _table_budget(table, qs, delta_total, delta_prime, fmt, quiet)
        else:
            from darrm_opt.cli.render import render_budget
            from darrm_opt.experiments.compare import budget_rows

            eps, dlt = number_pair(per_query, "per-query")  # type: ignore[arg-type]
            rows = budget_rows(eps, dlt, qs, delta_prime)
            text = (json.dumps(rows, indent=2) if fmt is OutputFormat.json
                    else render_budget(rows, eps, dlt, delta_prime))
        write_output(text, out)


def _table_budget(table: Path, queries: list[int], delta_total: float | None, delta_prime: float,
                  fmt: OutputFormat, quiet: bool) -> str:
    """Rows of :func:`darrm_opt.privacy.budget.table_budget_rows` for the table in ``table`` (a shared-data,
    PATE-setting or multi-class table file) at δ_total (or, without it, at 1 − (1 − δ₀)^Q (1 − δ′) for each
    Q); the profile is recomputed from γ (a stored one is not trusted) and the table must certify."""
    from darrm_opt.privacy.budget import table_budget_rows
    from darrm_opt.release.table_file import load_any_table

    params, gamma = load_any_table(table)
    profile = _certified_profile(table, params, gamma, quiet)
    rows = table_budget_rows(params, profile, queries, delta_total, delta_prime)
    if fmt is OutputFormat.json:
        return json.dumps(rows, indent=2)
    from darrm_opt.cli.render import render_table_budget

    return render_table_budget(rows, params)


def _certified_profile(table: Path, params, gamma, quiet: bool):  # noqa: ANN001
    """The privacy profile of a table of any kind, after its certificate (CertificationFailed, exit 1, when
    the table is not DP for the parameters it states): the sweep and hull search of a shared-data table, the
    exact pair profile of a PATE-setting or multi-class one."""
    from darrm_opt.errors import CertificationFailed
    from darrm_opt.model.multiclass import MulticlassParams
    from darrm_opt.model.neighbours import PateParams

    if isinstance(params, PateParams):
        from darrm_opt.certify.pairs import certify_pairs
        from darrm_opt.privacy.pair_profile import pate_profile

        pc = certify_pairs(params, gamma)
        if not pc.certified:
            raise CertificationFailed(f"the table in {str(table)!r} is not (ε, δ)-DP per answer: {pc.reason}", pc)
        return pate_profile(params, gamma)
    if isinstance(params, MulticlassParams):
        from darrm_opt.certify.multiclass import certify_multiclass
        from darrm_opt.privacy.pair_profile import multiclass_profile

        mc = certify_multiclass(params, gamma)
        if not mc.certified:
            raise CertificationFailed(f"the table in {str(table)!r} is not (ε, δ)-DP per answer: {mc.reason}", mc)
        return multiclass_profile(params, gamma)
    from darrm_opt.privacy.profile import profile_and_certificate

    reporter = ProgressReporter(quiet)
    try:
        profile, cert = profile_and_certificate(params, gamma, progress=reporter)
    finally:
        reporter.close()
    if not cert.certified:
        raise CertificationFailed(f"the table in {str(table)!r} is not (mε, δ)-DP: {cert.reason}", cert)
    return profile
