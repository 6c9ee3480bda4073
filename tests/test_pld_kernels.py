"""The self-composition kernel's shortcuts against the plain expressions they replace, bit for bit: the float
error terms d_f evaluated only where a power can be non-zero, the rolled window copied without rolling the
whole array, and the size-bounded PLD caches."""

import math

import numpy as np
import pytest
from dp_accounting.pld import common
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import fft as scipy_fft

from darrm_opt.privacy import pld
from darrm_opt.privacy.gaussian_profile import GaussianProfile


def plain_power_error(mod, e, u, count):
    """d_f as the kernel's docstring writes it, over every frequency."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        top = np.minimum(mod + e, 1.0 + e)
        logs = np.where(mod > 0, np.abs(np.log(np.where(mod > 0, mod, 1.0))), 0.0)
        return count * e * top ** (count - 1) + ((count * (logs + 4) + 2) * u) * top**count


def bits(a):
    return np.asarray(a, dtype=np.float64).view(np.uint64)


@pytest.mark.parametrize("count", [2, 3, 7, 99, 100, 101, 1000, 20000])
def test_power_error_is_the_plain_expression_bit_for_bit(count):
    rng = np.random.default_rng(count)
    edge = 2.0 ** (pld.UNDERFLOW_LOG2 / (count - 1))
    mod = np.concatenate([rng.random(2000), 10.0 ** rng.uniform(-320, 0, 2000), [0.0, 1.0, 5e-324],
                          edge * (1 + np.linspace(-1e-3, 1e-3, 201)), edge * 2.0 ** np.linspace(-30, 30, 61)])
    for e, u in ((1e-14, 2.0**-53), (3e-18, 2.0**-64), (0.0, 2.0**-53)):
        got, want = pld._power_error(mod, e, u, count), plain_power_error(mod, e, u, count)
        assert np.array_equal(bits(got), bits(want))
        assert float(np.sum(got)) == float(np.sum(want)) and float(np.sum(got * got)) == float(np.sum(want * want))


@given(st.integers(1, 50), st.integers(-200, 200), st.data())
@settings(max_examples=200, deadline=None)
def test_rolled_is_np_roll_then_slice(n, lo, data):
    length = data.draw(st.integers(1, n))
    values = np.arange(n, dtype=float) * 1.5
    assert np.array_equal(pld._rolled(values, lo, length), np.roll(values, -lo)[:length])


def plain_self_convolve(x, count, wide):
    """The kernel written out in full: every frequency's error term and np.roll over the whole window."""
    probs = np.asarray(x._probs, dtype=float)
    lo, hi = common.compute_self_convolve_bounds(probs, count, pld.SELF_TAIL)
    out_len = hi - lo + 1
    size = scipy_fft.next_fast_len(max(out_len, probs.size))
    spec = scipy_fft.fft(probs.astype(np.longdouble) if wide else probs, size)
    power = spec**count
    out = np.asarray(np.roll(np.real(scipy_fft.ifft(power)), -lo)[:out_len], dtype=float)
    tau, u = pld._fft_tau(size, wide), pld._unit(wide)
    e = tau * float(np.abs(probs).sum())
    d = plain_power_error(np.abs(spec).astype(float), e, u, count)
    per, l2 = pld._spectral_bounds(d, np.abs(power).astype(float), tau, size, half=False)
    return out, per + pld.SELF_TAIL, l2 + pld.SELF_TAIL, x._lower_loss * count + lo


@pytest.mark.parametrize("make, count, wide", [
    (lambda: pld.generic_pld(0.3, 1e-6, 1e-4), 57, False),
    (lambda: pld.generic_pld(0.3, 1e-6, 1e-4), 57, True),
    (lambda: pld.generic_pld(1.2, 0.0, 1e-5), 2, False),
    (lambda: GaussianProfile(30.0, (1, 1)).to_pld(1e-4), 100, False),
    (lambda: GaussianProfile(30.0, (1, 1)).to_pld(1e-4), 300, True),
])
def test_self_convolution_is_the_plain_kernel_bit_for_bit(make, count, wide):
    x = pld.bounded(make()).pld._pmf_remove.to_dense_pmf()
    got, per, l2 = pld._self_convolve_pmf(x, count, wide)
    out, per0, l20, lower = plain_self_convolve(x, count, wide)
    assert np.array_equal(bits(got._probs), bits(out))
    assert (per, l2) == (per0, l20) and got._lower_loss == lower and math.isfinite(per)


def test_sized_cache_keeps_within_its_entries_and_bytes():
    small = pld.generic_pld(0.5, 0.0, 1e-3)
    size = pld._pmf_bytes(small._pmf_remove)
    cache = pld._SizedCache(entries=3, limit=2 * size)
    made = []

    def make(k):
        made.append(k)
        return small

    for k in range(5):
        assert cache.get(k, lambda k=k: make(k)) is small
    assert list(cache.items) == [3, 4]  # two of them fit the bytes
    cache.get(3, lambda: make("again"))
    assert made == [0, 1, 2, 3, 4]  # a hit computes nothing
    big = pld._SizedCache(entries=2, limit=10**9)
    for k in range(4):
        big.get(k, lambda: small)
    assert list(big.items) == [2, 3]
    tiny = pld._SizedCache(entries=5, limit=1)
    tiny.get("only", lambda: small)
    assert list(tiny.items) == ["only"]  # the most recent value is kept even over the bytes
    tiny.clear()
    assert not tiny.items


def test_released_compositions_give_the_same_epsilon():
    prof = GaussianProfile(12.0, (1, 1))
    first = pld.exact_epsilon([(prof, 20)], 1e-5)
    pld.release_compositions()
    again = pld._exact_epsilon(pld.canonical_parts([(prof, 20)]), 1e-5, False)  # recomposed, not read back
    assert again == first
