"""Exact random primitives from a CSPRNG, shared by the mechanisms and the ledger.

Every sampler here draws from ``random_bytes(n) -> bytes`` and has exactly its stated law: no float lies
between the random bytes and an outcome (the GNSS noise of :mod:`~darrm_opt.sampling.rounded_gaussian`
is exact up to 2⁻¹²⁸, as it says).

* :mod:`~darrm_opt.sampling.source`: the bytes (:data:`system_random`, the OS CSPRNG in blocks).
* :mod:`~darrm_opt.sampling.uniform`: exactly uniform integers by rejection of 64-bit words.
* :mod:`~darrm_opt.sampling.bernoulli`: exact Bernoulli(p) for rational p, the fixed-width dyadic coins
  (:class:`FixedWidthCoins`), and Bernoulli(exp(−γ)) (Canonne, Kamath, Steinke 2020, Alg. 1).
* :mod:`~darrm_opt.sampling.discrete_gaussian`: N_ℤ(0, σ²) for a real σ or a lattice scale n (Alg. 2, 3).
* :mod:`~darrm_opt.sampling.discrete_laplace`: DLap(t), Pr[y] ∝ exp(−|y|/t) for an integer t (Alg. 2).
* :mod:`~darrm_opt.sampling.pool`: discrete Gaussian samples drawn ahead (:class:`NoisePool`, issue 33).
* :mod:`~darrm_opt.sampling.rounded_gaussian`: a Gaussian rounded to a grid (the GNSS release's noise).
"""

from darrm_opt.sampling.bernoulli import (
    ExpNegTable,
    FixedWidthCoins,
    bernoulli,
    bernoulli_exp,
    bernoulli_exp_exact,
    bernoulli_exp_fraction,
    exact_bernoulli,
)
from darrm_opt.sampling.discrete_gaussian import MAX_N, DiscreteGaussian, discrete_gaussian
from darrm_opt.sampling.discrete_laplace import discrete_laplace
from darrm_opt.sampling.pool import POOL_BLOCK, NoisePool, noise_pool
from darrm_opt.sampling.rounded_gaussian import sample_gnss_noise
from darrm_opt.sampling.source import TWO64, RandomBytes, SystemRandom, system_random, uint64_words
from darrm_opt.sampling.uniform import (
    uniform_below,
    uniform_index,
    uniform_indices,
    uniform_limits,
    uniform_rejection,
)

__all__ = [
    "MAX_N",
    "POOL_BLOCK",
    "TWO64",
    "DiscreteGaussian",
    "ExpNegTable",
    "FixedWidthCoins",
    "NoisePool",
    "RandomBytes",
    "SystemRandom",
    "bernoulli",
    "bernoulli_exp",
    "bernoulli_exp_exact",
    "bernoulli_exp_fraction",
    "discrete_gaussian",
    "discrete_laplace",
    "exact_bernoulli",
    "noise_pool",
    "sample_gnss_noise",
    "system_random",
    "uint64_words",
    "uniform_below",
    "uniform_index",
    "uniform_indices",
    "uniform_limits",
    "uniform_rejection",
]
