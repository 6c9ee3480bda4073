"""The structured sweep's points that can be a maximum at some slope x ≥ 1, kept for all slopes at once.

A block of the structured sweep (:mod:`darrm_opt.certify.kernels`) gives, for each (u2, v3, v2), the point

    t = σ T1[u2, (v2, v3)],    p = PM[A − u2, W − v2] = min_{u1 ≤ A − u2, v1 ≤ W − v2} σ T2[u1, (v1, v3)],

and the multi-slope sweep's value at slope x is fl(t − fl(x p)), the block scan's float operations. A point
j can be dropped for all x ≥ 1 when another point r is certain to beat it there:

* by a margin: p_r ≤ fl(p_j − S) and fl(t_r − p_r) > fl(fl(t_j − p_j) + S) with S = 64 u M (|t|, |p| ≤ M,
  u = 2⁻⁵³). Then (t_r − x p_r) − (t_j − x p_j) > 57 u M + 62 u M (x − 1) exceeds the rounding of both
  float values, ≤ u M (1 + 2.01 x) each, so r's float value is strictly larger at every x ≥ 1;
* weakly: p_r ≤ p_j, t_r ≥ t_j and r comes first in the sweep's order (s, u3, u2, v3, v2). Float rounding
  is monotone, so r's value is never below j's, and r wins a tie, as the sweep's first-argmax rule does.

Both relations chain (a point dropped for r, r dropped for r′: r′ beats the point), so the maximum over the
kept points and its first argmax are, bit for bit, those of the sweep at every x ≥ 1. The compiled kernel
keeps, per (s, sign), the points of each row (u2, v3) that no earlier point of the row and no point of the
staircase (the Pareto front of earlier blocks, passed in) drops; its partner (u1, v1) — the first argmin of
the rectangle in row-major order, as :meth:`StructuredSweepProblem._partner` picks it — is tracked with
the prefix minimum. The numpy twin keeps each block's margin front and finds partners by argmin.
"""

from __future__ import annotations

import threading

import numpy as np

from darrm_opt.certify.kernels import HAVE_NUMBA, column_offsets, numba_module

#: the drop margin S in units of u·M (see the module docstring)
MARGIN_ULPS = 64.0


def drop_margin(M: float) -> float:
    """S = 64 u M for points with |t|, |p| ≤ M (a tiny positive floor when M = 0)."""
    return MARGIN_ULPS * 2.0**-53 * max(M, 1e-300)


def _prefix_min(T2, r0, A, W, c0, sign, pm, pi):
    """pm[a, b] = min σT2 over [0, a] × [0, b] of the v3 group at column c0 (value updated only on a strict
    decrease, as the block scan does), with pi[a, b] = u1 (W + 1) + v1 of the first argmin in row-major
    order (so comparing pi compares (u1, v1) lexicographically)."""
    for a in range(A + 1):
        for b in range(W + 1):
            x = sign * T2[r0 + a, c0 + b]
            ix = a * (W + 1) + b
            if a > 0:
                y, iy = pm[a - 1, b], pi[a - 1, b]
                if y < x or (y == x and iy < ix):
                    x, ix = (y if y < x else x), iy
            if b > 0:
                y, iy = pm[a, b - 1], pi[a, b - 1]
                if y < x or (y == x and iy < ix):
                    x, ix = (y if y < x else x), iy
            pm[a, b], pi[a, b] = x, ix


