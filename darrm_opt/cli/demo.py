"""``darrm-opt demo teachers``: private teachers on scikit-learn's digits, labelled by DaRRM and GNMax."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import handle_errors, working, write_output
from darrm_opt.cli.options import OutputFormat, int_list


def demo(
    what: str = typer.Argument("teachers", help="the demo to run: teachers"),
    epsilon: float = typer.Option(0.0892, "--epsilon", help="each private teacher's ε (paper MNIST: 0.0892)"),
    teacher_delta: float = typer.Option(1e-4, "--teacher-delta", help="each private teacher's Δ"),
    m: float = typer.Option(3, "--m", help="privacy allowance m: each answer is (m·ε, δ)-DP"),
    queries: str = typer.Option("20,50,100", "--queries", help="numbers of queries Q, comma-separated"),
    draws: int = typer.Option(10, "--draws", help="repetitions averaged per Q"),
    seed: int = typer.Option(0, "--seed", help="seed of the data split and the teachers' training"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    plot_out: Optional[Path] = typer.Option(None, "--plot", help="also write an accuracy plot (.png/.svg)"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
) -> None:
    """Digits 5 vs 8, K=11 teachers: accuracy of DaRRM γ_opt, γ_Sub and GNMax over Q queries (Table 1).

    \b
    Example:
      darrm-opt demo teachers --queries 20,50 --draws 2
    """
    from darrm_opt.cli.render import render_demo
    from darrm_opt.errors import InvalidParameter
    from darrm_opt.experiments.demo import DemoConfig, run_demo
    from darrm_opt.extras import require

    with handle_errors():
        require("demo", "darrm-opt demo")
        if plot_out is not None:
            require("plots", "darrm-opt demo --plot")
        if what != "teachers":
            raise InvalidParameter("demo", "must be 'teachers'", what)
        cfg = DemoConfig(m=m, epsilon=epsilon, teacher_delta=teacher_delta,
                         queries=tuple(int_list(queries, "queries")), n_draws=draws, seed=seed)
        with working(f"training {cfg.K} teachers and labelling {max(cfg.queries)} queries, {draws} draws"):
            res = run_demo(cfg)
        if plot_out is not None:
            from darrm_opt.experiments.plots import plot_demo

            plot_demo(res.rows, plot_out, title=f"digits 5 vs 8, K={cfg.K}, per query "
                                                f"({cfg.m * cfg.epsilon:g}, {res.privacy[0]['per_query_delta']:.2g})")
        text = json.dumps(res.to_dict(), indent=2) if fmt is OutputFormat.json else render_demo(res)
        write_output(text, out)
