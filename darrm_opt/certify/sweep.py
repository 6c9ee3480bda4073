"""Exhaustive evaluation of the privacy cost over every corner multiset.

For a multiset n with pmfs α(n), α′(n) (Lemma 3.4) and h_l = s_l γ(l), the privacy cost is

    f(n) = Σ_l h_l α_l(n) − e^{mε} Σ_l h_l α′_l(n).

Split the corners into a prefix set A and a suffix set B and write n = (u, v) with |u| = s, |v| = K − s.
α(n) = P(u) ⊛ Q(v) (convolution), so Σ_l h_l α_l = Σ_k P_k(u) G_k(v) with the correlation
G_k(v) = Σ_j Q_j(v) h_{j+k}. For fixed s the costs of *all* pairs (u, v) are one real matrix product

    F_s = [P | P′] · [G | −e^{mε} G′]ᵀ,

with inner dimension 2(min(s, K − s) + 1) (the correlation goes to the longer side). Every multiset is
visited exactly once, C(K + C − 1, C − 1) in all, in blocks of bounded size, so memory stays bounded.

Reflection: corners are ordered so that the reflection p → 1 − p maps the prefix corners onto the suffix
corners; the reflected multiset of (u, v) is (v, u), its prefix sum K − s, and for a symmetric γ its cost is
exactly −f (α_l ↔ α_{K−l}, h_{K−l} = −h_l). So a symmetric sweep visits only s ≤ (K − 1)/2 and reads each
block twice, as f and as −f: half the arithmetic, every multiset covered once.

Error: P, Q come from FFTs of binomial tables (absolute error ≲ u·log₂ n per entry, u = 2⁻⁵³) and
|G| ≤ max|h|, so |f̃ − f| ≤ :func:`error_bound` — about 1e-13 at K = 101 — which the certifier adds to every
comparison.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from darrm_opt.lazy import sfft
from darrm_opt.model.corners import compositions, n_multisets
from darrm_opt.model.pmf import binom_table, fft_length

#: Upper bound on entries of one cost block held at a time (32 MiB of float64).
BLOCK_ENTRIES = 1 << 22

UNIT_ROUNDOFF = 2.0**-53

#: Largest number of multisets in one scheduled group of work items.
GROUP_MULTISETS = 200_000_000


def error_bound(K: int, E: float, hmax: float) -> float:
    """A conservative bound on the absolute float64 error of one swept cost.

    Each pmf entry from the FFT product of ≤ 8 spectra carries an absolute error below
    (8 + 4 log₂ n) u; the correlation with h sums ≤ K + 1 terms of size ≤ hmax; the ≤ 2(K + 1)-term inner
    product adds (2K + 2) u relative to Σ|terms| ≤ (1 + E) hmax. The corner values themselves are rounded
    (relative 4u), and f is 2·hmax-Lipschitz in each p_i, adding 8 K u (1 + E) hmax. A factor 4 covers the
    cross terms.
    """
    n = fft_length(K)
    per_entry = (8 + 4 * math.log2(n)) * UNIT_ROUNDOFF
    total = (K + 1) * per_entry + (2 * K + 2) * UNIT_ROUNDOFF + 8 * K * UNIT_ROUNDOFF
    return 4.0 * total * (1.0 + E) * max(hmax, 1e-300)


def signed_h(gamma: np.ndarray) -> np.ndarray:
    """h_l = s_l γ(l), with s_l = −1 for l ≤ (K−1)/2 and +1 for l ≥ (K+1)/2 (Lemma 3.4)."""
    gamma = np.asarray(gamma, dtype=np.float64)
    K = gamma.size - 1
    h = gamma.copy()
    h[: (K + 1) // 2] *= -1.0
    return h


@dataclass
class SweepResult:
    """What a sweep found. Count vectors are in the corner order of the problem."""

    max_cost: float = -math.inf
    worst: tuple[int, ...] | None = None
    min_cost: float = math.inf
    best: tuple[int, ...] | None = None
    multisets: int = 0
    #: count vectors (rows) and costs of the multisets above ``threshold`` (at most ``top``, largest first)
    violators: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int16))
    violator_costs: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: count vectors whose cost (or −cost, two-sided) exceeds ``near`` (to re-check in high precision)
    near: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int16))
    near_overflow: bool = False
    #: the swept value of each ``near`` row that exceeded ``near`` (its cost, or −cost for the other output)
    near_costs: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: with ``certify_and_separate(wide=...)``: every multiset whose swept cost exceeds ``wide_level``, and
    #: those costs (None when not asked for, or when there were too many)
    wide: np.ndarray | None = None
    wide_costs: np.ndarray | None = None
    wide_level: float | None = None
    #: with a front request (structured sweeps, :class:`darrm_opt.certify.slopes.FrontRequest`): the collectors'
    #: slope-front points while sweeping, then the merged :class:`darrm_opt.certify.slopes.SlopeFront`
    front: Any = None
    seconds: float = 0.0

    def merge(self, other: SweepResult, top: int, near_cap: int) -> None:
        if other.max_cost > self.max_cost:
            self.max_cost, self.worst = other.max_cost, other.worst
        if other.min_cost < self.min_cost:
            self.min_cost, self.best = other.min_cost, other.best
        self.multisets += other.multisets
        if other.violators.size:
            if self.violators.size:
                V = np.concatenate([self.violators, other.violators])
                c = np.concatenate([self.violator_costs, other.violator_costs])
            else:
                V, c = other.violators, other.violator_costs
            order = np.argsort(-c, kind="stable")[:top]
            self.violators, self.violator_costs = V[order], c[order]
        if other.near.size:
            self.near = np.concatenate([self.near, other.near]) if self.near.size else other.near
            self.near_costs = np.concatenate([self.near_costs, other.near_costs])
        self.near_overflow = self.near_overflow or other.near_overflow
        if other.front is not None:  # per collector its latest part (darrm_opt.certify.slopes.FrontRequest)
            self.front = {**(self.front or {}), **{k: v for k, v in other.front.items()
                                                   if k not in (self.front or {}) or v[0] > self.front[k][0]}}
        if self.near.shape[0] > near_cap:
            self.near, self.near_costs = self.near[:near_cap], self.near_costs[:near_cap]
            self.near_overflow = True


@dataclass(frozen=True)
class WorkItem:
    """Rows [start, stop) of the prefixes with sum s; with ``mirror`` (structured sweeps of a symmetric γ,
    :meth:`darrm_opt.certify.structured.StructuredSweepProblem.plan`) also every block of prefix sum K − s,
    read from the same tables reflected."""

    s: int
    start: int
    stop: int
    mirror: bool = False


class SweepProblem:
    """Everything a sweep of one γ needs; small and picklable (shipped to Dask workers as is).

    ``probs`` is the (C, 2) corner array; ``h`` the signed γ; ``E`` = e^{mε}.
    """

    def __init__(self, probs: np.ndarray, h: np.ndarray, E: float, *, reflect: bool | None = None) -> None:
        self.probs = np.asarray(probs, dtype=np.float64)
        self.h = np.asarray(h, dtype=np.float64)
        self.E = float(E)
        self.K = self.h.size - 1
        self.C = self.probs.shape[0]
        self.a = self.C // 2  # prefix corners
        # use the reflection symmetry when h is antisymmetric (γ symmetric) and the corners pair up
        sym = bool(np.array_equal(self.h, -self.h[::-1])) and self.K % 2 == 1 and self.C % 2 == 0
        self.reflect = sym if reflect is None else (reflect and sym)
        self._spectra: tuple[int, np.ndarray, np.ndarray] | None = None

    def __getstate__(self):
        return {"probs": self.probs, "h": self.h, "E": self.E, "reflect": self.reflect}

    def __setstate__(self, state):
        SweepProblem.__init__(self, state["probs"], state["h"], state["E"], reflect=state["reflect"])

    @property
    def n_multisets(self) -> int:
        return n_multisets(self.K, self.C)

    def spectra(self):
        if self._spectra is None:
            n = fft_length(self.K)
            sp = np.stack([sfft.rfft(binom_table(float(p), self.K), n=n, axis=1) for p in self.probs[:, 0]])
            sq = np.stack([sfft.rfft(binom_table(float(p), self.K), n=n, axis=1) for p in self.probs[:, 1]])
            self._spectra = (n, sp, sq)
        return self._spectra

    def _pmfs(self, counts: np.ndarray, corner_ids: range, length: int) -> tuple[np.ndarray, np.ndarray]:
        n, sp, sq = self.spectra()
        cols = list(corner_ids)
        fp = sp[cols[0]][counts[:, 0]]
        fq = sq[cols[0]][counts[:, 0]]
        for j, c in enumerate(cols[1:], start=1):
            fp = fp * sp[c][counts[:, j]]
            fq = fq * sq[c][counts[:, j]]
        P = sfft.irfft(fp, n=n, axis=1)[:, :length]
        Q = sfft.irfft(fq, n=n, axis=1)[:, :length]
        return P, Q

    def item_work(self, it: WorkItem) -> float:
        """Relative cost of a work item (for balancing groups across workers)."""
        b = self.C - self.a
        return (it.stop - it.start) * math.comb(self.K - it.s + b - 1, b - 1) * (min(it.s, self.K - it.s) + 2)

    def plan(self, rows_per_item: int | None = None) -> list[WorkItem]:
        """Split the sweep into work items of bounded block size."""
        items = []
        for s in range((self.K + 1) // 2 if self.reflect else self.K + 1):
            nu = math.comb(s + self.a - 1, self.a - 1)
            nv = math.comb(self.K - s + self.C - self.a - 1, self.C - self.a - 1)
            step = rows_per_item or max(1, BLOCK_ENTRIES // max(nv, 1))
            for start in range(0, nu, step):
                items.append(WorkItem(s, start, min(nu, start + step)))
        return items

    def run(
        self,
        items: list[WorkItem],
        *,
        threshold: float | None = None,
        top: int = 0,
        near: float | None = None,
        two_sided: bool = False,
        near_cap: int = 200_000,
    ) -> SweepResult:
        """Sweep the multisets of ``items``; see :class:`SweepResult` for what is collected."""
        kw = dict(threshold=threshold, top=top, near=near, two_sided=two_sided, near_cap=near_cap)
        return run_many([self], items, [kw])[0]

    def right(self, Qa: np.ndarray, Qb: np.ndarray, s: int) -> np.ndarray:
        """The suffix factor of the block products for prefix sum s (the correlation with h on the longer
        side): [Qa·H | −e^{mε} Qb·H] when s ≤ K − s, else [Qa | Qb]."""
        K, h = self.K, self.h
        if s <= K - s:
            # correlation on the suffix side: G[v, k] = Σ_j Q[v, j] h[j + k], k = 0..s
            H = np.lib.stride_tricks.sliding_window_view(h, K - s + 1)[: s + 1].T  # (K-s+1, s+1)
            return np.concatenate([Qa @ H, -self.E * (Qb @ H)], axis=1)
        return np.concatenate([Qa, Qb], axis=1)

    def left(self, Pa: np.ndarray, Pb: np.ndarray, s: int) -> np.ndarray:
        """The prefix factor matching :meth:`right`."""
        K, h = self.K, self.h
        if s <= K - s:
            return np.concatenate([Pa, Pb], axis=1)
        H = np.lib.stride_tricks.sliding_window_view(h, s + 1)[: K - s + 1].T  # (s+1, K-s+1)
        return np.concatenate([Pa @ H, -self.E * (Pb @ H)], axis=1)

    def _reduce_reflected(self, F, U, V, res, threshold, top, near, near_cap) -> None:
        """Reduce −F as the costs of the reflected multisets (V[j], U[i]).

        This is ``_reduce(-F.T, V, U, ...)``, written out because negating the transposed block costs a copy
        and strided reductions: 75 % more sweep time at K = 61 (benchmarks/sweep_rate.py)."""
        fmin = float(F.min())
        if -fmin > res.max_cost:
            i, j = np.unravel_index(int(F.argmin()), F.shape)
            res.max_cost = -fmin
            res.worst = tuple(int(x) for x in np.concatenate([V[j], U[i]]))
        if threshold is not None and top > 0 and -fmin > threshold:
            flat = F.ravel()
            idx = np.flatnonzero(flat < -threshold)
            if idx.size > top:
                idx = idx[np.argpartition(flat[idx], top - 1)[:top]]
            i, j = np.divmod(idx, F.shape[1])  # type: ignore[assignment]  # arrays here, ints above
            cnt = np.concatenate([V[j], U[i]], axis=1).astype(np.int16)
            part = SweepResult(violators=cnt, violator_costs=-flat[idx])
            res.merge(part, top, near_cap)
        if near is not None and -fmin > near:
            idx = np.flatnonzero(F.ravel() < -near)
            if res.near.shape[0] + idx.size > near_cap:
                res.near_overflow = True
                idx = idx[: max(0, near_cap - res.near.shape[0])]
            i, j = np.divmod(idx, F.shape[1])  # type: ignore[assignment]  # arrays here, ints above
            res.near = np.concatenate([res.near, np.concatenate([V[j], U[i]], axis=1).astype(np.int16)])
            res.near_costs = np.concatenate([res.near_costs, -F.ravel()[idx]])

    def _reduce(self, F, U, V, res, threshold, top, near, two_sided, near_cap) -> None:
        fmax = float(F.max())
        if fmax > res.max_cost:
            i, j = np.unravel_index(int(F.argmax()), F.shape)
            res.max_cost = fmax
            res.worst = tuple(int(x) for x in np.concatenate([U[i], V[j]]))
        fmin = math.inf
        if two_sided:
            fmin = float(F.min())
            if fmin < res.min_cost:
                i, j = np.unravel_index(int(F.argmin()), F.shape)
                res.min_cost = fmin
                res.best = tuple(int(x) for x in np.concatenate([U[i], V[j]]))
        if threshold is not None and top > 0 and fmax > threshold:
            flat = F.ravel()
            idx = np.flatnonzero(flat > threshold)
            if idx.size > top:
                idx = idx[np.argpartition(-flat[idx], top - 1)[:top]]
            i, j = np.divmod(idx, F.shape[1])  # type: ignore[assignment]  # arrays here, ints above
            cnt = np.concatenate([U[i], V[j]], axis=1).astype(np.int16)
            part = SweepResult(violators=cnt, violator_costs=flat[idx].copy())
            part.max_cost = -math.inf
            res.merge(part, top, near_cap)
        if near is not None and (fmax > near or (two_sided and -fmin > near)):
            mask = F > near
            if two_sided:
                mask |= F < -near
            idx = np.flatnonzero(mask.ravel())
            if res.near.shape[0] + idx.size > near_cap:
                res.near_overflow = True
                idx = idx[: max(0, near_cap - res.near.shape[0])]
            i, j = np.divmod(idx, F.shape[1])  # type: ignore[assignment]  # arrays here, ints above
            cnt = np.concatenate([U[i], V[j]], axis=1).astype(np.int16)
            res.near = np.concatenate([res.near, cnt])
            res.near_costs = np.concatenate([res.near_costs, np.abs(F.ravel()[idx]) if two_sided else F.ravel()[idx]])


def run_many(problems: list[SweepProblem], items: list[WorkItem], kws: list[dict]) -> list[SweepResult]:
    """:meth:`SweepProblem.run` for several problems over the same corners, E and plan (their h differ): the
    pmfs of each block are computed once, the products and reductions once per problem, with the same float
    operations as a sweep of each problem alone (so the results are bitwise those)."""
    t0 = time.perf_counter()
    p0 = problems[0]
    K, a, C = p0.K, p0.a, p0.C
    res = [SweepResult(violators=np.zeros((0, C), dtype=np.int16), near=np.zeros((0, C), dtype=np.int16))
           for _ in problems]
    cache_s, U_all, V, Rs = None, None, None, []
    for it in items:
        s = it.s
        if cache_s != s:
            U_all, V = compositions(s, a), compositions(K - s, C - a)
            Qa, Qb = p0._pmfs(V, range(a, C), K - s + 1)
            Rs, cache_s = [p.right(Qa, Qb, s) for p in problems], s
        U = U_all[it.start : it.stop]  # type: ignore[index]  # set with cache_s on the first item
        Pa, Pb = p0._pmfs(U, range(0, a), s + 1)
        for p, R, r, kw in zip(problems, Rs, res, kws, strict=True):
            F = p.left(Pa, Pb, s) @ R.T  # (|U|, |V|) costs
            r.multisets += F.size
            p._reduce(F, U, V, r, kw["threshold"], kw["top"], kw["near"], kw["two_sided"], kw["near_cap"])
            if p.reflect:  # the reflected multisets (v, u) cost −F
                r.multisets += F.size
                p._reduce_reflected(F, U, V, r, kw["threshold"], kw["top"], kw["near"], kw["near_cap"])
    for r in res:
        r.seconds = time.perf_counter() - t0
    return res


def sweep_many(problems: list[SweepProblem], kws: list[dict], *, workers: int | None = None,
               progress=None) -> list[SweepResult]:
    """:func:`sweep` of several problems of one corner set and plan (generic matrix sweeps: same probs, E,
    K and reflection; their h differ) in one pass through the same driver: one result per problem, each
    bitwise that of its own sweep. ``kws``: each problem's threshold, top, near, two_sided, near_cap."""
    p0 = problems[0]
    if any(type(p) is not SweepProblem or p.K != p0.K or p.E != p0.E or p.reflect != p0.reflect
           or not np.array_equal(p.probs, p0.probs) for p in problems):
        raise ValueError("sweep_many needs matrix sweeps of one corner set, E and reflection")
    for p in problems[1:]:
        p._spectra = p0.spectra()  # the same corners: one set of spectra
    out = [_empty(p0.C) for _ in problems]
    workers = workers or default_workers()
    groups = _groups(p0, workers)
    for parts in _drive(lambda g: run_many(problems, g, kws), groups, workers):
        for o, part, kw in zip(out, parts, kws, strict=True):
            o.merge(part, kw["top"], kw["near_cap"])
        if progress:
            progress(out[0].multisets, p0.n_multisets, max(o.max_cost for o in out))
    return out


