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
    classes: Optional[int] = typer.Option(None, "--classes",
                                          help="multi-class (PATE setting): DaRRM vs GNMax, Confident-GNMax"),
    queries: int = typer.Option(1, "--queries", help="with --classes: number of answers Q sharing the budget"),
    total_epsilon: Optional[float] = typer.Option(None, "--total-epsilon",
                                                  help="with --classes: total ε of the Q answers (δ: --delta)"),
    confident: bool = typer.Option(True, "--confident/--no-confident", help="with --classes: Confident-GNMax"),
    shaped: bool = typer.Option(True, "--shaped/--no-shaped",
                                help="with --classes: DaRRM whose LP bounds δ(ε′) by a Gaussian's profile"),
) -> None:
    """Expected error of γ_opt, γ_Sub, γ_DSub, γ_const, γ_const_opt and GNMax at the same (mε, δ), per m;
    with --classes, multi-class DaRRM, GNMax and Confident-GNMax over Q answers at a total (ε, δ)."""
    from darrm_opt.cli.render import render_compare
    from darrm_opt.experiments.compare import ERROR_KEYS

    with handle_errors():
        if classes is not None:
            return write_output(_multiclass_text(K, classes, queries, total_epsilon, delta, prior, solver,
                                                 confident, shaped, fmt), out)
        rows = comparison_rows(K, m, epsilon, teacher_delta, delta, prior, actual, solver, teachers)
        if fmt is OutputFormat.json:
            text = json.dumps([r.to_dict() for r in rows], indent=2)
        else:
            text = render_compare(rows, epsilon, teacher_delta, ERROR_KEYS)
        write_output(text, out)


def _multiclass_text(K, classes, queries, total_epsilon, delta, prior, solver, confident, shaped, fmt) -> str:  # noqa: ANN001
    """``compare --classes``: the budget comparison as a table or JSON."""
    from darrm_opt.errors import InvalidParameter
    from darrm_opt.experiments.multiclass_budget import budget_text, compare_over_answers

    if total_epsilon is None:
        raise InvalidParameter("total-epsilon", "is required with --classes (the total ε of the Q answers)")
    if delta is None:
        raise InvalidParameter("delta", "is required with --classes (the total δ of the Q answers)")
    cmp = compare_over_answers(K, classes, queries, total_epsilon, delta, prior, solver=solver, confident=confident,
                               shaped=shaped)
    return json.dumps(cmp.to_dict(), indent=2) if fmt is OutputFormat.json else budget_text(cmp)
