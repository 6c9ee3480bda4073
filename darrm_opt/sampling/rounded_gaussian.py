"""A Gaussian rounded to a grid, drawn exactly up to 2⁻¹²⁸ from random bytes (the GNSS release's noise)."""

from __future__ import annotations

from fractions import Fraction

from darrm_opt.errors import positive_number

from .source import RandomBytes


def sample_gnss_noise(mean: float, scale: float, grid: float, random_bytes: RandomBytes) -> float:
    """mean + scale·Z, Z ~ N(0, 1), rounded to the nearest multiple of ``grid`` (post-processing), drawn
    exactly up to 2⁻¹²⁸: a 128-bit uniform U from ``random_bytes`` (a CSPRNG) and the cell k with
    F(k − ½) ≤ U < F(k + ½), F the Gaussian CDF on the grid, found by bisection in 60-digit arithmetic.
    No float Gaussian is drawn, so the low bits carry nothing about ``mean``."""
    import mpmath

    scale = positive_number("scale", scale)
    grid = positive_number("grid", grid)
    u = Fraction(int.from_bytes(random_bytes(16), "big"), 1 << 128)
    with mpmath.workdps(60):
        U = mpmath.mpf(u.numerator) / u.denominator
        mu, s, h = mpmath.mpf(mean), mpmath.mpf(scale), mpmath.mpf(grid)

        def F(k: int) -> mpmath.mpf:  # Pr[output ≤ k·h] = Φ(((k + ½)h − μ)/s)
            return mpmath.ncdf(((k + mpmath.mpf(0.5)) * h - mu) / s)

        c = int(mpmath.nint(mu / h))
        span = int(mpmath.ceil(40 * s / h)) + 2
        lo, hi = c - span, c + span  # F(lo) < U ≤ F(hi) but for mass < e^{-800}
        if F(lo) >= U:
            return float(lo * h)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if F(mid) >= U:
                hi = mid
            else:
                lo = mid
        return float(hi * grid)
