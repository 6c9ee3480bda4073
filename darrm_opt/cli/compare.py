"""``darrm-opt compare``: expected error of γ_opt against the baselines and GNMax, per m."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import handle_errors, working, write_output
from darrm_opt.cli.options import OutputFormat, Teachers, float_list

#: the defaults of --m, --epsilon and --teacher-delta where they apply (not with disjoint-nonprivate teachers)
DEFAULT_M, DEFAULT_EPSILON, DEFAULT_TEACHER_DELTA = "1,3,5,7", 0.1, 1e-5


def check_compare_options(teachers, m, epsilon, teacher_delta, target_epsilon) -> str:  # noqa: ANN001
    """The teacher setting, once the options stated for it obey the one rule of
    :func:`darrm_opt.model.neighbours.check_setting_options` (InvalidParameter otherwise)."""
    from darrm_opt.model.neighbours import check_setting_options, cli_spelling

    given = {"m": m, "epsilon": epsilon, "teacher_delta": teacher_delta, "target_epsilon": target_epsilon}
    return check_setting_options(getattr(teachers, "value", teachers) or "shared",
                                 [k for k, v in given.items() if v is not None], cli_spelling)


def comparison_rows(K, m, epsilon, teacher_delta, delta, prior, actual, solver, teachers="shared",
                    target_epsilon=None):
    """Parse the shared ``compare``/``plot`` options and compute one comparison row per m (per target ε with
    ``--teachers disjoint-nonprivate``).

    One rule (:func:`darrm_opt.model.neighbours.check_setting_options`, as ``solve`` and the API apply it):
    non-private teachers take ``--target-epsilon`` and none of ``--m``, ``--epsilon``, ``--teacher-delta``;
    the other settings take those and not ``--target-epsilon``. Options left out take their defaults
    (m 1,3,5,7; ε 0.1; Δ 1e-5)."""
    from darrm_opt.experiments.compare import compare as compare_rows
    from darrm_opt.experiments.compare import parse_actual

    setting = check_compare_options(teachers, m, epsilon, teacher_delta, target_epsilon)
    act = parse_actual(actual)
    if setting == "disjoint-nonprivate":  # per answer (ε, δ) = (m·ε, δ) with m = 1, ε = the target
        return [row for t in float_list(target_epsilon, "target-epsilon")
                for row in compare_rows(K, [1.0], epsilon=t, teacher_delta=0.0, delta=delta, prior=prior,
                                        actual=act, solver=solver, teachers=setting)]
    return compare_rows(K, float_list(m or DEFAULT_M, "m"), epsilon=DEFAULT_EPSILON if epsilon is None else epsilon,
                        teacher_delta=DEFAULT_TEACHER_DELTA if teacher_delta is None else teacher_delta,
                        delta=delta, prior=prior, actual=act, solver=solver, teachers=setting)


def compare(
    K: int = typer.Option(11, "--K", "-K", help="number of teachers K (odd)"),
    m: Optional[str] = typer.Option(None, "--m", help="privacy allowances m, comma-separated: each answer is "
                                    "(m·ε, δ)-DP  [default: 1,3,5,7]"),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="each teacher's ε  [default: 0.1]"),
    teacher_delta: Optional[float] = typer.Option(None, "--teacher-delta", help="each teacher's Δ  "
                                                  "[default: 1e-05]"),
    delta: Optional[float] = typer.Option(None, "--delta", help="target δ per answer (default 1 − (1 − Δ)^m; "
                                          "0 with disjoint-nonprivate)"),
    target_epsilon: Optional[str] = typer.Option(None, "--target-epsilon", help="per-answer ε values, "
                                                 "comma-separated (--teachers disjoint-nonprivate only)"),
    prior: str = typer.Option("paper", "--prior", help="the prior γ_opt is optimised for: paper | "
                              "iid-uniform:A,B | common-uniform:A,B"),
    actual: str = typer.Option("prior", "--actual", help="the teachers' actual accuracy the errors are taken "
                               "under: prior | paper | iid-uniform:A,B | common-uniform:A,B | fixed:P"),
    solver: str = typer.Option("highs", "--solver", help="LP solver: highs | gurobi | cbc"),
    teachers: Teachers = typer.Option(Teachers.shared, "--teachers",
                                      help="who the teachers are: shared | disjoint-private | "
                                           "disjoint-nonprivate (PATE)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
) -> None:
    """Expected error of γ_opt against γ_Sub, γ_DSub, γ_const, γ_const_opt and GNMax at the same per-answer
    (mε, δ), one row per m. For class-label votes over Q answers at a total (ε, δ), `plan --classes C
    --queries Q --budget ε,δ` compares every mechanism's offer (multi-class DaRRM, GNMax, Confident-GNMax;
    shaped and top-two tables with --mechanism), each calibrated so that its Q answers fit the budget.

    \b
    Examples:
      darrm-opt compare --K 11 --m 1,3,5,7
      darrm-opt compare --K 11 --teachers disjoint-nonprivate \\
          --target-epsilon 0.3,1 --delta 1e-5
    """
    from darrm_opt.cli.render import render_compare
    from darrm_opt.experiments.compare import ERROR_KEYS

    with handle_errors():
        check_compare_options(teachers, m, epsilon, teacher_delta, target_epsilon)
        with working(f"solving and comparing: K={K}"):
            rows = comparison_rows(K, m, epsilon, teacher_delta, delta, prior, actual, solver, teachers,
                                   target_epsilon)
        if fmt is OutputFormat.json:
            text = json.dumps([r.to_dict() for r in rows], indent=2)
        else:
            text = render_compare(rows, rows[0].params.epsilon, rows[0].params.teacher_delta, ERROR_KEYS)
        write_output(text, out)

