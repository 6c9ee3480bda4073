"""Solving many parameter sets: warm-started locally, one task each on a Dask cluster."""

from __future__ import annotations

from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import Solution, solve


def _solve_one(args):
    params, solver, mode = args
    return solve(params, solver=solver, mode=mode)


def solve_grid(params_list: list[Params], *, solver: str = "highs", mode: str = "lazy", executor=None,
               progress=None, warm_start: bool = True) -> list[Solution]:
    """Solve every parameter set; results in input order, each certified.

    Locally the sets are solved in order of (K, corner set, m) and each lazy solve is seeded with the
    active set of the previous one of the same K and corner set (a nearby problem); with a Dask
    ``executor`` each set is one task."""
    results: list[Solution | None] = [None] * len(params_list)
    if executor is not None:
        for i, sol in executor.map_solves(_solve_one, [(p, solver, mode) for p in params_list]):
            results[i] = sol
            if progress:
                progress(sum(r is not None for r in results), len(params_list))
        return results  # type: ignore[return-value]
    order = sorted(range(len(params_list)), key=lambda i: (params_list[i].K, params_list[i].pure, params_list[i].m))
    prev: Solution | None = None
    for done, i in enumerate(order, start=1):
        p = params_list[i]
        seed = None
        if warm_start and prev is not None and prev.params.K == p.K and prev.params.pure == p.pure:
            seed = prev.active_set
        sol = solve(p, solver=solver, mode=mode, seed_multisets=seed)
        results[i] = prev = sol
        if progress:
            progress(done, len(params_list))
    return results  # type: ignore[return-value]
