"""Compiled scans of the structured sweep (numba), with a plain numpy twin that computes the same numbers.

One block of the structured sweep (:mod:`darrm_opt.certify.structured`) fixes the prefix sum s and the
count u3; with A = s − u3 and, for each v3, W = K − s − v3, it evaluates for all u2 ≤ A, v2 ≤ W

    M[u2, v3, v2] = σ T1[u2, (v2, v3)] − e^{mε} · min_{u1 ≤ A − u2, v1 ≤ W − v2} σ T2[u1, (v1, v3)]

(σ = ±1 picks the maximum or the minimum side). The numpy form builds padded arrays, two cumulative
minima and a gather (about 86 ns per element); the compiled form keeps one (A+1) × (W+1) prefix-minimum
buffer per v3 and fuses the rest into one pass. Both perform exactly the same float operations on each
entry (a sign flip, exact minima, one product and one subtraction; no fused multiply-add: numba does not
contract without ``fastmath``), so their results are bitwise equal; tests/test_sweep.py checks this.

Each scan returns the block maximum, its first position in (u2, v3, v2) row-major order, and every entry
above ``level`` as (u2, v3, v2, value) rows sorted in that order.
"""

from __future__ import annotations

import importlib.util
import os
import threading

import numpy as np

# numba is a dependency; the numpy twin is the reference and the fallback. It is imported (about 0.3-1 s)
# only when the compiled scan is first called, so commands that never reach the structured sweep (small K,
# errors, --help) do not pay for it. HAVE_NUMBA says whether the compiled scan will be used.
HAVE_NUMBA = not os.environ.get("DARRM_NO_NUMBA") and importlib.util.find_spec("numba") is not None
_compiled_lock = threading.Lock()
_scan_compiled = None


def column_offsets(Ks: int) -> np.ndarray:
    """Start of the v3-th column group of T1/T2 (columns ordered by v3, then y = 0..Ks − v3)."""
    sizes = Ks + 1 - np.arange(Ks + 1)
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


def scan_numpy(T1, T2, r0: int, A: int, Ks: int, E: float, sign: float, level: float):
    """The block scan with padded numpy arrays (the reference form)."""
    n = Ks + 1
    coff = column_offsets(Ks)
    v3 = np.repeat(np.arange(n), n - np.arange(n))
    y = np.arange(coff[-1] + 1) - coff[v3]
    colpos = v3 * n + y
    X1: np.ndarray = np.full((A + 1, n * n), -np.inf)
    X1[:, colpos] = sign * T1[r0 : r0 + A + 1]
    X2: np.ndarray = np.full((A + 1, n * n), np.inf)
    X2[:, colpos] = sign * T2[r0 : r0 + A + 1]
    X1 = X1.reshape(A + 1, n, n)
    X2 = X2.reshape(A + 1, n, n)
    PM = np.minimum.accumulate(np.minimum.accumulate(X2, axis=0), axis=2)
    vrev = Ks - np.arange(n)[:, None] - np.arange(n)[None, :]
    vrev = np.where(vrev >= 0, vrev, 0)
    R = np.take_along_axis(PM[::-1], np.broadcast_to(vrev, (A + 1, n, n)), axis=2)
    M = X1 - E * R
    k = int(M.argmax())
    fmax = float(M.ravel()[k])
    idx = np.flatnonzero(M.ravel() > level)
    u2, rest = np.divmod(idx, n * n)
    v3s, v2 = np.divmod(rest, n)
    above = np.stack([u2, v3s, v2], axis=1).astype(np.int64)
    pos = np.unravel_index(k, M.shape)
    return fmax, tuple(int(x) for x in pos), above, M.ravel()[idx].copy()


def _scan_impl(T1, T2, r0, A, Ks, E, sign, level, coff, out_idx, out_val):
    """Fused block scan (compiled by numba): returns (fmax, u2, v3, v2, n_above); fills the first
    min(n_above, len(out_val)) entries above ``level`` into out_idx/out_val in (v3, u2, v2) order."""
    pm = np.empty((A + 1, Ks + 1))
    fmax = -np.inf
    bu2 = bv3 = bv2 = 0
    cnt = 0
    cap = out_val.shape[0]
    for v3 in range(Ks + 1):
        W = Ks - v3
        c0 = coff[v3]
        for a in range(A + 1):
            for b in range(W + 1):
                x = sign * T2[r0 + a, c0 + b]
                if a > 0 and pm[a - 1, b] < x:
                    x = pm[a - 1, b]
                if b > 0 and pm[a, b - 1] < x:
                    x = pm[a, b - 1]
                pm[a, b] = x
        for u2 in range(A + 1):
            ra = A - u2
            for v2 in range(W + 1):
                val = sign * T1[r0 + u2, c0 + v2] - E * pm[ra, W - v2]
                if val >= fmax:  # ties: keep the first in (u2, v3, v2) order, as numpy's argmax does
                    if val > fmax or u2 < bu2 or (u2 == bu2 and v3 < bv3):
                        fmax = val
                        bu2, bv3, bv2 = u2, v3, v2
                if val > level:
                    if cnt < cap:
                        out_idx[cnt, 0] = u2
                        out_idx[cnt, 1] = v3
                        out_idx[cnt, 2] = v2
                        out_val[cnt] = val
                    cnt += 1
    return fmax, bu2, bv3, bv2, cnt


def numba_module():
    """The numba module, imported on the first call (None when HAVE_NUMBA is off or it cannot be imported;
    the latter turns HAVE_NUMBA off so that the numpy twins are used from then on)."""
    global HAVE_NUMBA
    if not HAVE_NUMBA:
        return None
    try:
        import numba
    except ImportError:  # pragma: no cover - a broken installation
        HAVE_NUMBA = False
        return None
    return numba


def _compiled_kernel():
    """:func:`_scan_impl` compiled by numba on the first call (None without numba)."""
    global _scan_compiled
    if _scan_compiled is not None:
        return _scan_compiled
    with _compiled_lock:
        numba = numba_module() if _scan_compiled is None else None
        if numba is not None:
            _scan_compiled = numba.njit(nogil=True, cache=True)(_scan_impl)
    return _scan_compiled


def scan_compiled(T1, T2, r0: int, A: int, Ks: int, E: float, sign: float, level: float):
    """The block scan in one compiled pass; same results as :func:`scan_numpy`."""
    kernel = _compiled_kernel()
    assert kernel is not None  # only called when numba is present
    coff = column_offsets(Ks)
    cap = 64
    while True:
        out_idx = np.empty((cap, 3), dtype=np.int64)
        out_val = np.empty(cap)
        fmax, u2, v3, v2, cnt = kernel(T1, T2, r0, A, Ks, float(E), float(sign), float(level), coff,
                                       out_idx, out_val)
        if cnt <= cap:
            break
        cap = cnt  # rare (a separating sweep far from the optimum): run again with room for all
    order = np.lexsort((out_idx[:cnt, 2], out_idx[:cnt, 1], out_idx[:cnt, 0]))  # (u2, v3, v2) row-major
    return float(fmax), (int(u2), int(v3), int(v2)), out_idx[:cnt][order], out_val[:cnt][order]


def block_scan(T1, T2, r0: int, A: int, Ks: int, E: float, sign: float, level: float):
    """The compiled scan where numba is installed, else the numpy one."""
    fn = scan_compiled if HAVE_NUMBA and _compiled_kernel() is not None else scan_numpy
    return fn(T1, T2, r0, A, Ks, E, sign, level)
