"""The multi-slope sweep behind privacy profiles: the structured and the matrix sweep agree, slope by slope,
with each other and with the certificate's single-slope sweep (both paths run whatever K selects)."""

import math

import numpy as np
import pytest

from darrm_opt.certify.problems import make_problem
from darrm_opt.certify.slopes import sweep_slopes
from darrm_opt.certify.sweep import signed_h, sweep
from darrm_opt.model.baselines import gamma_sub
from darrm_opt.model.corners import corners
from darrm_opt.model.params import Params

XS = [1.0, 1.05, math.exp(0.3), 2.0, 5.0, 40.0]


@pytest.mark.parametrize("K,asym", [(9, False), (11, True), (13, False)])
def test_structured_and_matrix_multi_slope_sweeps_agree(K, asym):
    params = Params(K, 3, 0.1, 1e-5)
    g = gamma_sub(K, 3).astype(float)
    if asym:
        g = g * np.linspace(0.7, 1.0, K + 1)  # a non-symmetric γ: both signs are swept
    h = signed_h(g)
    C = corners(params)
    res = {m: sweep_slopes(make_problem(C, h, 1.0, m), XS, workers=2, two_sided=True)
           for m in ("structured", "matrix")}
    np.testing.assert_allclose(res["structured"].best, res["matrix"].best, rtol=0, atol=1e-12)
    if asym:
        np.testing.assert_allclose(res["structured"].best_neg, res["matrix"].best_neg, rtol=0, atol=1e-12)
    else:  # the matrix sweep keeps one side for a symmetric γ: reflection maps F to −F, so max −F = max F
        np.testing.assert_allclose(res["structured"].best_neg, res["matrix"].best, rtol=0, atol=1e-12)
    for k, x in enumerate(XS):  # each slope equals the certificate's own sweep at E = x
        one = sweep(make_problem(C, h, x, "matrix"), two_sided=True)
        assert res["structured"].best[k] == pytest.approx(one.max_cost, abs=1e-12)
        assert res["structured"].best_neg[k] == pytest.approx(-one.min_cost if asym else one.max_cost, abs=1e-12)


# ---------------------------------------------------------------------------------------------------------
# The slope front: one pass answering every slope x ≥ 1 (darrm_opt.certify.slope_kernels)
# ---------------------------------------------------------------------------------------------------------
import contextlib  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from darrm_opt.certify import kernels, slope_kernels, slopes  # noqa: E402
from darrm_opt.certify.slope_kernels import block_front, drop_margin, staircase  # noqa: E402
from darrm_opt.certify.slopes import front_applies, slope_front  # noqa: E402
from darrm_opt.certify.structured import StructuredSweepProblem  # noqa: E402

COMPILED = [True, False] if kernels.HAVE_NUMBA else [False]


@contextlib.contextmanager
def kernel_kind(compiled: bool):
    """The compiled kernels, or (compiled=False) the numpy twins, as DARRM_NO_NUMBA=1 selects them."""
    with pytest.MonkeyPatch.context() as mp:
        if not compiled:
            for mod in (kernels, slope_kernels, slopes):
                mp.setattr(mod, "HAVE_NUMBA", False)
        yield


def brute_block_points(T1, T2, offsets, s, Ks, sign):
    """Every point (key order (u3, u2, v3, v2)) of the blocks of prefix sum s: t = σT1, p = the minimum of
    σT2 over the partners and the first argmin (u1, v1) in row-major order, by direct search."""
    coff = kernels.column_offsets(Ks)
    pts = []
    for u3 in range(s + 1):
        A, r0 = s - u3, int(offsets[u3])
        for u2 in range(A + 1):
            for v3 in range(Ks + 1):
                W, c0 = Ks - v3, int(coff[v3])
                for v2 in range(W + 1):
                    sub = sign * T2[r0: r0 + A - u2 + 1, c0: c0 + W - v2 + 1]
                    u1, v1 = np.unravel_index(int(sub.argmin()), sub.shape)
                    pts.append(((u3, u2, v3, v2, int(u1), int(v1)), sign * T1[r0 + u2, c0 + v2], sub.min()))
    return pts


def tables(draw_values, s, Ks):
    rows, cols = (s + 1) * (s + 2) // 2, (Ks + 1) * (Ks + 2) // 2
    offsets = np.concatenate([[0], np.cumsum([s - u3 + 1 for u3 in range(s + 1)])])
    return draw_values(rows, cols), draw_values(rows, cols), offsets


@pytest.mark.parametrize("compiled", COMPILED)
@settings(max_examples=40, deadline=None)
@given(K=st.integers(1, 8), frac=st.floats(0, 1), split=st.floats(0, 1), seed=st.integers(0, 2**31),
       ties=st.booleans(), sign=st.sampled_from([1.0, -1.0]))
