"""Parameters of a Gaussian mean release (PCA-PATE / autoencoded PATE, Fay, Sjölund, Oechtering).

Per query, K teachers on disjoint shards each give a vector of ``dim`` numbers; each vector is clipped to the
L2 ball of radius ``radius`` and rounded toward zero onto the lattice ``lattice``·ℤ^dim, the K lattice vectors
are summed, and discrete Gaussian noise N_ℤ(0, n²) per coordinate (in lattice units, ``noise`` = n, an
integer in [NOISE_MIN, NOISE_MAX]) is added to the sum; the release is (sum + noise)·lattice/K, whose noise has
standard deviation

    σ = n · lattice / K

on the mean (``sigma``, derived: a table states the integer n and the power-of-two lattice, so nothing about
its noise is a rounded float). ``delta`` is the δ₀ of the per-answer statement
(ε₀, δ₀) a table carries beside its profile (its ε₀ is computed from the profile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.params import digest

#: the noise on the lattice sum, in lattice units, is N_ℤ(0, n²) with n in this range (the exact sampler's
#: integers stay in int64 up to NOISE_MAX; the smoothing bound of the profile wants n ≫ 5)
NOISE_MIN = 1 << 8
NOISE_MAX = 1 << 13
#: the lattice step is a power of two in [2^LATTICE_MIN_EXP, 2^LATTICE_MAX_EXP]
LATTICE_MIN_EXP = -60
LATTICE_MAX_EXP = 20
#: radius / lattice at most this (lattice coordinates and their squares stay in int64)
MAX_RADIUS_UNITS = float(1 << 30)
MAX_DIM = 1 << 16
#: the largest per-answer μ = 2R/(g·n) (one answer is then (4.4, 1e-5)-DP): a table with less noise than that
#: protects little, and its PLD (loss range ∝ μ) would cost the ledger seconds per composition
MU_MAX = 1
MAX_K = 1 << 20


def _integer(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        if isinstance(value, float) and value.is_integer() and lo <= value <= hi:
            return int(value)
        raise InvalidParameter(name, f"must be an integer in [{lo}, {hi}]", value)
    return int(value)


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidParameter(name, "must be a finite number > 0", value)
    return float(value)


def is_lattice_step(g: float) -> bool:
    """Whether ``g`` is a power of two in the allowed range."""
    m, e = math.frexp(g)
    return m == 0.5 and LATTICE_MIN_EXP <= e - 1 <= LATTICE_MAX_EXP


@dataclass(frozen=True)
class GaussianMeanParams:
    """K teachers, vectors of ``dim`` numbers clipped to L2 radius ``radius``, noise σ on the mean on the lattice
    step ``lattice`` (module docstring), per-answer statement at δ₀ = ``delta``."""

    K: int
    dim: int
    radius: float
    lattice: float
    noise: int
    delta: float

    def __post_init__(self) -> None:
        K = _integer("K", self.K, 1, MAX_K)
        dim = _integer("dim", self.dim, 1, MAX_DIM)
        radius = _positive("radius", self.radius)
        lattice = _positive("lattice", self.lattice)
        if not is_lattice_step(lattice):
            raise InvalidParameter("lattice", f"must be a power of two in [2^{LATTICE_MIN_EXP}, "
                                   f"2^{LATTICE_MAX_EXP}]", self.lattice)
        if radius / lattice > MAX_RADIUS_UNITS:
            raise InvalidParameter("lattice", f"radius / lattice must be at most 2^30 (radius {radius:g})",
                                   self.lattice)
        noise = _integer("noise", self.noise, NOISE_MIN, NOISE_MAX)
        if Fraction(2) * Fraction(radius) / Fraction(lattice) > MU_MAX * noise:
            raise InvalidParameter("noise", f"too little noise for the clip radius: μ = 2·radius/(lattice·noise) "
                                   f"must be at most {MU_MAX}", noise)
        delta = self.delta
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
            raise InvalidParameter("delta", "must satisfy 0 < delta < 1", delta)
        for name, value in (("K", K), ("dim", dim), ("radius", radius), ("lattice", lattice), ("noise", noise),
                            ("delta", float(delta))):
            object.__setattr__(self, name, value)

    @property
    def sigma(self) -> float:
        """σ = n·lattice/K, the noise's standard deviation on the released mean (rounded to a float)."""
        return float(Fraction(self.noise) * Fraction(self.lattice) / self.K)

    def canonical(self) -> dict:
        return {"K": self.K, "dim": self.dim, "radius": self.radius, "lattice": self.lattice, "noise": self.noise,
                "delta": self.delta}

    def key(self) -> str:
        return digest({"kind": "gaussian-mean", **self.canonical()})


def gaussian_lattice(sigma: float, K: int, *, noise_min: int = 1 << 12) -> tuple[float, int, float]:
    """(lattice, n, σ′) for a requested σ: the largest power-of-two lattice step g with ⌈σK/g⌉ ≥ ``noise_min``,
    n = ⌈σK/g⌉ (< 2·noise_min) and σ′ = n·g/K ≥ σ (σ is only ever rounded up: more noise, never less)."""
    sigma = _positive("sigma", sigma)
    K = _integer("K", K, 1, MAX_K)
    if not NOISE_MIN <= noise_min <= NOISE_MAX // 2:
        raise InvalidParameter("noise_min", f"must be in [{NOISE_MIN}, {NOISE_MAX // 2}]", noise_min)
    target = Fraction(sigma) * K
    e = math.floor(math.log2(target / noise_min))
    while Fraction(2) ** e * noise_min > target:  # the float log may be off by one either way
        e -= 1
    while Fraction(2) ** (e + 1) * noise_min <= target:
        e += 1
    if not LATTICE_MIN_EXP <= e <= LATTICE_MAX_EXP:
        raise InvalidParameter("sigma", "needs a lattice step outside [2^-60, 2^20]", sigma)
    g = Fraction(2) ** e
    n = math.ceil(target / g)
    return float(g), n, float(Fraction(n) * g / K)
