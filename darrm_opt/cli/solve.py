"""``darrm-opt solve`` and ``darrm-opt verify``."""

from __future__ import annotations

import json
import os
import time
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from ..certify import Certificate, certify
from ..objective import expected_error
from ..optimize import solve as solve_gamma
from ..params import Params
from ..tables import baseline_tables, certified_decimals, load_table
from .common import ProgressReporter, handle_errors, write_output


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


class Mode(str, Enum):
    lazy = "lazy"
    full = "full"


def dask_executor(address: Optional[str]):
    """The sweep executor for ``--dask-scheduler`` (or DARRM_DASK_SCHEDULER); None runs locally."""
    address = address or os.environ.get("DARRM_DASK_SCHEDULER") or None
    if not address:
        return None
    from ..distributed import DaskSweepExecutor

    return DaskSweepExecutor(address)


def certificate_line(cert: Certificate) -> str:
    status = "CERTIFIED" if cert.certified else "VIOLATED"
    rel = "<=" if cert.certified else ">"
    return (
        f"certificate: {status}: max privacy cost {cert.max_privacy_cost:.12g} {rel} bound {cert.bound:.12g} "
        f"over {cert.multisets_checked:,} corner multisets (worst multiset {cert.worst_multiset}; "
        f"{cert.high_precision_checked} re-checked in {40}-digit arithmetic)"
    )


def render_table(params: Params, columns: dict[str, list[str]], errors: dict, cert: Certificate,
                 seconds: float, solver: str, mode: str) -> str:
    console = Console(record=True, width=120, file=open(os.devnull, "w"), highlight=False)
    console.print(
        f"DaRRM γ for K={params.K} teachers, each (ε={params.epsilon:g}, Δ={params.teacher_delta:g})-DP, "
        f"released as a (mε={params.m * params.epsilon:g}, δ={params.delta:.6g})-DP majority "
        f"(m={params.m:g}, prior {params.prior.spec}, solver {solver}, {mode} mode, {seconds:.3f} s)",
        soft_wrap=True,
    )
    t = Table(show_edge=False, pad_edge=False)
    t.add_column("l", justify="right", min_width=8)
    for name in columns:
        t.add_column(name, justify="right")
    for l in range(params.K + 1):
        t.add_row(str(l), *(col[l] for col in columns.values()))
    t.add_section()
    t.add_row(r"E\[error]", *(f"{errors[k]:.4f}" if errors.get(k) is not None else "—" for k in errors))
    console.print(t)
    console.print("values are rounded down; each printed column is certified (mε, δ)-DP as printed")
    console.print(certificate_line(cert), soft_wrap=True)
    return console.export_text()


def register(app: typer.Typer) -> None:
    @app.command()
    def solve(
        K: int = typer.Option(..., "--K", "-K", help="number of teachers (odd)"),
        m: float = typer.Option(..., "--m", help="privacy allowance, 1 <= m <= K"),
        epsilon: float = typer.Option(0.1, "--epsilon", help="each teacher's ε"),
        teacher_delta: float = typer.Option(1e-5, "--teacher-delta", help="each teacher's Δ"),
        delta: Optional[float] = typer.Option(None, "--delta", help="target δ (default 1 − (1 − Δ)^m)"),
        prior: str = typer.Option("paper", "--prior", help="paper | iid-uniform:A,B | common-uniform:A,B"),
        solver: str = typer.Option("highs", "--solver", help="highs | gurobi | cbc"),
        mode: Mode = typer.Option(Mode.lazy, "--mode", help="lazy (cutting planes) | full (every row)"),
        fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
        out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
        baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="also compute the baselines"),
        dask_scheduler: Optional[str] = typer.Option(None, "--dask-scheduler",
                                                     help="run sweeps on this Dask scheduler"),
    ) -> None:
        """Compute the certified optimal γ and compare it with the baselines."""
        with handle_errors():
            t0 = time.perf_counter()
            params = Params(K=K, m=m, epsilon=epsilon, teacher_delta=teacher_delta, delta=delta, prior=prior)
            executor = dask_executor(dask_scheduler)
            reporter = ProgressReporter(quiet)
            try:
                sol = solve_gamma(params, solver=solver, mode=mode.value, progress=reporter, executor=executor)
                base = baseline_tables(params, executor=executor) if baselines else {}
            finally:
                reporter.close()
            prior_ = params.prior
            errors = {"opt": sol.expected_error}
            for k in ("sub", "dsub", "const"):
                errors[k] = expected_error(base[k].gamma, prior_) if base.get(k) else None
            if fmt is OutputFormat.json:
                doc = {
                    **params.canonical(),
                    "solver": sol.solver,
                    "mode": sol.mode,
                    "gamma": list(sol.gamma),
                    "certificate": sol.certificate.to_dict(),
                    "baselines": {k: (list(base[k].gamma) if base.get(k) else None) for k in ("sub", "dsub", "const")},
                    "baseline_certificates": {
                        k: (base[k].certificate.to_dict() if base.get(k) else None) for k in ("sub", "dsub", "const")
                    },
                    "expected_error": errors,
                    "iterations": sol.iterations,
                    "active_constraints": sol.active_constraints,
                    "seconds": time.perf_counter() - t0,
                }
                text = json.dumps(doc, indent=2)
            else:
                shown, cert = certified_decimals(params, sol.gamma, 6, executor=executor)
                columns = {"γ_opt": shown}
                for k, label in (("sub", "γ_Sub"), ("dsub", "γ_DSub"), ("const", "γ_const")):
                    if base.get(k):
                        columns[label] = certified_decimals(params, base[k].gamma, 6, executor=executor)[0]
                    else:
                        columns[label] = ["—"] * (params.K + 1)
                labels = dict(zip(["opt", "sub", "dsub", "const"], columns))
                text = render_table(params, columns, {labels[k]: v for k, v in errors.items()}, cert,
                                    time.perf_counter() - t0, sol.solver, sol.mode)
            write_output(text, out)

    @app.command()
    def verify(
        file: Path = typer.Argument(..., help="a γ table JSON file (K, m, epsilon, teacher_delta, delta, gamma)"),
        fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
        quiet: bool = typer.Option(False, "--quiet", "-q"),
        dask_scheduler: Optional[str] = typer.Option(None, "--dask-scheduler"),
    ) -> None:
        """Recompute the privacy certificate of any γ table; exit 1 if it violates the bound."""
        with handle_errors():
            params, gamma = load_table(file)
            reporter = ProgressReporter(quiet)
            try:
                cert = certify(params, gamma, executor=dask_executor(dask_scheduler),
                               progress=lambda d, t, w: reporter("certify-progress", done=d, total=t, worst=w))
            finally:
                reporter.close()
            if fmt is OutputFormat.json:
                write_output(json.dumps({**params.canonical(), "certificate": cert.to_dict()}, indent=2), None)
            else:
                write_output(certificate_line(cert), None)
            if not cert.certified:
                from .common import err_console

                err_console.print(
                    f"[bold red]violation:[/] multiset {cert.worst_multiset} of corners {cert.corners} "
                    f"has privacy cost {cert.max_privacy_cost:.12g} > bound {cert.bound:.12g}"
                )
                raise typer.Exit(1)