def default_workers() -> int:
    env = os.environ.get("DARRM_SWEEP_THREADS")
    if env:
        return max(1, int(env))
    return max(1, min(os.cpu_count() or 1, 8))


def sweep(
    problem: SweepProblem,
    *,
    threshold: float | None = None,
    top: int = 0,
    near: float | None = None,
    two_sided: bool = False,
    workers: int | None = None,
    progress=None,
    executor=None,
    near_cap: int = 200_000,
    front: Any = None,
) -> SweepResult:
    """Sweep every multiset of ``problem`` locally with a thread pool (numpy releases the GIL in the
    matrix products and reductions), or on ``executor`` (a callable mapping a list of item groups to
    partial results, e.g. the Dask adapter). ``progress(done_multisets, total, worst_so_far)`` is
    called as groups finish. ``front`` (structured problems, no executor): a
    :class:`darrm_opt.certify.slopes.FrontRequest`; ``SweepResult.front`` is then the slope front of the
    problem's h, kept from the tables this sweep computes anyway (no second pass for the privacy profile)."""
    t0 = time.perf_counter()
    out = _empty(problem.C)
    kwargs: dict[str, Any] = dict(threshold=threshold, top=top, near=near, two_sided=two_sided, near_cap=near_cap)
    if front is not None and executor is None:
        front = kwargs["front"] = front.fresh()  # this sweep's front request (see StructuredSweepProblem.run)
    workers = workers or default_workers()
    groups = _groups(problem, workers)
    if executor is not None:
        parts = executor(problem, groups, kwargs)
    else:
        parts = _drive(lambda g: problem.run(g, **kwargs), groups, workers)
    for part in parts:
        out.merge(part, top, near_cap)
        if progress:
            progress(out.multisets, problem.n_multisets, out.max_cost)
    if "front" in kwargs:
        out.front = front.finish(problem, out.front or [])
    out.seconds = time.perf_counter() - t0
    return out


