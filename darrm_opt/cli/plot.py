"""``darrm-opt plot``: γ shapes and error curves, one panel per m (the paper's Figure 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import handle_errors, working
from darrm_opt.cli.compare import check_compare_options, comparison_rows
from darrm_opt.cli.options import Teachers

#: figure formats matplotlib writes for us (checked before anything is computed)
FIGURE_SUFFIXES = (".png", ".svg")


def plot(
    out: Path = typer.Option(..., "--out", help="figure path (.png or .svg)"),
    K: int = typer.Option(11, "--K", "-K", help="number of teachers K (odd)"),
    m: Optional[str] = typer.Option(None, "--m", help="privacy allowances m, comma-separated, one panel each: "
                                    "each answer is (m·ε, δ)-DP  [default: 1,3,5,7]"),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="each teacher's ε  [default: 0.1]"),
    teacher_delta: Optional[float] = typer.Option(None, "--teacher-delta",
                                                  help="each teacher's Δ  [default: 1e-05]"),
    delta: Optional[float] = typer.Option(None, "--delta", help="target δ per answer (default 1 − (1 − Δ)^m; "
                                          "0 with disjoint-nonprivate)"),
    target_epsilon: Optional[str] = typer.Option(None, "--target-epsilon", help="per-answer ε values, one panel "
                                                 "each (--teachers disjoint-nonprivate only)"),
    prior: str = typer.Option("paper", "--prior", help="the prior γ_opt is optimised for: paper | "
                              "iid-uniform:A,B | common-uniform:A,B"),
    solver: str = typer.Option("highs", "--solver", help="LP solver: highs | gurobi | cbc"),
    points: int = typer.Option(101, "--points", help="grid points of p in [0, 1]"),
    teachers: Teachers = typer.Option(Teachers.shared, "--teachers",
                                      help="who the teachers are: shared | disjoint-private | "
                                           "disjoint-nonprivate (PATE)"),
) -> None:
    """γ shapes over l and error curves E(DaRRM_γ) against i.i.d. p, one panel per m (the paper's Figure 2).

    \b
    Example:
      darrm-opt plot --K 11 --m 1,3,5,7 --out fig.png
    """
    import numpy as np

    from darrm_opt.errors import InvalidParameter
    from darrm_opt.experiments.compare import error_curves
    from darrm_opt.extras import require

    with handle_errors():
        if out.suffix.lower() not in FIGURE_SUFFIXES:
            raise InvalidParameter("out", "must end in .png or .svg", str(out))
        require("plots", "darrm-opt plot")
        from darrm_opt.experiments.plots import plot_comparison

        if points < 2:
            raise InvalidParameter("points", "must be >= 2", points)
        check_compare_options(teachers, m, epsilon, teacher_delta, target_epsilon)
        with working(f"solving and comparing: K={K}"):
            rows = comparison_rows(K, m, epsilon, teacher_delta, delta, prior, "prior", solver, teachers,
                                   target_epsilon)
        ps = np.linspace(0.0, 1.0, points)
        panels = [{"m": r.m, "gammas": r.gammas, "p": ps, "curves": error_curves(r.gammas, ps),
                   "epsilon0": r.params.m * r.params.epsilon, "delta": r.params.delta} for r in rows]
        p0 = rows[0].params
        who = ("non-private teachers on disjoint shards" if rows[0].teachers == "disjoint-nonprivate"
               else f"ε={p0.epsilon:g}, Δ={p0.teacher_delta:g}")
        path = plot_comparison(panels, out, title=f"K={K}, {who}, γ_opt for prior {p0.prior.spec}, "
                                                  f"teachers {teachers.value}")
        typer.echo(f"wrote {path}")
