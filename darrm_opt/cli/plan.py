"""``darrm-opt plan``: the most accurate certified table whose Q answers fit a total (ε, δ) budget."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import ProgressReporter, err_console, handle_errors, write_output
from darrm_opt.cli.options import OutputFormat, number_pair


def plan(
    K: int = typer.Option(..., "--K", "-K", help="number of teachers (odd)"),
    epsilon: float = typer.Option(..., "--epsilon", help="each teacher's ε"),
    teacher_delta: float = typer.Option(..., "--teacher-delta", help="each teacher's Δ"),
    queries: int = typer.Option(..., "--queries", help="number of answers Q the budget must cover"),
    budget: str = typer.Option(..., "--budget", help="total budget EPS,DELTA of the Q answers"),
    prior: str = typer.Option("paper", "--prior", help="paper | iid-uniform:A,B | common-uniform:A,B"),
    solver: str = typer.Option("highs", "--solver", help="highs | gurobi | cbc"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines",
                                   help="also compute the baselines for the chosen (m, δ) (JSON, as solve)"),
) -> None:
    """Search the per-answer (m, δ) for the certified table of least expected error whose Q-fold exact
    composition (its privacy profile's PLD) fits the budget; the JSON output is a table file that
    ``verify``, ``budget --table`` and the service accept."""
    from darrm_opt.optimize.plan import plan as make_plan

    with handle_errors():
        budget_epsilon, budget_delta = number_pair(budget, "budget")
        reporter = _PlanProgress(quiet)
        try:
            result = make_plan(K, epsilon, teacher_delta, queries, budget_epsilon, budget_delta, prior,
                               solver=solver, progress=reporter)
        finally:
            reporter.close()
        if fmt is OutputFormat.json:
            text = json.dumps(_json_doc(result, baselines), indent=2)
        else:
            text = _table_text(result)
        write_output(text, out)


class _PlanProgress(ProgressReporter):
    """One line on stderr per evaluated (m, δ); sweeps' progress bars as ``solve`` shows them."""

    def __call__(self, stage: str, **info) -> None:
        if self.quiet:
            return
        if stage != "plan":
            return super().__call__(stage, **info)
        spent = info["spent"]
        shown = f"{spent:.4f}" if math.isfinite(spent) else "∞ (δ too small)"
        err_console.print(f"plan: #{info['evaluations']} m={info['m']:.6g} δ={info['delta']:.3g} → ε spent "
                          f"{shown}, {'fits' if info['fits'] else 'over'}, E[error] {info['error']:.3e}",
                          highlight=False)


def _json_doc(result, baselines: bool) -> dict:
    """The document ``solve --format json`` writes for the chosen (m, δ) (baselines, certificates, errors,
    privacy profile, setting), plus ``plan``."""
    from darrm_opt.cli.options import Teachers
    from darrm_opt.cli.solve import _json_doc as solve_doc
    from darrm_opt.cli.solve import _setting_doc
    from darrm_opt.release.table_file import baseline_tables

    base = baseline_tables(result.params) if baselines else {}
    doc = solve_doc(result.params, result.solution, base, result.seconds)
    return {**doc, "privacy_profile": result.profile.to_dict(), **_setting_doc(result.params, base, Teachers.shared),
            "plan": result.plan_dict()}


def _table_text(result) -> str:
    from darrm_opt.cli.render import render_gamma_table
    from darrm_opt.release.table_file import certified_decimals

    params = result.params
    shown, cert = certified_decimals(params, result.solution.gamma, 6)
    text = render_gamma_table(params, {"γ_plan": shown}, {"γ_plan": result.expected_error}, cert,
                              result.seconds, result.solution.solver, result.solution.mode)
    return text + (
        f"plan: {result.queries} answers within (ε={result.budget_epsilon:g}, δ={result.budget_delta:g}): "
        f"per answer m={params.m:.6g}, δ={result.delta:.6g}; the {result.queries} answers spend "
        f"ε={result.spent_epsilon:.6g} at δ={result.budget_delta:g} (exact composition of the certified "
        f"privacy profile); E[error] = {result.expected_error:.3g}; {len(result.candidates)} candidates tried\n")
