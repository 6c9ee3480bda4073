"""``darrm-opt solve --classes C --teachers disjoint-nonprivate --target-epsilon E``: multi-class DaRRM.

Not a command of its own: :func:`darrm_opt.cli.solve.solve` routes here when ``--classes`` is given.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from darrm_opt.cli.common import write_output
from darrm_opt.cli.options import OutputFormat
from darrm_opt.errors import InvalidParameter

TEACHERS = ("disjoint-nonprivate",)
DECIMALS = 9


def solve_multiclass_command(
    *, K: int, classes: int, teachers: str | None, target_epsilon: float | None, delta: float | None,
    prior: str, solver: str, fmt: OutputFormat, out: Path | None, baselines: bool,
) -> None:
    """Solve, certify and print a multi-class table (and GNMax at the same (ε, δ) unless --no-baselines).
    Raises domain errors; the caller's ``handle_errors`` turns them into exit codes."""
    from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior
    from darrm_opt.optimize.multiclass import solve_multiclass
    from darrm_opt.privacy.pair_profile import multiclass_profile
    from darrm_opt.release.documents import multiclass_comparison, multiclass_solve_document

    t0 = time.perf_counter()
    if (teachers or "disjoint-nonprivate") not in TEACHERS:
        raise InvalidParameter("teachers", f"with --classes must be one of {', '.join(TEACHERS)}", teachers)
    if target_epsilon is None:
        raise InvalidParameter("target-epsilon", "is required with --classes (the per-answer ε)")
    params = MulticlassParams(K=K, C=classes, epsilon=target_epsilon, delta=0.0 if delta is None else delta,
                              prior=MulticlassPrior.parse(prior))
    sol = solve_multiclass(params, solver=solver)
    comparison = multiclass_comparison(params, sol.expected_error) if baselines else None
    if fmt is OutputFormat.json:
        profile = multiclass_profile(params, sol.gamma)  # exact δ(ε′) for every ε′, for exact composition
        doc = multiclass_solve_document(params, sol, profile, comparison, time.perf_counter() - t0)
        text = json.dumps(doc, indent=2)
    else:
        text = _table_text(params, sol, comparison, time.perf_counter() - t0)
    write_output(text, out)


def _table_text(params, sol, comparison: dict | None, seconds: float) -> str:
    from darrm_opt.certify.multiclass import round_down_certified

    shown, cert = round_down_certified(params, sol.gamma, DECIMALS)
    lines = [
        f"multi-class DaRRM, K={params.K} teachers (disjoint, non-private), C={params.C} classes, "
        f"per-answer (ε, δ) = ({params.epsilon:g}, {params.delta:g}), prior {params.prior.spec}",
        f"expected accuracy {sol.expected_accuracy:.10f}   ({sol.pair_types} pair types, {sol.rows} LP rows, "
        f"solver {sol.solver}, {seconds:.2f} s)",
        f"certificate of the {DECIMALS}-decimal table below: "
        + ("CERTIFIED" if cert.certified else f"NOT CERTIFIED ({cert.reason})")
        + f", max divergence {cert.max_hockey_stick:.6g} <= δ over {cert.types_checked} ordered types, "
        f"{cert.exact_checked} re-checked exactly",
    ]
    if comparison is not None:
        gn = comparison["gnmax_error"]
        lines.append(f"expected error: DaRRM {comparison['darrm_error']:.4g}   GNMax "
                     + (f"{gn:.4g} (σ = {comparison['gnmax_sigma']:.6g})" if gn is not None else "n/a (δ = 0)"))
    lines.append("gap g   γ(g)")
    for g, (val, ok) in enumerate(zip(shown, sol.reachable)):
        lines.append(f"{g:5d}   {val:.{DECIMALS}f}" if ok else f"{g:5d}   (unreachable: {val:.{DECIMALS}f})")
    return "\n".join(lines)
