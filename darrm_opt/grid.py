"""Solving many parameter sets: warm-started locally, one task each on a Dask cluster."""

from __future__ import annotations

from .errors import InvalidParameter
from .optimize import Solution, solve
from .params import Params


def parse_values(name: str, text: str, *, integer: bool = False, odd: bool = False) -> list[float]:
    """Parse ``"1,3,5"`` or ranges ``"11..31"`` (step 1, or 2 for odd values) into a sorted list."""
    out: set[float] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if ".." in part:
                lo_s, hi_s = part.split("..", 1)
                lo, hi = int(lo_s), int(hi_s)
                if hi < lo:
                    raise ValueError
                out.update(v for v in range(lo, hi + 1) if not odd or v % 2 == 1)
            else:
                v = float(part)
                if integer and not v.is_integer():
                    raise ValueError
                out.add(int(v) if integer else v)
        except ValueError:
            raise InvalidParameter(name, "must be a comma-separated list of numbers or ranges A..B", part) from None
    if not out:
        raise InvalidParameter(name, "needs at least one value", text)
    return sorted(out)


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
