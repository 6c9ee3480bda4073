"""``darrm-opt plan``: the most accurate certified table whose Q answers fit a total (ε, δ) budget."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import JobProgress, handle_errors, write_output
from darrm_opt.cli.options import OutputFormat, PlanAccounting, Teachers, number_pair


def plan(
    K: int = typer.Option(..., "--K", "-K", help="number of teachers (odd for DaRRM's 0/1 tables)"),
    epsilon: Optional[float] = typer.Option(None, "--epsilon",
                                            help="each teacher's ε (required unless disjoint-nonprivate)"),
    teacher_delta: Optional[float] = typer.Option(None, "--teacher-delta",
                                                  help="each teacher's Δ (required unless disjoint-nonprivate)"),
    queries: int = typer.Option(..., "--queries", help="number of answers Q the budget must cover"),
    budget: str = typer.Option(..., "--budget", help="total budget EPS,DELTA of the Q answers"),
    prior: str = typer.Option("paper", "--prior", help="paper | iid-uniform:A,B | common-uniform:A,B | beta:A,B "
                                                       "| counts:L=W,A..B=W (the law of the 1-votes' count L, "
                                                       "e.g. counts:225=0.9,126..224=0.1); with --classes also "
                                                       "dirichlet:AY,AW"),
    solver: str = typer.Option("highs", "--solver", help="highs | gurobi | cbc"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines",
                                   help="also compute the baselines for the chosen (m, δ) (JSON, as solve)"),
    teachers: Optional[Teachers] = typer.Option(None, "--teachers",
                                                help="shared | disjoint-private | disjoint-nonprivate (PATE); "
                                                     "default: the setting of the kind --mechanism names, "
                                                     "else disjoint-nonprivate with --classes, else shared"),
    classes: Optional[int] = typer.Option(None, "--classes",
                                          help="C class labels per vote (C >= 2): plan over every mechanism"),
    mechanism_name: Optional[str] = typer.Option(
        None, "--mechanism", help="auto (every mechanism; the default with --classes or "
                                  "--teachers disjoint-nonprivate) or one kind of the registry by its name "
                                  "(e.g. gnmax; an unknown name is refused with the list of kinds)"),
    subsample: Optional[int] = typer.Option(
        None, "--subsample", help="disjoint-nonprivate 0/1 votes: only offers whose answers each read a uniform "
                                  "random subset of this many of the K teachers (1..K), their cost amplified; "
                                  "by default the planner tries K, K/2 and K/4 itself"),
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
    from darrm_opt.mechanisms import mechanism, plan_job
    from darrm_opt.model.neighbours import check_setting_options, cli_spelling

    with handle_errors():
        named = None if mechanism_name in (None, "auto") else mechanism(mechanism_name)
        # without --teachers: a named kind's own (first) setting, else PATE's with --classes, else shared
        default = (Teachers(named.settings[0]) if named is not None
                   else Teachers.disjoint_nonprivate if classes is not None else Teachers.shared)
        given = [k for k, v in (("epsilon", epsilon), ("teacher_delta", teacher_delta)) if v is not None]
        check_setting_options((teachers or default).value, given, cli_spelling, target_needed=False)
        nonprivate = teachers is Teachers.disjoint_nonprivate
        offers_shown = classes is not None or mechanism_name is not None or nonprivate
        setting = teachers or default
        if not offers_shown:
            epsilon, teacher_delta = _require_teacher_privacy(epsilon, teacher_delta, setting)
        job = _job(K, epsilon, teacher_delta, queries, budget, prior, solver, setting, classes, accounting.value,
                   subsample)
        kinds = None if mechanism_name in (None, "auto") else [mechanism_name]
        reporter = _PlanProgress(quiet, offers_shown)
        try:
            best, offers, refused = plan_job(job, reporter, kinds)
        finally:
            reporter.close()
        if best.majority_free:
            text = (json.dumps(majority_free_document(best, job), indent=2) if fmt is OutputFormat.json
                    else _free_text(best, job))
        elif offers_shown or best.solution is None or best.mechanism != "darrm":
            text = _job_text(best, offers, refused, job, fmt)
        elif fmt is OutputFormat.json:
            text = json.dumps(plan_document(best, baselines, setting), indent=2)
        else:
            text = _table_text(best) + _cap_line(best, job)
        write_output(text, out)


def _job(K, epsilon, teacher_delta, queries, budget, prior, solver, teachers, classes, accounting,  # noqa: ANN001, ANN202
         subsample=None):  # noqa: ANN001
    from darrm_opt.planning.job import Job

    budget_epsilon, budget_delta = number_pair(budget, "budget")
    return Job(K=K, queries=queries, budget_epsilon=budget_epsilon, budget_delta=budget_delta,
               teachers=teachers.value, classes=classes, prior=prior, epsilon=epsilon, teacher_delta=teacher_delta,
               solver=solver, accounting=accounting, subsample=subsample)


def _require_teacher_privacy(epsilon: float | None, teacher_delta: float | None, teachers) -> tuple[float, float]:
    from darrm_opt.errors import InvalidParameter

    for name, value in (("epsilon", epsilon), ("teacher-delta", teacher_delta)):
        if value is None:
            raise InvalidParameter(name, f"is required with --teachers {teachers.value} (the teachers' privacy)")
    assert epsilon is not None and teacher_delta is not None
    return epsilon, teacher_delta


def majority_free_document(offer, job) -> dict:
    """The JSON document of the plain majority, free for disjoint-private teachers within the budget."""
    from darrm_opt.release.documents import majority_free_document as document

    return document(offer, job)


def _free_text(offer, job) -> str:
    p = offer.plan
    return (f"plan: teachers disjoint-private, each (ε={job.epsilon:g}, Δ={job.teacher_delta:g})-DP on its "
            f"own shard: by parallel composition releasing every teacher, hence any number of answers (the plain "
            f"majority γ ≡ 1 included), is (ε={p['spent_epsilon']:g}, δ={p['spent_delta']:g})-DP in total, "
            f"within the budget (ε={job.budget_epsilon:g}, δ={job.budget_delta:g}): the plain majority is free "
            f"of further cost for the {job.queries} answers; E[error] = {offer.expected_error:.4g}\n")


def _cap_line(offer, job) -> str:
    if job.teachers != "disjoint-private":
        return ""
    p = offer.table.params
    return (f"teachers: disjoint-private: their own (ε={p.epsilon:g}, Δ={p.teacher_delta:g}) would cap the total "
            f"(the plain majority free), but it is not within the budget (ε={job.budget_epsilon:g}, "
            f"δ={job.budget_delta:g}); the plan composes the answers as for shared teachers\n")


class _PlanProgress(JobProgress):
    """With ``offers``: a phase per mechanism searched and a line per offer (:class:`JobProgress`). Else one
    line on stderr per evaluated (m, δ); sweeps' progress bars either way, as ``solve`` shows them."""

    def __init__(self, quiet: bool, offers: bool = False) -> None:
        super().__init__(quiet)
        self.offers = offers

    def __call__(self, stage: str, **info) -> None:
        if self.quiet:
            return
        if self.offers or stage != "plan":
            if not self.offers and stage in ("kind", "offer"):
                return
            return super().__call__(stage, **info)
        spent = info["spent"]
        shown = f"{spent:.4f}" if math.isfinite(spent) else "∞ (δ too small)"
        target = f"m={info['m']:.6g}" if "m" in info else f"ε={info['epsilon']:.6g}"
        self.line(f"plan: #{info['evaluations']} {target} δ={info['delta']:.3g} → ε spent "
                  f"{shown}, {'fits' if info['fits'] else 'over'}, E[error] {info['error']:.3e}")


