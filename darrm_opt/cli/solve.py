"""``darrm-opt solve``: the certified optimal γ next to the certified baselines."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import ProgressReporter, handle_errors, write_output
from darrm_opt.cli.options import Mode, OutputFormat, Teachers, dask_executor

BASELINES = (("sub", "γ_Sub"), ("dsub", "γ_DSub"), ("const", "γ_const"), ("const_opt", "γ_const_opt"))
#: decimals of the table view
DECIMALS = 6


def solve(
    K: int = typer.Option(..., "--K", "-K", help="number of teachers (odd)"),
    m: Optional[float] = typer.Option(None, "--m", help="privacy allowance, 1 <= m <= K (shared/disjoint-private)"),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="each teacher's ε (default 0.1; not with "
                                            "--teachers disjoint-nonprivate)"),
    teacher_delta: Optional[float] = typer.Option(None, "--teacher-delta", help="each teacher's Δ (default 1e-5; "
                                                  "not with --teachers disjoint-nonprivate)"),
    delta: Optional[float] = typer.Option(None, "--delta", help="target δ (default 1 − (1 − Δ)^m)"),
    prior: str = typer.Option("paper", "--prior", help="paper | iid-uniform:A,B | common-uniform:A,B"),
    solver: str = typer.Option("highs", "--solver", help="highs | gurobi | cbc"),
    mode: Mode = typer.Option(Mode.lazy, "--mode", help="lazy (cutting planes) | full (every row)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="also compute the baselines"),
    dask_scheduler: Optional[str] = typer.Option(None, "--dask-scheduler", help="run sweeps on this Dask scheduler"),
    teachers: Optional[Teachers] = typer.Option(None, "--teachers",
                                                help="shared (default) | disjoint-private | disjoint-nonprivate"),
    target_epsilon: Optional[float] = typer.Option(None, "--target-epsilon",
                                                   help="per-answer ε (--teachers disjoint-nonprivate only)"),
    classes: Optional[int] = typer.Option(None, "--classes",
                                          help="number of classes C (multi-class; --teachers disjoint-nonprivate)"),
) -> None:
    """Compute the certified optimal γ and compare it with the baselines."""
    if classes is not None:
        from darrm_opt.cli.solve_multiclass import solve_multiclass_command
        from darrm_opt.model.neighbours import check_setting_options, cli_spelling

        with handle_errors():
            given = {"m": m, "epsilon": epsilon, "teacher_delta": teacher_delta, "target_epsilon": target_epsilon}
            if teachers is None or teachers is Teachers.disjoint_nonprivate:  # the multi-class setting
                check_setting_options("disjoint-nonprivate", [k for k, v in given.items() if v is not None],
                                      cli_spelling, target_needed=False)
            return solve_multiclass_command(K=K, classes=classes, teachers=teachers and teachers.value,
                                            target_epsilon=target_epsilon, delta=delta, prior=prior,
                                            solver=solver, fmt=fmt, out=out, baselines=baselines)
    from darrm_opt.certify.rounded import wide_margin
    from darrm_opt.model.params import Params
    from darrm_opt.optimize.optimizer import solve as solve_gamma
    from darrm_opt.release.table_file import baseline_tables

    teachers = teachers or Teachers.shared

    with handle_errors():
        given = {"m": m, "epsilon": epsilon, "teacher_delta": teacher_delta, "target_epsilon": target_epsilon}
        if _pate_output(K, given, delta, prior, solver, fmt, out, teachers) or m is None:
            return  # answered in the PATE setting (m is None only there: _pate_output requires it elsewhere)
        t0 = time.perf_counter()
        params = Params(K=K, m=m, epsilon=0.1 if epsilon is None else epsilon,
                        teacher_delta=1e-5 if teacher_delta is None else teacher_delta, delta=delta, prior=prior)
        executor = dask_executor(dask_scheduler)
        reporter = ProgressReporter(quiet)
        try:
            wide = wide_margin(params, DECIMALS) if fmt is OutputFormat.table else None
            reporter.phase("finding γ_opt", sweeps="sweeping")  # the sweep lines of logs as before: "sweeping: ..."
            sol = solve_gamma(params, solver=solver, mode=mode.value, progress=reporter, executor=executor, wide=wide)
            base: dict = {}
            if baselines:
                reporter.phase("certifying the baselines")
                base = baseline_tables(params, executor=executor, progress=reporter.certify_progress, wide=wide,
                                       decimals=DECIMALS if fmt is OutputFormat.table else None)
            text = _output(params, sol, base, fmt, t0, executor, reporter, teachers)
        finally:
            reporter.close()
        write_output(text, out)


def _output(params, sol, base, fmt: OutputFormat, t0: float, executor, reporter, teachers) -> str:
    """The JSON document (with the table's privacy profile) or the table view (printed columns certified)."""
    if fmt is OutputFormat.json:
        from darrm_opt.privacy.profile import privacy_profile

        reporter.phase("computing the privacy profile")
        known = (sol.certificate, sol.sweep) if sol.sweep is not None else None  # the optimiser's last sweep
        profile = privacy_profile(params, sol.gamma, executor=executor, progress=reporter, certified=known)
        doc = solve_document(params, sol, base, time.perf_counter() - t0)
        doc = {**doc, "privacy_profile": profile.to_dict(), **setting_document(params, base, teachers)}
        return json.dumps(doc, indent=2)
    reporter.phase("certifying the printed columns")
    text = _table_text(params, sol, base, time.perf_counter() - t0, executor, reporter)
    return text + _setting_lines(params, base, teachers)


def _pate_output(K, given: dict, delta, prior, solver, fmt, out, teachers) -> bool:
    """Handle ``--teachers disjoint-nonprivate``; the options one setting does not take are refused by the
    one rule (:func:`darrm_opt.model.neighbours.check_setting_options`)."""
    from darrm_opt.model.neighbours import check_setting_options, cli_spelling

    check_setting_options(teachers.value, [k for k, v in given.items() if v is not None], cli_spelling,
                          m_needed=True)
    if teachers is not Teachers.disjoint_nonprivate:
        return False
    from darrm_opt.cli.solve_pate import solve_pate_output

    write_output(solve_pate_output(K, given["target_epsilon"], delta, prior, solver, fmt is OutputFormat.json), out)
    return True


def setting_document(params, base, teachers) -> dict:
    from darrm_opt.model.neighbours import setting_note

    return {"setting": setting_note(teachers.value, params.epsilon, params.teacher_delta).to_dict(),
            "baseline_unavailable": {k: base[k].reason for k, _ in BASELINES if k in base and not base[k]}}


def _setting_lines(params, base, teachers) -> str:
    doc = setting_document(params, base, teachers)
    lines = [f"— {dict(BASELINES)[k]} unavailable: {why}" for k, why in doc["baseline_unavailable"].items()]
    if teachers is not Teachers.shared:
        lines.append(f"teachers: {teachers.value}: {doc['setting']['note']}")
    return "".join(line + "\n" for line in lines)


def _errors(params, sol, base) -> dict:
    from darrm_opt.model.objective import expected_error

    errors = {"opt": sol.expected_error}
    for k, _ in BASELINES:
        errors[k] = expected_error(base[k].gamma, params.prior) if base.get(k) else None
    return errors


def solve_document(params, sol, base, seconds: float) -> dict:
    from darrm_opt.mechanisms import document_header

    return {
        **document_header(params),
        **params.canonical(),
        "solver": sol.solver,
        "mode": sol.mode,
        "gamma": list(sol.gamma),
        "certificate": sol.certificate.to_dict(),
        "baselines": {k: (list(base[k].gamma) if base.get(k) else None) for k, _ in BASELINES},
        "baseline_certificates": {k: (base[k].certificate.to_dict() if base.get(k) else None) for k, _ in BASELINES},
        "expected_error": _errors(params, sol, base),
        "iterations": sol.iterations,
        "active_constraints": sol.active_constraints,
        "objective_gap": sol.objective_gap,
        "seconds": seconds,
    }


def _table_text(params, sol, base, seconds: float, executor, reporter) -> str:
    from darrm_opt.cli.render import render_gamma_table
    from darrm_opt.release.table_file import certified_decimals

    progress = reporter.certify_progress
    shown, cert = certified_decimals(params, sol.gamma, DECIMALS, executor=executor, progress=progress,
                                     source=(sol.certificate, sol.sweep))
    columns = {"γ_opt": shown}
    for k, label in BASELINES:
        if base.get(k):
            columns[label] = certified_decimals(params, base[k].gamma, DECIMALS, unit=base[k].unit,
                                                source=(base[k].certificate, base[k].sweep),
                                                printed=base[k].printed, executor=executor, progress=progress)[0]
        else:
            columns[label] = ["—"] * (params.K + 1)
    labels = dict(zip(["opt", *(k for k, _ in BASELINES)], columns))
    errors = {labels[k]: v for k, v in _errors(params, sol, base).items()}
    return render_gamma_table(params, columns, errors, cert, seconds, sol.solver, sol.mode)
