"""``darrm-opt grid``: certified γ tables for many parameter sets."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from ..grid import parse_values, solve_grid
from ..params import Params
from .common import err_console, handle_errors, write_output
from .solve import Mode, OutputFormat, dask_executor


def register(app: typer.Typer) -> None:
    @app.command()
    def grid(
        K: str = typer.Option(..., "--K", "-K", help="odd K values: '11,21' or a range '11..31'"),
        m: str = typer.Option(..., "--m", help="m values: '1,2.5,3' or a range '1..7'"),
        epsilon: float = typer.Option(0.1, "--epsilon"),
        teacher_delta: float = typer.Option(1e-5, "--teacher-delta"),
        prior: str = typer.Option("paper", "--prior"),
        solver: str = typer.Option("highs", "--solver"),
        mode: Mode = typer.Option(Mode.lazy, "--mode"),
        fmt: OutputFormat = typer.Option(OutputFormat.table, "--format"),
        out: Optional[Path] = typer.Option(None, "--out"),
        quiet: bool = typer.Option(False, "--quiet", "-q"),
        dask_scheduler: Optional[str] = typer.Option(None, "--dask-scheduler",
                                                     help="one task per table on this Dask scheduler"),
    ) -> None:
        """Solve every (K, m) pair (m ≤ K); every table is certified. δ = 1 − (1 − Δ)^m for each m."""
        with handle_errors():
            t0 = time.perf_counter()
            Ks = parse_values("K", K, integer=True, odd=True)
            ms = parse_values("m", m)
            params = [Params(int(k), mm, epsilon=epsilon, teacher_delta=teacher_delta, prior=prior)
                      for k in Ks for mm in ms if mm <= k]
            if not params:
                from ..errors import InvalidParameter

                raise InvalidParameter("m", "no value satisfies m <= K for the given K")
            executor = dask_executor(dask_scheduler)

            def progress(done, total):
                if not quiet:
                    err_console.print(f"solved {done}/{total}", end="\r")

            sols = solve_grid(params, solver=solver, mode=mode.value, executor=executor, progress=progress)
            if fmt is OutputFormat.json:
                write_output(json.dumps([s.to_dict() for s in sols], indent=2), out)
                return
            console = Console(record=True, width=120, file=open("/dev/null", "w"))
            t = Table(title=f"{len(sols)} certified tables in {time.perf_counter() - t0:.1f} s")
            for col in ("K", "m", "δ", "E[error]", "max cost", "bound", "multisets", "seconds"):
                t.add_column(col.replace("[", r"\["), justify="right")
            for s in sols:
                c = s.certificate
                t.add_row(str(s.params.K), f"{s.params.m:g}", f"{s.params.delta:.3g}", f"{s.expected_error:.4f}",
                          f"{c.max_privacy_cost:.10f}", f"{c.bound:.10f}", f"{c.multisets_checked:,}",
                          f"{s.seconds:.2f}")
            console.print(t)
            write_output(console.export_text(), out)
