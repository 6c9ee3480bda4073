"""``darrm-opt compare``: expected error of γ_opt against the baselines and GNMax, per m."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import handle_errors, write_output
from darrm_opt.cli.options import OutputFormat, Teachers, float_list


def comparison_rows(K, m, epsilon, teacher_delta, delta, prior, actual, solver, teachers="shared"):
    """Parse the shared ``compare``/``plot`` options and compute one comparison row per m."""
    from darrm_opt.experiments.compare import compare as compare_rows
    from darrm_opt.experiments.compare import parse_actual

    return compare_rows(K, float_list(m, "m"), epsilon=epsilon, teacher_delta=teacher_delta, delta=delta,
                        prior=prior, actual=parse_actual(actual), solver=solver,
                        teachers=getattr(teachers, "value", teachers))


def compare(
    K: int = typer.Option(11, "--K", "-K", help="number of teachers (odd)"),
    m: str = typer.Option("1,3,5,7", "--m", help="privacy allowances, comma-separated"),
    epsilon: float = typer.Option(0.1, "--epsilon", help="each teacher's ε"),
    teacher_delta: float = typer.Option(1e-5, "--teacher-delta", help="each teacher's Δ"),
    delta: Optional[float] = typer.Option(None, "--delta", help="target δ (default 1 − (1 − Δ)^m)"),
    prior: str = typer.Option("paper", "--prior", help="prior γ_opt is optimised for"),
    actual: str = typer.Option("prior", "--actual",
                               help="prior | paper | iid-uniform:A,B | common-uniform:A,B | fixed:P"),
    solver: str = typer.Option("highs", "--solver"),
    teachers: Teachers = typer.Option(Teachers.shared, "--teachers",
                                      help="shared | disjoint-private | disjoint-nonprivate (PATE)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
) -> None:
    """Expected error of γ_opt, γ_Sub, γ_DSub, γ_const, γ_const_opt and GNMax at the same (mε, δ), per m."""
    from darrm_opt.cli.render import render_compare
    from darrm_opt.experiments.compare import ERROR_KEYS

    with handle_errors():
        rows = comparison_rows(K, m, epsilon, teacher_delta, delta, prior, actual, solver, teachers)
        if fmt is OutputFormat.json:
            text = json.dumps([r.to_dict() for r in rows], indent=2)
        else:
            text = render_compare(rows, epsilon, teacher_delta, ERROR_KEYS)
        write_output(text, out)
