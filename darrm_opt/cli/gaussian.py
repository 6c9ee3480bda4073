"""``darrm-opt gaussian``: calibrate a Gaussian mean release (PCA-PATE / autoencoded PATE) and write its table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import handle_errors, write_output
from darrm_opt.cli.options import OutputFormat


def gaussian(
    queries: int = typer.Option(..., "--queries", help="N: how many answers the total budget must cover"),
    epsilon: float = typer.Option(..., "--epsilon", help="total ε of the N answers"),
    delta: float = typer.Option(..., "--delta", help="total δ of the N answers"),
    K: int = typer.Option(..., "--K", help="number of teachers"),
    dim: Optional[int] = typer.Option(None, "--dim", help="l: the length of each released vector"),
    eigenvalues: Optional[Path] = typer.Option(
        None, "--eigenvalues", help=".npy of the public PCA eigenvalues: l chosen by eq. 7 (instead of --dim)"),
    radius: float = typer.Option(1.0, "--radius", help="clip radius R of each teacher's vector (L2)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json (the table document)"),
    out: Optional[Path] = typer.Option(None, "--out", help="write here instead of stdout"),
) -> None:
    """Calibrate a Gaussian mean release of teachers' vectors (PCA-PATE, autoencoded PATE).

    σ for N answers within a total (ε, δ) by exact composition (the paper's eq. 15 σ beside it), the
    lattice and discrete noise of the release, and its certified table (--format json: a table file for
    darrm-opt aggregate).

    \b
    Example:
      darrm-opt gaussian --queries 80 --epsilon 8 --delta 1e-3 --K 8 --dim 16 \\
          --format json --out means.json
    """
    import numpy as np

    from darrm_opt.errors import TableFileError
    from darrm_opt.mechanisms import mechanism
    from darrm_opt.mechanisms.gaussian_mean import gaussian_mean_table
    from darrm_opt.privacy.gaussian_mean import calibrate
    from darrm_opt.release.documents import gaussian_document

    with handle_errors():
        lam = None
        if eigenvalues is not None:
            try:
                lam = np.load(eigenvalues, allow_pickle=False)
            except (OSError, ValueError, EOFError) as exc:
                raise TableFileError(f"cannot read eigenvalues file {str(eigenvalues)!r}: {exc}") from None
        cal = calibrate(queries, epsilon, delta, K=K, radius=radius, dim=dim, eigenvalues=lam)
        table = gaussian_mean_table(cal.params)
        if fmt is OutputFormat.json:
            write_output(json.dumps(gaussian_document(table, cal), indent=2), out)
            return
        m = mechanism(table.kind)
        lines = [f"{m.summary}: {m.describe(table.params)}", m.verdict_line(table.params, table.certificate),
                 f"{queries} answers within (ε, δ) = ({epsilon:g}, {delta:.3g}):",
                 f"  σ exact (continuous Gaussian, exact composition) {cal.sigma_exact:.6g}",
                 f"  σ eq. 15 (RDP, the paper)                        {cal.sigma_eq15:.6g}  "
                 f"({cal.ratio:.4f}× the exact)",
                 f"  σ released (lattice {table.params.lattice!r}, noise {table.params.noise})  {cal.sigma:.6g}; "
                 f"verified ε of the {queries} answers {cal.epsilon_spent:.6g}"
                 + ("" if cal.epsilon_ledger is None else f" (ledger's PLD: {cal.epsilon_ledger:.6g})"),
                 f"table id {table.id}"]
        write_output("\n".join(lines) + "\n", out)
