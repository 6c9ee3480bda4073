"""``darrm-opt solve``: the certified optimal γ next to the certified baselines."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import ProgressReporter, handle_errors, write_output
from darrm_opt.cli.options import Mode, OutputFormat, Teachers, dask_executor
from darrm_opt.release.documents import BASELINES

#: decimals of the table view
DECIMALS = 6


def solve(
    K: int = typer.Option(..., "--K", "-K", help="number of teachers K (odd; even with --teachers "
                                                   "disjoint-nonprivate: a tie is a fair coin)"),
    m: Optional[float] = typer.Option(None, "--m", help="privacy allowance, 1 <= m <= K: each answer is "
                                      "(m·ε, δ)-DP (shared/disjoint-private)"),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="each teacher's ε (default 0.1; not with "
                                            "--teachers disjoint-nonprivate)"),
    teacher_delta: Optional[float] = typer.Option(None, "--teacher-delta", help="each teacher's Δ (default 1e-5; "
                                                  "not with --teachers disjoint-nonprivate)"),
    delta: Optional[float] = typer.Option(None, "--delta", help="target δ (default 1 − (1 − Δ)^m)"),
    prior: str = typer.Option("paper", "--prior", help="paper | iid-uniform:A,B | common-uniform:A,B"),
    solver: str = typer.Option("highs", "--solver", help="LP solver: highs | gurobi | cbc"),
    mode: Mode = typer.Option(Mode.lazy, "--mode", help="lazy (cutting planes) | full (every row)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="also compute the baselines"),
    dask_scheduler: Optional[str] = typer.Option(None, "--dask-scheduler", help="run sweeps on this Dask scheduler (tcp://HOST:PORT)"),
    teachers: Optional[Teachers] = typer.Option(None, "--teachers",
                                                help="shared (default) | disjoint-private | disjoint-nonprivate"),
    target_epsilon: Optional[float] = typer.Option(None, "--target-epsilon",
                                                   help="per-answer ε (--teachers disjoint-nonprivate only)"),
    classes: Optional[int] = typer.Option(None, "--classes",
                                          help="number of classes C (multi-class; --teachers disjoint-nonprivate)"),
    subsample: Optional[int] = typer.Option(None, "--subsample",
                                            help="m: each answer reads a uniform random m of the K teachers, the "
                                                 "table solved for m and its cost amplified (--teachers "
                                                 "disjoint-nonprivate, 0/1 votes)"),
) -> None:
    """Compute the certified optimal γ and compare it with the baselines.

    γ(l) is the probability of releasing the majority when l teachers vote 1 (else a fair coin); each
    answer is (m·ε, δ)-DP when every teacher is (ε, Δ)-DP.

    \b
    Examples:
      darrm-opt solve --K 11 --m 3
      darrm-opt solve --K 11 --teachers disjoint-nonprivate \\
          --target-epsilon 0.27 --delta 3e-4
    """
    from darrm_opt.mechanisms import kind_for
    from darrm_opt.model.neighbours import check_setting_options, cli_spelling

    with handle_errors():
        kind = kind_for(teachers and teachers.value, classes)  # the registry: which kind these flags ask for
        given = {"m": m, "epsilon": epsilon, "teacher_delta": teacher_delta, "target_epsilon": target_epsilon}
        setting = kind.setting(teachers and teachers.value)
        check_setting_options(setting, [k for k, v in given.items() if v is not None], cli_spelling,
                              m_needed=not kind.labels, target_needed=not kind.labels)
        kind.refuse_subsample({"subsample": subsample})
        view = solve_view(kind) if subsample is None else _generic_view
        view(kind, K=K, m=m, epsilon=epsilon, teacher_delta=teacher_delta, delta=delta, prior=prior, solver=solver,
             mode=mode, fmt=fmt, out=out, quiet=quiet, baselines=baselines, dask_scheduler=dask_scheduler,
             teachers=setting, target_epsilon=target_epsilon, classes=classes, subsample=subsample)


def darrm_view(kind, *, K, m, epsilon, teacher_delta, delta, prior, solver, mode, fmt, out, quiet,  # noqa: ANN001
                baselines, dask_scheduler, teachers, **_: object) -> None:
    """γ_opt of DaRRM next to the certified baselines (table view: every printed column certified)."""
    from darrm_opt.certify.rounded import wide_margin
    from darrm_opt.model.params import Params
    from darrm_opt.optimize.optimizer import solve as solve_gamma
    from darrm_opt.release.table_file import baseline_tables

    t0 = time.perf_counter()
    params = Params(K=K, m=m, epsilon=0.1 if epsilon is None else epsilon,
                    teacher_delta=1e-5 if teacher_delta is None else teacher_delta, delta=delta, prior=prior)
    executor = dask_executor(dask_scheduler)
    reporter = ProgressReporter(quiet)
    try:
        wide = wide_margin(params, DECIMALS) if fmt is OutputFormat.table else None
        reporter.phase("finding γ_opt", sweeps="sweeping")  # the sweep lines of logs as before: "sweeping: ..."
        sol = solve_gamma(params, solver=solver, mode=mode.value, progress=reporter, executor=executor, wide=wide,
                          front=fmt is OutputFormat.json)  # the profile is read off the certifying sweep
        base: dict = {}
        if baselines:
            reporter.phase("certifying the baselines")
            base = baseline_tables(params, executor=executor, progress=reporter.certify_progress, wide=wide,
                                   decimals=DECIMALS if fmt is OutputFormat.table else None)
        text = _output(params, sol, base, fmt, t0, executor, reporter, Teachers(teachers))
    finally:
        reporter.close()
    write_output(text, out)


def pate_view(kind, *, K, delta, prior, solver, fmt, out, target_epsilon, **_: object) -> None:  # noqa: ANN001
    """γ_opt in the PATE setting next to GNMax calibrated exactly at the same (ε, δ)."""
    from darrm_opt.cli.solve_pate import solve_pate_output

    write_output(solve_pate_output(K, target_epsilon, delta, prior, solver, fmt is OutputFormat.json), out)


def multiclass_view(kind, *, K, classes, teachers, target_epsilon, delta, prior, solver, fmt, out,  # noqa: ANN001
                     baselines, **_: object) -> None:
    """Multi-class γ_opt next to GNMax and Confident-GNMax at the same (ε, δ)."""
    from darrm_opt.cli.solve_multiclass import solve_multiclass_command

    solve_multiclass_command(K=K, classes=classes, teachers=teachers, target_epsilon=target_epsilon, delta=delta,
                             prior=prior, solver=solver, fmt=fmt, out=out, baselines=baselines)


def _generic_view(kind, *, K, m, epsilon, teacher_delta, delta, prior, solver, fmt, out, quiet,  # noqa: ANN001
                  teachers, target_epsilon, classes, subsample=None, **_: object) -> None:
    """Any kind without a view of its own, and a table on subsampled teachers: its certified table, as a document
    or its verdict and values."""
    from darrm_opt.mechanisms import document_header

    fields = {"K": K, "m": m, "epsilon": epsilon, "teacher_delta": teacher_delta, "delta": delta, "prior": prior,
              "teachers": teachers, "target_epsilon": target_epsilon, "classes": classes, "subsample": subsample}
    params = kind.params_from({k: v for k, v in fields.items() if v is not None})
    reporter = ProgressReporter(quiet)
    try:
        solved = kind.solve(params, solver=solver, teachers=teachers, progress=reporter)
    finally:
        reporter.close()
    table = solved.table
    if fmt is OutputFormat.json:
        doc = {**document_header(params), **params.canonical(), "teachers": table.teachers, "id": table.id,
               "gamma": list(table.gamma), "certificate": table.certificate_dict(),
               "privacy_profile": None if table.profile is None else table.profile.to_dict(),
               "expected_error": table.expected_error}
        return write_output(json.dumps(doc, indent=2), out)
    lines = [f"{kind.summary}: {kind.describe(params)}", kind.verdict_line(params, table.certificate),
             "γ = " + ", ".join(f"{g:.6f}" for g in table.gamma), f"expected error {table.expected_error:.4f}"]
    write_output("\n".join(lines) + "\n", out)


def solve_view(kind) -> Callable[..., None]:  # noqa: ANN001 - a Mechanism
    """The view of ``solve`` that ``kind`` names (its ``solve_view``, "module:function"), else the generic
    view."""
    if kind.solve_view is None:
        return _generic_view
    import importlib

    module, _, name = kind.solve_view.partition(":")
    return getattr(importlib.import_module(module), name)


def _output(params, sol, base, fmt: OutputFormat, t0: float, executor, reporter, teachers) -> str:
    """The JSON document (with the table's privacy profile) or the table view (printed columns certified)."""
    if fmt is OutputFormat.json:
        from darrm_opt.privacy.profile import privacy_profile
        from darrm_opt.release.documents import darrm_solve_document

        reporter.phase("computing the privacy profile")
        known = (sol.certificate, sol.sweep) if sol.sweep is not None else None  # the optimiser's last sweep
        profile = privacy_profile(params, sol.gamma, executor=executor, progress=reporter, certified=known)
        doc = darrm_solve_document(params, sol, base, time.perf_counter() - t0, profile, teachers.value)
        return json.dumps(doc, indent=2)
    reporter.phase("certifying the printed columns")
    text = _table_text(params, sol, base, time.perf_counter() - t0, executor, reporter)
    return text + _setting_lines(params, base, teachers)


def _setting_lines(params, base, teachers) -> str:
    from darrm_opt.release.documents import setting_document

    doc = setting_document(params, base, teachers.value)
    lines = [f"— {dict(BASELINES)[k]} unavailable: {why}" for k, why in doc["baseline_unavailable"].items()]
    if teachers is not Teachers.shared:
        lines.append(f"teachers: {teachers.value}: {doc['setting']['note']}")
    return "".join(line + "\n" for line in lines)


def _table_text(params, sol, base, seconds: float, executor, reporter) -> str:
    from darrm_opt.cli.render import render_gamma_table
    from darrm_opt.release.documents import solve_errors
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
    errors = {labels[k]: v for k, v in solve_errors(params, sol, base).items()}
    return render_gamma_table(params, columns, errors, cert, seconds, sol.solver, sol.mode)
