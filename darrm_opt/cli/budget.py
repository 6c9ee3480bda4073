"""``darrm-opt budget``: total privacy loss of Q answers under each composition rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import handle_errors, write_output
from darrm_opt.cli.options import OutputFormat, int_list, number_pair


def budget(
    per_query: str = typer.Option(..., "--per-query", help="per-query EPS,DELTA"),
    queries: str = typer.Option("20,50,100", "--queries", help="numbers of queries Q"),
    delta_prime: float = typer.Option(1e-4, "--delta-prime", help="δ′ of general composition"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    out: Optional[Path] = typer.Option(None, "--out"),
) -> None:
    """Total privacy loss over Q queries: simple (Thm 2.2), general (Thm 2.3) and the best (Table 2)."""
    from darrm_opt.cli.render import render_budget
    from darrm_opt.experiments.compare import budget_rows

    with handle_errors():
        eps, dlt = number_pair(per_query, "per-query")
        rows = budget_rows(eps, dlt, int_list(queries, "queries"), delta_prime)
        text = json.dumps(rows, indent=2) if fmt is OutputFormat.json else render_budget(rows, eps, dlt, delta_prime)
        write_output(text, out)
