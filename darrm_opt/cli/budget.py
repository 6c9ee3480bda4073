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
    out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
) -> None:
    """Total privacy loss over Q queries: of a generic per-query (ε, δ) (--per-query: simple, general and
    the best, Table 2), or of a table's own answers (--table, any kind of table file: exact composition of
    its privacy profile against basic, general and optimal composition of its per-answer (ε, δ), at
    --delta-total).

    \b
    Examples:
      darrm-opt budget --per-query 0.2676,3e-4 --queries 20,50,100
      darrm-opt budget --table t11.json --queries 20,50,100
    """
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
    """Rows of :func:`darrm_opt.privacy.budget.table_budget_rows` for the table in ``table`` (a file of any
    kind) at δ_total (or, without it, at 1 − (1 − δ₀)^Q (1 − δ′) for each Q); the table is certified again
    and its profile recomputed from γ (a stored one is not trusted): CertificationFailed, exit 1, when it is
    not DP for the parameters it states."""
    from darrm_opt.mechanisms import mechanism
    from darrm_opt.privacy.budget import table_budget_rows
    from darrm_opt.release.table_file import load_certified

    reporter = ProgressReporter(quiet)
    try:
        certified = load_certified(table, progress=reporter)
    finally:
        reporter.close()
    assert certified.profile is not None  # load_certified computes it
    kind = mechanism(certified.kind)
    rows = table_budget_rows(certified.epsilon0, certified.delta0, certified.profile, queries, delta_total,
                             delta_prime, units=lambda q: kind.units(certified.params, q))
    if fmt is OutputFormat.json:
        return json.dumps(rows, indent=2)
    from darrm_opt.cli.render import render_table_budget

    return render_table_budget(rows, mechanism(certified.kind).describe(certified.params))
