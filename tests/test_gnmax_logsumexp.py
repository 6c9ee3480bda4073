"""gnmax.logsumexp_last is scipy.special.logsumexp over the last axis, bit for bit (ties, −∞, ±∞, NaN,
underflow), and log_q_tilde built on it agrees with the scipy expression on vote histograms."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import special

from darrm_opt.privacy.gnmax import log_q_tilde, logsumexp_last

values = st.one_of(st.floats(-800, 800), st.sampled_from([-math.inf, math.inf, 0.0, -745.0, 709.0, 1e-300]),
                   st.floats(allow_nan=True, allow_infinity=True, width=64))


def same(a, b):
    a, b = np.atleast_1d(np.asarray(a, dtype=float)), np.atleast_1d(np.asarray(b, dtype=float))
    return a.shape == b.shape and np.array_equal(a.view(np.uint64), b.view(np.uint64))


@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6), elements=values))
@settings(max_examples=500, deadline=None)
def test_logsumexp_last_is_scipys(a):
    got, want = logsumexp_last(a), special.logsumexp(a, axis=-1)
    if np.all(np.isnan(want)) and np.all(np.isnan(got)):
        return
    assert same(np.where(np.isnan(got), np.nan, got), np.where(np.isnan(want), np.nan, want)), (a, got, want)


@pytest.mark.parametrize("rows", [[[0.0, -math.inf]], [[-math.inf, -math.inf]], [[3.0, 3.0, 3.0]],
                                  [[1.0, 2.0, 2.0, -1.0], [5.0, -math.inf, 5.0, 4.0]], [[-1000.0, -1001.0]]])
def test_logsumexp_last_on_ties_and_infinities(rows):
    a = np.array(rows)
    assert same(logsumexp_last(a), special.logsumexp(a, axis=-1))
    assert same(logsumexp_last(a[0]), special.logsumexp(a[0], axis=-1))


@given(st.integers(2, 12), st.integers(1, 300), st.floats(0.5, 200.0), st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_log_q_tilde_is_the_scipy_expression(m, K, sigma, seed):
    rng = np.random.default_rng(seed)
    votes = rng.multinomial(K, rng.dirichlet(np.ones(m)), size=5).astype(float)
    top = np.max(votes, axis=-1, keepdims=True)
    terms = special.log_ndtr(-(top - votes) / (math.sqrt(2.0) * sigma))
    mask = np.ones(votes.shape, dtype=bool)
    np.put_along_axis(mask, np.argmax(votes, axis=-1)[..., None], False, axis=-1)
    want = np.minimum(special.logsumexp(np.where(mask, terms, -np.inf), axis=-1), math.log1p(-1.0 / m))
    assert same(log_q_tilde(votes, sigma), want)
    assert same(log_q_tilde(votes[0], sigma), want[0])
