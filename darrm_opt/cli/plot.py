"""``darrm-opt plot``: γ shapes and error curves, one panel per m (the paper's Figure 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import handle_errors
from darrm_opt.cli.compare import comparison_rows
from darrm_opt.cli.options import Teachers


def plot(
    out: Path = typer.Option(..., "--out", help="figure path (.png or .svg)"),
    K: int = typer.Option(11, "--K", "-K"),
    m: str = typer.Option("1,3,5,7", "--m"),
    epsilon: float = typer.Option(0.1, "--epsilon"),
    teacher_delta: float = typer.Option(1e-5, "--teacher-delta"),
    delta: Optional[float] = typer.Option(None, "--delta"),
    prior: str = typer.Option("paper", "--prior"),
    solver: str = typer.Option("highs", "--solver"),
    points: int = typer.Option(101, "--points", help="grid points of p in [0, 1]"),
    teachers: Teachers = typer.Option(Teachers.shared, "--teachers",
                                      help="shared | disjoint-private | disjoint-nonprivate (PATE)"),
) -> None:
    """γ shapes over l and error curves E(DaRRM_γ) against i.i.d. p, one panel per m (Figure 2)."""
    import numpy as np

    from darrm_opt.errors import InvalidParameter
    from darrm_opt.experiments.compare import error_curves
    from darrm_opt.extras import require

    with handle_errors():
        require("plots", "darrm-opt plot")
        from darrm_opt.experiments.plots import plot_comparison

        if points < 2:
            raise InvalidParameter("points", "must be >= 2", points)
        rows = comparison_rows(K, m, epsilon, teacher_delta, delta, prior, "prior", solver, teachers)
        ps = np.linspace(0.0, 1.0, points)
        panels = [{"m": r.m, "gammas": r.gammas, "p": ps, "curves": error_curves(r.gammas, ps),
                   "epsilon0": r.params.m * r.params.epsilon, "delta": r.params.delta} for r in rows]
        path = plot_comparison(panels, out, title=f"K={K}, ε={epsilon:g}, Δ={teacher_delta:g}, "
                                                  f"γ_opt for prior {rows[0].params.prior.spec}, "
                                                  f"teachers {teachers.value}")
        typer.echo(f"wrote {path}")
