"""``darrm-opt grid``: certified γ tables for many parameter sets."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import err_console, handle_errors, write_output
from darrm_opt.cli.options import Mode, OutputFormat, dask_executor


def grid(
    K: str = typer.Option(..., "--K", "-K", help="odd K values: '11,21' or a range '11..31'"),
    m: str = typer.Option(..., "--m", help="m values: '1,2.5,3' or a range '1..7'"),
    epsilon: float = typer.Option(0.1, "--epsilon", help="each teacher's ε"),
    teacher_delta: float = typer.Option(1e-5, "--teacher-delta", help="each teacher's Δ"),
    prior: str = typer.Option("paper", "--prior", help="paper | iid-uniform:A,B | common-uniform:A,B"),
    solver: str = typer.Option("highs", "--solver", help="LP solver: highs | gurobi | cbc"),
    mode: Mode = typer.Option(Mode.lazy, "--mode", help="lazy (cutting planes) | full (every row)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
    dask_scheduler: Optional[str] = typer.Option(None, "--dask-scheduler",
                                                 help="one task per table on this Dask scheduler"),
) -> None:
    """Solve every (K, m) pair (m ≤ K); every table is certified. δ = 1 − (1 − Δ)^m for each m.

    \b
    Example:
      darrm-opt grid --K 11..21 --m 1..3
    """
    from darrm_opt.cli.render import render_grid
    from darrm_opt.errors import InvalidParameter
    from darrm_opt.model.params import Params, parse_values
    from darrm_opt.optimize.grid import solve_grid

    with handle_errors():
        t0 = time.perf_counter()
        Ks = parse_values("K", K, integer=True, odd=True)
        ms = parse_values("m", m)
        params = [Params(int(k), mm, epsilon=epsilon, teacher_delta=teacher_delta, prior=prior)
                  for k in Ks for mm in ms if mm <= k]
        if not params:
            raise InvalidParameter("m", "no value satisfies m <= K for the given K")

        def progress(done, total):
            if not quiet:
                err_console.print(f"solved {done}/{total} tables", soft_wrap=True)

        sols = solve_grid(params, solver=solver, mode=mode.value, executor=dask_executor(dask_scheduler),
                          progress=progress)
        if fmt is OutputFormat.json:
            write_output(json.dumps([s.to_dict() for s in sols], indent=2), out)
        else:
            write_output(render_grid(sols, time.perf_counter() - t0), out)