def _count_le(arr, n, value, start):
    """Number of the first n entries of the sorted ``arr`` that are ≤ value, known to be ≥ ``start``
    (exponential then binary search from ``start``: cheap when the answer moves little from row to row)."""
    if start >= n or arr[start] > value:
        return start
    lo, step = start, 1  # arr[lo] <= value
    hi = lo + 1
    while hi < n and arr[hi] <= value:
        lo, step = hi, 2 * step
        hi = lo + step
    hi = min(hi, n)
    lo += 1
    while lo < hi:
        mid = (lo + hi) // 2
        if arr[mid] <= value:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _row_points(T1, r, ra, W, c0, sign, S, pm, pi, st_p, st_q, st_t, at, out_i, out_f, cnt):
    """Row (u2, v3) = at[1:] of block u3 = at[0], point by point: kept unless an earlier point of the row
    (margin: running max of fl(t − p) over those with p ≤ fl(p_j − S); weak: running max of t) or a
    staircase point drops it. Appends the kept ones from position ``cnt`` on; returns the new count."""
    cap, nst = out_f.shape[0], st_p.shape[0]
    i, qrun, trun = 0, -np.inf, -np.inf
    for v2 in range(W + 1):
        p = pm[ra, W - v2]
        t = sign * T1[r, c0 + v2]
        q = t - p
        lim = p - S
        while i < v2 and pm[ra, W - i] <= lim:
            qi = sign * T1[r, c0 + i] - pm[ra, W - i]
            if qi > qrun:
                qrun = qi
            i += 1
        dropped = qrun > q + S or trun >= t
        if t > trun:
            trun = t
        if dropped:
            continue
        if nst > 0:
            k = _count_le(st_p, nst, lim, 0)
            if k > 0 and st_q[k - 1] > q + S:
                continue
            k = _count_le(st_p, nst, p, k)
            if k > 0 and st_t[k - 1] >= t:
                continue
        if cnt < cap:
            out_i[cnt, 0], out_i[cnt, 1], out_i[cnt, 2], out_i[cnt, 3] = at[0], at[1], at[2], v2
            out_i[cnt, 4], out_i[cnt, 5] = divmod(pi[ra, W - v2], W + 1)
            out_f[cnt, 0], out_f[cnt, 1] = t, p
        cnt += 1
    return cnt


def _front_impl(T1, T2, offsets, u3_lo, u3_hi, s, Ks, sign, S, coff, st_p, st_q, st_t, out_i, out_f):
    """The kept points of blocks (s, u3), u3_lo ≤ u3 < u3_hi: rows (u3, u2, v3, v2, u1, v1), values (t, p);
    returns how many there are (only the first len(out_f) are written).

    Per row (u2, v3) (points p = pm[ra, W − v2], t = σT1, p non-decreasing along v2): first the whole row
    against the staircase (its points have p ≥ p_min = pm[ra, W] and t ≤ t_max, so fl(t − p) ≤
    fl(t_max − p_min): one staircase point may drop them all); then point by point (:func:`_row_points`).
    p_min grows with u2, so the staircase positions are searched onward from the last row's."""
    cnt, nst = 0, st_p.shape[0]
    pm = np.empty((s + 1, Ks + 1))
    pi = np.empty((s + 1, Ks + 1), dtype=np.int64)
    for u3 in range(u3_lo, u3_hi):
        A, r0 = s - u3, offsets[u3]
        for v3 in range(Ks + 1):
            W, c0 = Ks - v3, coff[v3]
            _prefix_min(T2, r0, A, W, c0, sign, pm, pi)
            k1 = 0
            for u2 in range(A + 1):
                ra, r = A - u2, r0 + u2
                if nst > 0:
                    pmin, tmax = pm[ra, W], -np.inf
                    for v2 in range(W + 1):
                        t = sign * T1[r, c0 + v2]
                        if t > tmax:
                            tmax = t
                    k1 = _count_le(st_p, nst, pmin - S, k1)
                    if k1 > 0 and st_q[k1 - 1] > (tmax - pmin) + S:
                        continue
                    k2 = _count_le(st_p, nst, pmin, k1)
                    if k2 > 0 and st_t[k2 - 1] >= tmax:
                        continue
                cnt = _row_points(T1, r, ra, W, c0, sign, S, pm, pi, st_p, st_q, st_t, (u3, u2, v3), out_i,
                                  out_f, cnt)
    return cnt


_front_compiled = None
_compiled_lock = threading.Lock()


def _compiled_front():
    """:func:`_front_impl` and its helpers compiled by numba, imported on the first call (None without it)."""
    global _front_compiled, _prefix_min, _count_le, _row_points
    if _front_compiled is not None:
        return _front_compiled
    with _compiled_lock:
        numba = numba_module() if _front_compiled is None else None
        if numba is not None:
            _jit = numba.njit(nogil=True, cache=True)
            _prefix_min = _jit(_prefix_min)
            _count_le = _jit(_count_le)
            _row_points = _jit(_row_points)
            _front_compiled = _jit(_front_impl)
    return _front_compiled


