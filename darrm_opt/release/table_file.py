"""γ tables as they leave the library: certified baselines, certified decimal rounding and table files.

A float64 table that is *provably* tight in exact arithmetic (γ_DSub, γ_Sub at m = 1) can exceed its bound
by ~1e-17 once its entries are rounded to float64; the high-precision check rejects it, rightly. Such a
table is shrunk by the smallest factor that makes its float64 values certify (relative 1e-12 at first,
then more), and the shrink is recorded. Printing rounds *down* to the shown decimals and certifies what
is printed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from darrm_opt.certify.certificate import Certificate, certify
from darrm_opt.errors import CertificationFailed, InvalidParameter, TableFileError
from darrm_opt.model.baselines import gamma_const, gamma_dsub, gamma_sub
from darrm_opt.model.params import Params


@dataclass(frozen=True)
class CertifiedTable:
    name: str
    gamma: tuple[float, ...]
    certificate: Certificate
    shrink: float = 1.0  #: factor applied to the exact table to make its float64 values certify


def certify_or_shrink(params: Params, gamma, *, name: str = "gamma", max_tries: int = 6,
                      **kwargs) -> CertifiedTable:
    """Certify ``gamma``; if it fails by a relative excess below 1e-6 (float rounding of a tight table),
    scale it down by 1e-12, 1e-10, ... until it certifies. Raises CertificationFailed otherwise."""
    g = np.asarray(gamma, dtype=np.float64)
    cert = certify(params, g, **kwargs)
    factor = 1.0
    step = 1e-12
    tries = 0
    while not cert.certified:
        excess = (cert.max_privacy_cost - cert.bound) / cert.bound if cert.bound > 0 else math.inf
        if tries >= max_tries or not excess < 1e-6:
            raise CertificationFailed(f"{name} is not (mε, δ)-DP: {cert.reason}", cert)
        factor *= 1.0 - max(step, 2 * excess)
        g = np.asarray(gamma, dtype=np.float64) * factor
        cert = certify(params, g, **kwargs)
        step *= 100
        tries += 1
    return CertifiedTable(name, tuple(float(x) for x in g), cert, factor)


def baseline_tables(params: Params, *, const: str = "simple", delta_prime: float = 0.1, **kwargs):
    """Certified γ_Sub, γ_DSub, γ_const where defined for ``params`` (None where undefined).

    γ_Sub needs an integer m and is (mε, 1 − (1 − Δ)^m)-DP, so it is offered when δ is at least that;
    γ_DSub needs pure DP (Δ = δ = 0) and an integer m. Every returned table is certified.
    """
    out: dict[str, CertifiedTable | None] = {"sub": None, "dsub": None, "const": None}
    if params.m_is_integer:
        try:
            out["sub"] = certify_or_shrink(params, gamma_sub(params.K, params.m), name="γ_Sub", **kwargs)
        except CertificationFailed:
            out["sub"] = None
        if params.pure and params.delta == 0:
            out["dsub"] = certify_or_shrink(params, gamma_dsub(params.K, params.m), name="γ_DSub", **kwargs)
    out["const"] = certify_or_shrink(params, gamma_const(params, const, delta_prime), name="γ_const", **kwargs)
    return out


def round_down(gamma, decimals: int) -> np.ndarray:
    """Each value rounded down to ``decimals`` decimals (never up): ⌊x·10^d⌋ / 10^d with the floor taken in
    exact rational arithmetic (the float product x·10^d can round up to the next integer, e.g. for the
    float just below 0.05), returned as the float nearest to that decimal, which is ≤ x."""
    g = np.asarray(gamma, dtype=np.float64)
    scale = 10**decimals
    out = [math.floor(Fraction(x) * scale) / scale if math.isfinite(x) else x for x in g.ravel().tolist()]
    return np.array(out, dtype=np.float64).reshape(g.shape)


def certified_decimals(params: Params, gamma, decimals: int = 6, **kwargs) -> tuple[list[str], Certificate]:
    """The table as printed with ``decimals`` decimals (rounded down), and the certificate *of the printed
    values*; if rounding down broke a constraint, the table is first scaled down by one unit of the last
    printed decimal (repeatedly) until the printed values certify."""
    g = np.asarray(gamma, dtype=np.float64)
    for _ in range(20):
        shown = round_down(g, decimals)
        cert = certify(params, shown, **kwargs)
        if cert.certified:
            return [f"{x:.{decimals}f}" for x in shown], cert
        g = g * (1.0 - 10.0**-decimals)
    raise CertificationFailed(f"could not print a certified table with {decimals} decimals", cert)


# ---------------------------------------------------------------------------------------------------------
# Table files (the JSON view of `darrm-opt solve`, or a user's own table)

def load_table(path: str | Path) -> tuple[Params, np.ndarray]:
    """Read a γ table JSON file: an object with K, m, epsilon, teacher_delta, delta?, prior? and gamma."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise TableFileError(f"cannot read table file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TableFileError(f"table file {str(path)!r} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict):
        raise TableFileError(f"table file {str(path)!r} must hold a JSON object")
    missing = [k for k in ("K", "m", "gamma") if k not in data]
    if missing:
        raise TableFileError(f"table file {str(path)!r} lacks field(s): {', '.join(missing)}")
    params = Params(
        K=data["K"],
        m=data["m"],
        epsilon=data.get("epsilon", 0.1),
        teacher_delta=data.get("teacher_delta", 1e-5),
        delta=data.get("delta"),
        prior=data.get("prior") or "paper",
    )
    gamma = data["gamma"]
    if not isinstance(gamma, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in gamma):
        raise InvalidParameter("gamma", "must be a list of numbers")
    return params, np.asarray(gamma, dtype=np.float64)
