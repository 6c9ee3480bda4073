"""``darrm-opt plan``: the most accurate certified table whose Q answers fit a total (ε, δ) budget."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import JobProgress, ProgressReporter, err_console, handle_errors, write_output
from darrm_opt.cli.options import OutputFormat, PlanAccounting, Teachers, number_pair


def plan(
    K: int = typer.Option(..., "--K", "-K", help="number of teachers (odd for DaRRM's 0/1 tables)"),
    epsilon: Optional[float] = typer.Option(None, "--epsilon",
                                            help="each teacher's ε (required unless disjoint-nonprivate)"),
    teacher_delta: Optional[float] = typer.Option(None, "--teacher-delta",
                                                  help="each teacher's Δ (required unless disjoint-nonprivate)"),
    queries: int = typer.Option(..., "--queries", help="number of answers Q the budget must cover"),
    budget: str = typer.Option(..., "--budget", help="total budget EPS,DELTA of the Q answers"),
    prior: str = typer.Option("paper", "--prior", help="paper | iid-uniform:A,B | common-uniform:A,B; with "
                                                       "--classes also dirichlet:AY,AW"),
    solver: str = typer.Option("highs", "--solver", help="highs | gurobi | cbc"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines",
                                   help="also compute the baselines for the chosen (m, δ) (JSON, as solve)"),
    teachers: Optional[Teachers] = typer.Option(None, "--teachers",
                                                help="shared | disjoint-private | disjoint-nonprivate (PATE); "
                                                     "default shared, or disjoint-nonprivate with --classes"),
    classes: Optional[int] = typer.Option(None, "--classes",
                                          help="C class labels per vote (C >= 2): plan over every mechanism"),
    mechanism_name: Optional[str] = typer.Option(
        None, "--mechanism", help="auto (every mechanism; the default with --classes or "
                                  "--teachers disjoint-nonprivate) or one kind: darrm, darrm-pate, "
                                  "darrm-pate-shaped, darrm-multiclass, darrm-multiclass-shaped, "
                                  "darrm-multiclass-top2, gnmax, confident-gnmax"),
    accounting: PlanAccounting = typer.Option(
        PlanAccounting.worst_case, "--accounting",
        help="worst-case (default): choose only among offers whose Q answers fit the budget over every "
             "dataset (a plain ledger at the budget pays them all); data-dependent: a data-dependent GNMax "
             "offer (a sanitised ε, a target and not a cap; run on a data-dependent ledger) may be chosen "
             "where it is more accurate. Either way it is listed beside the choice, with its worst case"),
) -> None:
    """Search the per-answer (m, δ) for the certified table of least expected error whose Q-fold exact
    composition (its privacy profile's PLD) fits the budget; the JSON output is a table file that
    verify, budget --table and the service accept. With --teachers disjoint-nonprivate (PATE's
    setting) or --classes, every mechanism that serves the job makes its offer (per-answer and
    composition-shaped DaRRM tables, GNMax, Confident-GNMax) and the most accurate is chosen, with
    the others beside it: by default only among offers that fit the budget in the worst case, so
    that `aggregate --ledger` at the same budget pays all Q answers (--accounting data-dependent
    may choose data-dependent GNMax); disjoint-private states that the plain majority is free when
    the teachers' own (ε, Δ) is within the budget.

    \b
    Example:
      darrm-opt plan --K 11 --epsilon 0.0892 --teacher-delta 1e-4 \\
          --queries 100 --budget 15.044,0.030
    """
    from darrm_opt.model.neighbours import check_setting_options, cli_spelling
    from darrm_opt.planning.plan import plan as make_plan

    with handle_errors():
        given = [k for k, v in (("epsilon", epsilon), ("teacher_delta", teacher_delta)) if v is not None]
        check_setting_options((teachers or Teachers.shared).value, given, cli_spelling, target_needed=False)
        nonprivate = teachers is Teachers.disjoint_nonprivate
        if classes is not None or mechanism_name is not None or nonprivate:
            setting = teachers or (Teachers.disjoint_nonprivate if classes is not None else Teachers.shared)
            return write_output(_job_plan(K, epsilon, teacher_delta, queries, budget, prior, solver, fmt, quiet,
                                          setting, classes, mechanism_name, accounting.value), out)
        teachers = teachers or Teachers.shared
        budget_epsilon, budget_delta = number_pair(budget, "budget")
        epsilon, teacher_delta = _require_teacher_privacy(epsilon, teacher_delta, teachers)
        free = _majority_free(K, epsilon, teacher_delta, queries, budget_epsilon, budget_delta, prior, teachers)
        if free is not None:
            return write_output(json.dumps(free.to_dict(), indent=2) if fmt is OutputFormat.json
                                else _free_text(free), out)
        reporter = _PlanProgress(quiet)
        try:
            result = make_plan(K, epsilon, teacher_delta, queries, budget_epsilon, budget_delta, prior,
                               solver=solver, progress=reporter)
        finally:
            reporter.close()
        if fmt is OutputFormat.json:
            text = json.dumps(plan_document(result, baselines, teachers), indent=2)
        else:
            text = _table_text(result) + _cap_line(result, teachers)
        write_output(text, out)


def _require_teacher_privacy(epsilon: float | None, teacher_delta: float | None, teachers) -> tuple[float, float]:
    from darrm_opt.errors import InvalidParameter

    for name, value in (("epsilon", epsilon), ("teacher-delta", teacher_delta)):
        if value is None:
            raise InvalidParameter(name, f"is required with --teachers {teachers.value} (the teachers' privacy)")
    assert epsilon is not None and teacher_delta is not None
    return epsilon, teacher_delta


def _majority_free(K, epsilon, teacher_delta, queries, budget_epsilon, budget_delta, prior, teachers):
    if teachers is not Teachers.disjoint_private:
        return None
    from darrm_opt.planning.pate_plan import majority_free

    return majority_free(K, epsilon, teacher_delta, queries, budget_epsilon, budget_delta, prior)


def _free_text(free) -> str:
    return (f"plan: teachers disjoint-private, each (ε={free.teacher_epsilon:g}, Δ={free.teacher_delta:g})-DP on its "
            f"own shard: by parallel composition releasing every teacher, hence any number of answers (the plain "
            f"majority γ ≡ 1 included), is (ε={free.teacher_epsilon:g}, δ={free.teacher_delta:g})-DP in total, "
            f"within the budget (ε={free.budget_epsilon:g}, δ={free.budget_delta:g}): the plain majority is free "
            f"of further cost for the {free.queries} answers; E[error] = {free.expected_error:.4g}\n")


def _cap_line(result, teachers) -> str:
    if teachers is not Teachers.disjoint_private:
        return ""
    p = result.params
    return (f"teachers: disjoint-private: their own (ε={p.epsilon:g}, Δ={p.teacher_delta:g}) would cap the total "
            f"(the plain majority free), but it is not within the budget (ε={result.budget_epsilon:g}, "
            f"δ={result.budget_delta:g}); the plan composes the answers as for shared teachers\n")


class _PlanProgress(ProgressReporter):
    """One line on stderr per evaluated (m, δ); sweeps' progress bars as ``solve`` shows them."""

    def __call__(self, stage: str, **info) -> None:
        if self.quiet:
            return
        if stage != "plan":
            return super().__call__(stage, **info)
        spent = info["spent"]
        shown = f"{spent:.4f}" if math.isfinite(spent) else "∞ (δ too small)"
        target = f"m={info['m']:.6g}" if "m" in info else f"ε={info['epsilon']:.6g}"
        err_console.print(f"plan: #{info['evaluations']} {target} δ={info['delta']:.3g} → ε spent "
                          f"{shown}, {'fits' if info['fits'] else 'over'}, E[error] {info['error']:.3e}",
                          highlight=False)


def plan_document(result, baselines: bool, teachers=Teachers.shared) -> dict:
    """The document ``solve --format json`` writes for the chosen (m, δ) (baselines, certificates, errors,
    privacy profile, setting), plus ``plan`` (:func:`darrm_opt.release.documents.plan_document`)."""
    from darrm_opt.release import documents
    from darrm_opt.release.table_file import baseline_tables

    base = baseline_tables(result.params) if baselines else {}
    return documents.plan_document(result, base, teachers.value)


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


def _job_plan(K, epsilon, teacher_delta, queries, budget, prior, solver, fmt, quiet, teachers, classes,
              mechanism_name, accounting="worst-case") -> str:
    """Every mechanism's offer for the job (``plan_job``), the most accurate that ``accounting`` allows
    chosen: its table document plus ``mechanism``, ``epsilon_spent``, σ or γ, ``alternatives`` (JSON), or a
    summary (table)."""
    from darrm_opt.mechanisms import plan_job
    from darrm_opt.planning.job import Job
    from darrm_opt.release.documents import job_plan_document

    budget_epsilon, budget_delta = number_pair(budget, "budget")
    job = Job(K=K, queries=queries, budget_epsilon=budget_epsilon, budget_delta=budget_delta,
              teachers=teachers.value, classes=classes, prior=prior, epsilon=epsilon, teacher_delta=teacher_delta,
              solver=solver, accounting=accounting)
    kinds = None if mechanism_name in (None, "auto") else [mechanism_name]

    progress = JobProgress(quiet)
    try:
        best, offers, refused = plan_job(job, progress, kinds)
    finally:
        progress.close()
    if fmt is OutputFormat.json:
        return json.dumps(job_plan_document(best, offers, refused, job), indent=2)
    lines = [f"plan: {queries} answers of K={K} teachers ({'0/1 votes' if classes is None else f'{classes} classes'}, "
             f"{teachers.value}, prior {prior}) within (ε={budget_epsilon:g}, δ={budget_delta:g}), "
             f"accounting {accounting}",
             f"chosen: {best.label}: E[error] = {best.expected_error:.4g}, {best.spend_text(budget_delta)}; "
             f"{_figures(best.details)}; table {best.table.id}",
             f"guarantee: {best.guarantee}",
             f"run: {best.run()['how']}" + (f"; policy {json.dumps(best.policy)}" if best.policy else ""),
             "offers (most accurate first):"]
    for o in offers:
        lines.append(f"  {o.label:<33} E[error] {o.expected_error:<11.4g} {_offer_epsilon(o)} "
                     f"{_figures(o.details)} ({o.seconds:.1f} s)")
    for kind, why in refused.items():
        lines.append(f"  {kind:<33} no offer: {why}")
    lines += [_not_chosen(o, job) for o in offers if o is not best and not o.worst_case
              and o.expected_error < best.expected_error]
    return "\n".join(lines) + "\n"


def _offer_epsilon(offer) -> str:
    """An offer's ε column: the worst case (data-independent), or the sanitised target and its worst case."""
    if offer.worst_case:
        return f"ε {offer.epsilon_spent:<10.6g}"
    worst = offer.worst_case_epsilon
    shown = "unknown" if worst is None else f"{worst:.6g}"
    return f"ε {offer.epsilon_spent:.6g} (data-dependent target, not a cap; worst case ε {shown})"


def _not_chosen(offer, job) -> str:
    """Why a more accurate data-dependent offer was not chosen under worst-case accounting."""
    worst = offer.worst_case_epsilon
    over = "unknown" if worst is None else f"{worst:.6g}" + (f" > budget {job.budget_epsilon:g}"
                                                             if worst > job.budget_epsilon else "")
    return (f"not chosen: {offer.label} errs less (E[error] {offer.expected_error:.4g}), but its ε "
            f"{offer.epsilon_spent:.6g} is a data-dependent target, not a cap: its worst case is ε {over}; "
            f"--accounting data-dependent chooses it (run on a data-dependent ledger, not a plain one)")


def _figures(details: dict) -> str:
    return ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in details.items())
