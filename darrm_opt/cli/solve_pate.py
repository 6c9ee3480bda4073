"""``darrm-opt solve --teachers disjoint-nonprivate``: γ_opt for the PATE setting next to GNMax.

Kept apart from :mod:`darrm_opt.cli.solve` (the shared-data command) so that command stays small; the
output has the same shape: a table of γ(l) (rounded down, certified as printed) or the JSON document with
``gamma`` (K + 1 values), its certificate and its privacy profile (a table file ``verify`` reads).
"""

from __future__ import annotations

import json
import time


def pate_document(K: int, target_epsilon: float | None, delta: float | None, prior: str, solver: str) -> tuple:
    """Solve the PATE-setting LP and calibrate GNMax exactly at the same (ε, δ); return (params, sol, gnmax)."""
    from darrm_opt.errors import InvalidParameter
    from darrm_opt.model.neighbours import PateParams
    from darrm_opt.model.params import Prior
    from darrm_opt.optimize.pate_setting import solve_pate
    from darrm_opt.privacy.gnmax import calibrate_gnmax_one_bit

    if target_epsilon is None:
        raise InvalidParameter("target-epsilon", "--teachers disjoint-nonprivate needs the per-answer ε")
    params = PateParams(K=K, epsilon=target_epsilon, delta=0.0 if delta is None else delta,
                        prior=Prior.parse(prior))
    sol = solve_pate(params, solver=solver)
    cal = calibrate_gnmax_one_bit(params.epsilon, params.delta, params.K)
    return params, sol, cal


def pate_text(params, sol, cal, seconds: float) -> str:
    """The table view: γ_opt (certified as printed) and GNMax's γ at its exact calibration."""
    from rich.table import Table

    from darrm_opt.cli.render import fmt_error, recording_console
    from darrm_opt.optimize.pate_setting import certified_pair_decimals
    from darrm_opt.release.documents import gnmax_dict

    shown, cert = certified_pair_decimals(params, sol.gamma, 6)
    gn = gnmax_dict(params, cal)
    con = recording_console()
    con.print(f"DaRRM γ for K={params.K} non-private teachers on disjoint shards (PATE setting), each answer "
              f"(ε={params.epsilon:g}, δ={params.delta:.6g})-DP (prior {params.prior.spec}, solver {sol.solver}, "
              f"{seconds:.3f} s)", soft_wrap=True)
    t = Table(show_edge=False, pad_edge=False)
    for col in ("l", "γ_opt", f"GNMax σ={cal.sigma:.4f}"):
        t.add_column(col, justify="right")
    for l in range(params.K + 1):
        t.add_row(str(l), shown[l], f"{gn['gamma'][l]:.6f}")
    t.add_section()
    t.add_row(r"E\[error]", fmt_error(sol.expected_error), fmt_error(gn["expected_error"]))
    con.print(t)
    con.print(f"setting: {sol.note}", soft_wrap=True)
    con.print("GNMax's σ is the smallest for which the one bit it releases is exactly (ε, δ)-DP for these "
              "neighbours (exact-one-bit)", soft_wrap=True)
    con.print(f"certificate: CERTIFIED as printed: max privacy cost {cert.max_privacy_cost:.12g} <= bound "
              f"{cert.bound:.12g} over all {cert.pairs_checked} (l, l ± 1, output) rows "
              f"({cert.high_precision_checked} re-checked in interval arithmetic, 40 to 320 digits)", soft_wrap=True)
    return con.export_text()


def solve_pate_output(K: int, target_epsilon: float | None, delta: float | None, prior: str, solver: str,
                      as_json: bool) -> str:
    """The whole ``solve --teachers disjoint-nonprivate`` output as text."""
    t0 = time.perf_counter()
    params, sol, cal = pate_document(K, target_epsilon, delta, prior, solver)
    if as_json:
        from darrm_opt.privacy.pair_profile import pate_profile
        from darrm_opt.release.documents import pate_solve_document

        return json.dumps(pate_solve_document(params, sol, pate_profile(params, sol.gamma), cal), indent=2)
    return pate_text(params, sol, cal, time.perf_counter() - t0)