def front_compiled(T1, T2, offsets, u3_lo, u3_hi, s, Ks, sign, S, staircase, cap=4096):
    """The compiled kernel: (rows (u3, u2, v3, v2, u1, v1), values (t, p)) of the kept points, in the
    sweep's order within each row."""
    kernel = _compiled_front()
    assert kernel is not None  # only called when numba is present
    offsets = np.asarray(offsets, dtype=np.int64)
    coff = column_offsets(Ks)
    st_p, st_q, st_t = staircase
    while True:
        out_i = np.empty((cap, 6), dtype=np.int64)
        out_f = np.empty((cap, 2))
        cnt = kernel(T1, T2, offsets, u3_lo, u3_hi, s, Ks, float(sign), float(S), coff, st_p, st_q, st_t,
                     out_i, out_f)
        if cnt <= cap:
            return out_i[:cnt], out_f[:cnt]
        cap = cnt  # more kept points than room (the first blocks, before the staircase fills): run again


def front_numpy(T1, T2, offsets, u3_lo, u3_hi, s, Ks, sign, S, staircase, cap=0):
    """The numpy twin: per block all points, their margin front (:func:`margin_front`), and the partners of
    the kept ones by argmin (the staircase is not needed: the front alone drops enough)."""
    rows_i, rows_f = [], []
    n = Ks + 1
    coff = column_offsets(Ks)
    v3c = np.repeat(np.arange(n), n - np.arange(n))
    colpos = v3c * n + (np.arange(coff[-1] + 1) - coff[v3c])
    vrev = Ks - np.arange(n)[:, None] - np.arange(n)[None, :]
    for u3 in range(u3_lo, u3_hi):
        A, r0 = s - u3, int(offsets[u3])
        X1 = np.full((A + 1, n * n), -np.inf)
        X1[:, colpos] = sign * T1[r0: r0 + A + 1]
        X2 = np.full((A + 1, n * n), np.inf)
        X2[:, colpos] = sign * T2[r0: r0 + A + 1]
        X1, X2 = X1.reshape(A + 1, n, n), X2.reshape(A + 1, n, n)
        PM = np.minimum.accumulate(np.minimum.accumulate(X2, axis=0), axis=2)
        R = np.take_along_axis(PM[::-1], np.broadcast_to(np.where(vrev >= 0, vrev, 0), (A + 1, n, n)), axis=2)
        u2, v3, v2 = np.nonzero(np.broadcast_to(vrev >= 0, (A + 1, n, n)))  # (u2, v3, v2) row-major
        t, p = X1[u2, v3, v2], R[u2, v3, v2]
        keep = margin_front(p, t, np.arange(t.size), S)
        for j in keep:
            sub = X2[: A - u2[j] + 1, v3[j], : Ks - v3[j] - v2[j] + 1]
            u1, v1 = np.unravel_index(int(sub.argmin()), sub.shape)
            rows_i.append((u3, u2[j], v3[j], v2[j], u1, v1))
            rows_f.append((t[j], p[j]))
    return np.array(rows_i, dtype=np.int64).reshape(-1, 6), np.array(rows_f, dtype=np.float64).reshape(-1, 2)


def margin_front(p: np.ndarray, t: np.ndarray, key: np.ndarray, S: float) -> np.ndarray:
    """Indices of the points that neither a margin drop nor an exact duplicate with a smaller ``key`` removes
    (see the module docstring), in increasing key order."""
    if p.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((key, t, p))  # duplicates of (p, t) adjacent, the smallest key first
    ps, ts = p[order], t[order]
    dup = np.zeros(order.size, dtype=bool)
    dup[1:] = (ps[1:] == ps[:-1]) & (ts[1:] == ts[:-1])
    q = ts - ps
    qmax = np.maximum.accumulate(q)
    k = np.searchsorted(ps, ps - S, side="right")
    dropped = dup | ((k > 0) & (qmax[np.maximum(k - 1, 0)] > q + S))
    return np.sort(order[~dropped])


def staircase(p: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's view of earlier points: p sorted, prefix maxima of fl(t − p) and of t in that order."""
    order = np.argsort(p, kind="stable")
    ps, ts = np.ascontiguousarray(p[order]), t[order]
    return ps, np.maximum.accumulate(ts - ps), np.maximum.accumulate(ts)


def block_front(T1, T2, offsets, u3_lo, u3_hi, s, Ks, sign, S, stair, cap=4096):
    """The compiled kernel where numba is installed, else the numpy one."""
    fn = front_compiled if HAVE_NUMBA and _compiled_front() is not None else front_numpy
    return fn(T1, T2, offsets, u3_lo, u3_hi, s, Ks, sign, S, stair, cap)