def test_block_front_keeps_the_maximum_and_first_argmax_of_every_slope(compiled, K, frac, split, seed, ties,
                                                                      sign):
    """Kernel against brute force on synthetic tables — with ties=True entries on a grid of eighths, so
    exact ties (of values and of partners) are everywhere. The blocks u3 < mid are kept first; their margin
    front is then the staircase of the blocks u3 ≥ mid (earlier points, as a group's front is). At every
    slope x ≥ 1 the kept points give the scan's maximum, bit for bit, and its first argmax
    (u3, u2, v3, v2) with its partner (u1, v1)."""
    rng = np.random.default_rng(seed)
    s = int(round(frac * K))
    Ks, mid = K - s, int(round(split * (s + 1)))
    draw = (lambda r, c: rng.integers(-8, 9, (r, c)) / 8.0) if ties else (lambda r, c: rng.uniform(-1, 1, (r, c)))
    T1, T2, offsets = tables(draw, s, Ks)
    S = drop_margin(float(max(np.abs(T1).max(), np.abs(T2).max())))
    with kernel_kind(compiled):
        r1, v1 = block_front(T1, T2, offsets, 0, mid, s, Ks, sign, S, staircase(np.zeros(0), np.zeros(0)))
        keys = np.lexsort(r1[:, 3::-1].T).argsort()  # rank in key order
        first = slope_kernels.margin_front(v1[:, 1], v1[:, 0], keys, S)
        r1, v1 = r1[first], v1[first]
        r2, v2 = block_front(T1, T2, offsets, mid, s + 1, s, Ks, sign, S, staircase(v1[:, 1], v1[:, 0]))
    rows, vals = np.concatenate([r1, r2]), np.concatenate([v1, v2])
    pts = brute_block_points(T1, T2, offsets, s, Ks, sign)
    assert 1 <= rows.shape[0] <= len(pts)
    for x in [1.0, math.nextafter(1.0, 2.0), 1.5, 3.0, 1e3, *rng.uniform(1.0, 20.0, 4)]:
        allv = [t - x * p for _, t, p in pts]
        m = max(allv)
        best = pts[allv.index(m)][0]  # the first in key order attaining it, as the scans keep
        kept = vals[:, 0] - x * vals[:, 1]
        assert kept.max() == m
        ties_ = rows[kept == m]
        ties_ = ties_[np.lexsort(ties_[:, 3::-1].T)]  # key order (u3, u2, v3, v2)
        assert tuple(int(c) for c in ties_[0]) == best


def random_problem(K, seed, asym):
    params = Params(K, 3, 0.1, 1e-5)
    rng = np.random.default_rng(seed)
    g = rng.uniform(0.0, 1.0, K + 1)
    if not asym:  # a symmetric γ: γ(l) = γ(K − l)
        g = (g + g[::-1]) / 2
    return StructuredSweepProblem(corners(params), signed_h(g), 1.0), params, signed_h(g)


@pytest.mark.parametrize("compiled", COMPILED)
@settings(max_examples=12, deadline=None)
@given(K=st.sampled_from([3, 5, 7, 9, 11]), seed=st.integers(0, 2**31), asym=st.booleans(),
       extra=st.lists(st.floats(1.0, 60.0), min_size=1, max_size=6), pending=st.sampled_from([0, 50, 20_000]))
def test_front_equals_the_multi_slope_scan_and_the_certificate_sweep(compiled, K, seed, asym, extra, pending):
    """The front's answer at every slope x ≥ 1 is the multi-slope scan's and the plain certificate sweep's
    (E = x, one worker: groups in order), values bit for bit and the same argmax multisets, both sides;
    ``pending`` small: groups compact after (almost) every prefix sum, so the kernel runs with staircases."""
    prob, params, h = random_problem(K, seed, asym)
    xs = [1.0, *extra, math.exp(0.3)]
    with kernel_kind(compiled), pytest.MonkeyPatch.context() as mp:
        mp.setattr(slopes, "PENDING", pending)
        fr = slope_front(prob, workers=2, two_sided=True)
        got = fr.evaluate(xs)
        ref = sweep_slopes(prob, xs, workers=2, two_sided=True, method="scan")
        assert sweep_slopes(prob, xs, workers=2, two_sided=True).arg == got.arg  # "auto" takes the front
    np.testing.assert_array_equal(got.best, ref.best)
    np.testing.assert_array_equal(got.best_neg, ref.best_neg)
    assert got.arg == ref.arg and got.arg_neg == ref.arg_neg
    for k, x in enumerate(xs):
        one = sweep(StructuredSweepProblem(corners(params), h, x), two_sided=True, workers=1)
        assert got.best[k] == one.max_cost and got.arg[k] == one.worst
        assert got.best_neg[k] == -one.min_cost and got.arg_neg[k] == one.best