def plan_document(offer, baselines: bool, teachers=Teachers.shared) -> dict:
    """The document ``solve --format json`` writes for the chosen (m, δ) (baselines, certificates, errors,
    privacy profile, setting), plus ``plan`` (:func:`darrm_opt.release.documents.plan_document`)."""
    from darrm_opt.release import documents
    from darrm_opt.release.table_file import baseline_tables

    base = baseline_tables(offer.table.params) if baselines else {}
    return documents.plan_document(offer, base, teachers.value)


def _table_text(offer) -> str:
    from darrm_opt.cli.render import render_gamma_table
    from darrm_opt.release.table_file import certified_decimals

    params, sol, info = offer.table.params, offer.solution, offer.plan
    shown, cert = certified_decimals(params, sol.gamma, 6)
    text = render_gamma_table(params, {"γ_plan": shown}, {"γ_plan": offer.expected_error}, cert,
                              offer.seconds, sol.solver, sol.mode)
    q, be, bd = info["queries"], info["budget_epsilon"], info["budget_delta"]
    return text + (
        f"plan: {q} answers within (ε={be:g}, δ={bd:g}): "
        f"per answer m={params.m:.6g}, δ={float(params.delta):.6g}; the {q} answers spend "
        f"ε={offer.epsilon_spent:.6g} at δ={bd:g} (exact composition of the certified "
        f"privacy profile); E[error] = {offer.expected_error:.3g}; {len(info['candidates'])} candidates tried\n")


def _job_text(best, offers, refused, job, fmt) -> str:
    """Every mechanism's offer for the job (``plan_job``), the most accurate that ``accounting`` allows
    chosen: its table document plus ``mechanism``, ``epsilon_spent``, σ or γ, ``alternatives`` (JSON), or a
    summary (table)."""
    from darrm_opt.release.documents import job_plan_document

    if fmt is OutputFormat.json:
        return json.dumps(job_plan_document(best, offers, refused, job), indent=2)
    K, queries, classes, budget_delta = job.K, job.queries, job.classes, job.budget_delta
    lines = [f"plan: {queries} answers of K={K} teachers ({'0/1 votes' if classes is None else f'{classes} classes'}, "
             f"{job.teachers}, prior {job.prior}) within (ε={job.budget_epsilon:g}, δ={budget_delta:g}), "
             f"accounting {job.accounting}",
             f"chosen: {best.label}: E[error] = {best.expected_error:.4g}, {best.spend_text(budget_delta)}; "
             f"{_figures(best.details)}; table {best.table.id}",
             f"guarantee: {best.guarantee}",
             f"run: {best.run()['how']}" + (f"; policy {json.dumps(best.policy)}" if best.policy else ""),
             "offers (most accurate first):"]
    if best.table is not None and best.table.teachers != job.teachers:
        lines.insert(3, f"setting: {job.teachers} teachers, planned as {best.table.teachers} (the table's "
                        "setting): its proof uses only that each record is in one teacher's shard; the "
                        "teachers' own (ε, Δ) is left unused")
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
    """An offer's figures on one line: numbers to 6 digits, a sequence (a shaped table's γ) by its length only
    (``--format json`` and ``--out`` carry every value)."""
    return ", ".join(f"{k}={v:.6g}" if isinstance(v, float)
                     else f"{k}=({len(v)} values)" if isinstance(v, (list, tuple)) else f"{k}={v}"
                     for k, v in details.items())
