"""Time of the certified privacy profile of a γ table against one certification sweep.

    python benchmarks/profile_time.py [--K 11,41,101] [--m 3] [--teacher-delta 1e-5] [--gamma opt|sub]

For each K: γ (the certified optimum, or γ_Sub), then one certification (``certify``: one exhaustive sweep
plus the exact re-check) and the profile (``privacy_profile``: the certificate's sweep plus the hull search).
Prints wall and CPU seconds of each, the number of sweeps (the certificate's and the profile's own passes),
the ratios profile/certify in wall and in CPU seconds (the profile includes the certification sweep), the
hull vertices and δ(mε) of the profile next to the table's δ. Numba's kernels are compiled (or loaded from
its cache) by a warm-up at K = 31 first, outside the timings.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from darrm_opt.certify.certificate import certify
from darrm_opt.model.baselines import gamma_sub
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve
from darrm_opt.privacy.profile import privacy_profile


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--K", default="11,41,101")
    ap.add_argument("--m", type=float, default=3.0)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--teacher-delta", type=float, default=1e-5)
    ap.add_argument("--gamma", choices=("opt", "sub"), default="opt")
    a = ap.parse_args()
    print(f"{'K':>4} {'γ':>4} {'certify wall':>12} {'cpu':>7} {'profile wall':>12} {'cpu':>7} {'sweeps':>6} "
          f"{'ratio':>6} {'cpu':>6} {'vertices':>8} {'δ(mε)':>12} {'table δ':>12}", flush=True)
    warm = Params(31, a.m, a.epsilon, a.teacher_delta)
    privacy_profile(warm, gamma_sub(31, a.m))  # compile / load the kernels outside the timings
    for K in (int(x) for x in a.K.split(",")):
        p = Params(K, a.m, a.epsilon, a.teacher_delta)
        g = np.array(solve(p).gamma) if a.gamma == "opt" else gamma_sub(K, a.m)
        _, cw, cc = timed(lambda: certify(p, g))  # noqa: B023
        prof, pw, pc = timed(lambda: privacy_profile(p, g))  # noqa: B023
        print(f"{K:>4} {a.gamma:>4} {cw:>12.2f} {cc:>7.2f} {pw:>12.2f} {pc:>7.2f} {prof.sweeps:>6} "
              f"{pw / cw:>6.2f} {pc / cc:>6.2f} {len(prof.vertices):>8} {prof.delta(p.m * p.epsilon):>12.6g} "
              f"{p.delta:>12.6g}", flush=True)


if __name__ == "__main__":
    main()