def test_front_one_sided_keeps_no_negative_side_and_refuses_slopes_below_one():
    prob, _, _ = random_problem(9, 7, False)
    fr = slope_front(prob, workers=2, two_sided=False)
    assert fr.neg is None and len(fr) == fr.pos.t.size > 0
    ref = sweep_slopes(prob, [1.0, 2.0], workers=2, two_sided=False, method="scan")
    got = fr.evaluate([1.0, 2.0])
    np.testing.assert_array_equal(got.best, ref.best)
    assert np.all(got.best_neg == -np.inf)
    assert not front_applies(prob, [0.5, 2.0]) and front_applies(prob, [1.0, 2.0])
    with pytest.raises(ValueError, match="x >= 1"):
        fr.evaluate([0.99])
    with pytest.raises(ValueError, match="structured problem and slopes x >= 1"):
        sweep_slopes(prob, [0.5], method="front")
    low = sweep_slopes(prob, [0.5, 2.0], workers=2, two_sided=False)  # "auto" scans for x < 1
    one = sweep(StructuredSweepProblem(prob.probs, prob.h, 0.5), workers=1)
    assert low.best[0] == one.max_cost and low.arg[0] == one.worst


def test_front_keeps_few_points():
    """The point of the front: it is small against the C(K + 7, 7) multisets it answers for."""
    prob, _, _ = random_problem(21, 3, True)
    fr = slope_front(prob, workers=2, two_sided=True)
    assert 0 < len(fr) < 0.02 * math.comb(21 + 7, 7)


@pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="the numpy twin does not use the staircase")
def test_staircase_drops_exactly_at_its_boundaries():
    """One block (s = 0, K = 1) with rows v3 = 0: (t, p) = (0.5, 0.25), (0, 0.25) and v3 = 1: (0, 1); in
    row v3 = 0 only the first can be a maximum at x ≥ 1. An earlier point drops it weakly when p_r ≤ 0.25
    and t_r ≥ 0.5, by the margin when p_r ≤ 0.25 − S and t_r − p_r > 0.25 + S; one ulp short, it stays."""
    T1, T2, offsets = np.array([[0.5, 0.0, 0.0]]), np.array([[0.25, 0.75, 1.0]]), np.array([0, 1])
    S = drop_margin(1.0)

    def kept(*stair):
        ps, ts = np.array([p for p, _ in stair]), np.array([t for _, t in stair])
        rows, vals = block_front(T1, T2, offsets, 0, 1, 0, 1, 1.0, S, staircase(ps, ts))
        return [(tuple(int(c) for c in r), tuple(v)) for r, v in zip(rows, vals) if r[2] == 0]

    only = [((0, 0, 0, 0, 0, 0), (0.5, 0.25))]
    down, up = (lambda v: math.nextafter(v, -1.0)), (lambda v: math.nextafter(v, 2.0))
    assert kept() == only
    assert kept((0.25, 0.5)) == [] and kept((0.0, 0.75)) == []  # weakly dominated
    assert kept((0.25, down(0.5))) == only and kept((up(0.25), 0.5)) == only
    assert kept((0.25 - 4 * S, 0.5 - 2 * S)) == []  # by the margin: q_r = 0.25 + 2S
    assert kept((0.25 - S / 2, down(0.5))) == only  # inside the margin in p, below in t
    assert kept((0.25 - 4 * S, 0.25 - 4 * S + 0.25 + S / 2)) == only  # inside the margin in q
    assert kept((2.0, 0.4), (0.25, 0.5)) == []  # the staircase's prefix maxima, not its last point


def test_front_under_darrm_no_numba_equals_the_compiled_front():
    """DARRM_NO_NUMBA=1 (a fresh interpreter: the switch is read at import) answers with the numpy twins:
    the same values and multisets as this process's kernels."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json, numpy as np\n"
        "from darrm_opt.certify import slope_kernels\n"
        "from darrm_opt.certify.slopes import slope_front\n"
        "from tests.test_slopes import random_problem\n"
        "assert not slope_kernels.HAVE_NUMBA\n"
        "r = slope_front(random_problem(11, 5, True)[0], workers=2).evaluate([1.0, 1.7, 9.0])\n"
        "print(json.dumps([r.best.tolist(), r.best_neg.tolist(), r.arg, r.arg_neg]))\n"
    )
    env = dict(os.environ, DARRM_NO_NUMBA="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    best, best_neg, arg, arg_neg = json.loads(out.stdout)
    r = slope_front(random_problem(11, 5, True)[0], workers=2).evaluate([1.0, 1.7, 9.0])
    assert best == r.best.tolist() and best_neg == r.best_neg.tolist()
    assert [tuple(a) for a in arg] == r.arg and [tuple(a) for a in arg_neg] == r.arg_neg