def _empty(C: int) -> SweepResult:
    return SweepResult(violators=np.zeros((0, C), dtype=np.int16), near=np.zeros((0, C), dtype=np.int16))


def _groups(problem: SweepProblem, workers: int) -> list[list[WorkItem]]:
    """The problem's work items in groups of about equal work: several per worker and at most ~2·10⁸
    multisets each, so progress is smooth and an interrupt takes effect within a second or two (one group
    for small problems)."""
    items = problem.plan()
    total = problem.n_multisets
    n_groups = max(1, min(len(items), max(workers * 8, total // GROUP_MULTISETS))) if total > 200_000 else 1
    return balance_items(problem, items, n_groups)


def _drive(run, groups, workers: int):
    """``run(group)`` for every group, yielded as they finish: one after the other when one worker is asked
    for or there is one group (with one worker BLAS keeps to one thread too: its idle threads otherwise spin
    on every small product, 4 CPU-s instead of 0.3 for the reduced sweep at K = 101 on 2 cores), else on a
    thread pool with BLAS pinned to one thread per worker (numpy releases the GIL in the products)."""
    if workers == 1 or len(groups) == 1:
        with single_threaded_blas() if workers == 1 else contextlib.nullcontext():
            for g in groups:
                yield run(g)
        return
    with single_threaded_blas():
        pool = ThreadPoolExecutor(workers)
        try:
            futures = [pool.submit(run, g) for g in groups]
            for fut in as_completed(futures):
                yield fut.result()
        finally:  # on Ctrl-C (or any error) drop the groups not yet started
            pool.shutdown(wait=True, cancel_futures=True)


def balance_items(problem: SweepProblem, items: list[WorkItem], n_groups: int) -> list[list[WorkItem]]:
    work = [problem.item_work(it) for it in items]
    target = sum(work) / n_groups
    groups, cur, acc = [], [], 0.0
    for it, w in zip(items, work):
        cur.append(it)
        acc += w
        if acc >= target:
            groups.append(cur)
            cur, acc = [], 0.0
    if cur:
        groups.append(cur)
    return groups


class single_threaded_blas:
    """Pin BLAS to one thread while our own threads split the work (avoids oversubscription)."""

    def __enter__(self):
        try:
            from threadpoolctl import threadpool_limits

            self._ctx = threadpool_limits(1, user_api="blas")
        except Exception:  # threadpoolctl missing: run as is
            self._ctx = None
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.unregister() if hasattr(self._ctx, "unregister") else None
            try:
                self._ctx.restore_original_limits()
            except Exception:
                pass
        return False
