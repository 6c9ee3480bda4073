"""GNMax and Confident-GNMax with discrete Gaussian noise (PATE, Papernot et al. 2018): parameters and errors.

GNMax releases argmax_c (h_c + Z_c) for the vote histogram h over C classes, Z_c ~ N_ℤ(0, σ²) independent
(the discrete Gaussian, Canonne, Kamath, Steinke 2020), ties among the noisy maxima broken uniformly.
Confident-GNMax (PATE Alg. 1) first releases whether max_c h_c + Z ≥ T with Z ~ N_ℤ(0, σ₁²); if not it
answers ⊥ (abstains), else GNMax with σ₂.

Expected error (the quantity every kind's plan compares):

- ``C = 2`` with a 0/1-vote prior (:class:`darrm_opt.model.params.Prior`: paper, iid-uniform, common-uniform;
  written ``labels:SPEC`` for the class-label prior of the same name, as a job with classes = 2 has):
  DaRRM's error (Def. 2.4), E = ½ Σ_{l > K/2} (α_l − α_{K−l})(1 − γ(l)) with the release's effective table
  γ(l) = Pr[answer = majority | L = l] − Pr[answer ≠ majority | L = l]; with D = Z₁ − Z₀ (the difference of
  two N_ℤ(0, σ²), the minority's noise minus the majority's) and d = |2l − K| > 0, the majority wins when
  D < d, ties when D = d (split evenly: it adds nothing) and loses when D > d; by symmetry of D,
  γ(l) = Pr[D < d] − Pr[D > d] = Pr[−d ≤ D < d].
- otherwise a multi-class prior (:class:`darrm_opt.model.multiclass.MulticlassPrior`): Pr[answer ≠ y], the
  true class, as for multi-class DaRRM. With independent count weights Pr[h] ∝ Y(h_y) Π_{c≠y} R(h_c) on
  Σ h = K, the noisy counts V_c = h_c + Z_c and 1/(1 + N) = ∫₀¹ u^N du for the N other classes tied at the
  top,

      Pr[answer = w] = Σ_b R(b) Σ_v p(v − b) ∫₀¹ [(Y·G_{u,v}) * (R·G_{u,v})^{*(C−2)}](K − b) du / Z,
      G_{u,v}(x) = F(v − x − 1) + u·p(v − x),

  for one wrong class w (p, F: the discrete Gaussian's pmf and cdf; the integrand is a polynomial of degree
  C − 1 in u, integrated exactly by Gauss–Legendre with ⌈C/2⌉ nodes). The error is (C − 1)·Pr[answer = w]
  (no 1 − accuracy cancellation). Noise beyond ±L (L = ⌈14σ⌉ + 2) is dropped and a bound of its mass,
  C·Pr[|Z| > L] (:func:`discrete_gaussian_pmf`), is added: the figure is an upper bound up to float
  rounding (~1e-16 absolute).
- Confident-GNMax counts ⊥ as an error: Pr[⊥] + Pr[answered, wrong], bounded by
  Pr[⊥] ≤ error ≤ Pr[⊥] + error(GNMax_σ₂), with Pr[⊥] = Σ_m Pr[max h = m]·Pr[Z < T − m] exact; the upper
  end is the figure reported (the checks' noise is independent of the argmax's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.lazy import LazyModule
from darrm_opt.model.multiclass import MAX_CLASSES, MAX_TEACHERS, MulticlassPrior, normaliser
from darrm_opt.model.params import Prior, digest, finite_number, integer_in

special: Any = LazyModule("scipy.special")

#: a 0/1-vote prior for C = 2 is one of these kinds (else the spec is read as a multi-class prior)
BINARY_PRIORS = ("paper", "iid-uniform", "common-uniform", "beta", "counts")
#: the largest σ accepted (far above any vote count: the release is then almost a uniform class; the
#: discrete Gaussian's PLD has about 23σ points)
MAX_SIGMA = 1e4
#: the largest exact error computation accepted for a multi-class prior: FFT rows × FFT length (about a
#: minute of CPU; K = 250, C = 10, σ = 30 needs 2.2e7)
MAX_ERROR_WORK = 2e9
#: FFT cells (rows × length) formed at once by the error computations (bounds their memory: 64 MB)
CHUNK_CELLS = 1 << 22


def _fft_length(n: int) -> int:
    return 1 << max(1, int(math.ceil(math.log2(n + 1))))


def error_work(K: int, C: int, sigma: float) -> float:
    """FFT rows × length of :func:`multiclass_wrong` for (K, C, σ) (and of the top-count law)."""
    rows = (K + 2 * tail_cut(sigma) + 1) * max(1, (C + 1) // 2)
    return max(rows * _fft_length((C - 1) * K), (K + 1) * _fft_length(C * K))


def check_error_work(K: int, C: int, sigma: float, prior: Any, name: str = "sigma") -> None:
    """InvalidParameter when the exact error of a multi-class prior would exceed MAX_ERROR_WORK."""
    if isinstance(prior, MulticlassPrior) and error_work(K, C, sigma) > MAX_ERROR_WORK:
        raise InvalidParameter("K", f"K = {K}, C = {C}, {name} = {sigma:g}: the exact expected error needs "
                                    f"{error_work(K, C, sigma):.3g} FFT cells, above {MAX_ERROR_WORK:.3g}", K)


#: a C = 2 prior spec with this prefix is a class-label prior (error against the true class) although its
#: kind is also a 0/1-vote prior's
LABELS = "labels:"


def parse_prior(spec: Any, C: int) -> Prior | MulticlassPrior:
    """The prior of ``spec`` for C classes: a 0/1-vote :class:`Prior` when C = 2 and its kind is one of
    BINARY_PRIORS (unless written ``labels:SPEC``), else a :class:`MulticlassPrior`."""
    if isinstance(spec, (Prior, MulticlassPrior)):
        if isinstance(spec, Prior) and C != 2:
            raise InvalidParameter("prior", "a 0/1-vote prior needs classes = 2", spec.spec)
        return spec
    text = "paper" if spec is None else str(spec).strip()
    if text.startswith(LABELS):
        return MulticlassPrior.parse(text[len(LABELS):])
    if C == 2 and text.partition(":")[0] in BINARY_PRIORS:
        return Prior.parse(text)
    return MulticlassPrior.parse(text)


def prior_spec(prior: Prior | MulticlassPrior, C: int) -> str:
    """The spec :func:`parse_prior` reads back as ``prior`` for C classes."""
    if C == 2 and isinstance(prior, MulticlassPrior) and prior.kind in BINARY_PRIORS:
        return LABELS + prior.spec
    return prior.spec


def _sigma(name: str, value: object) -> float:
    s = finite_number(name, value)
    if not 0 < s <= MAX_SIGMA:
        raise InvalidParameter(name, f"must satisfy 0 < {name} <= {MAX_SIGMA:g}", value)
    return s


def _check_kc(K: object, C: object) -> tuple[int, int]:
    if isinstance(K, bool) or not isinstance(K, int) or not 1 <= K <= MAX_TEACHERS:
        raise InvalidParameter("K", f"must be an integer with 1 <= K <= {MAX_TEACHERS}", K)
    if isinstance(C, bool) or not isinstance(C, int) or not 2 <= C <= MAX_CLASSES:
        raise InvalidParameter("classes", f"must be an integer with 2 <= classes <= {MAX_CLASSES}", C)
    return K, C


@dataclass(frozen=True)
class GnmaxParams:
    """GNMax: K teachers' class labels over C classes, noise N_ℤ(0, σ²) per class, a prior for its error."""

    K: int
    C: int
    sigma: float
    prior: Any = "paper"
    #: m: each answer runs GNMax on a uniform random m of the K teachers, drawn per answer without replacement
    #: (1 ≤ m ≤ K; None, or m = K: every teacher); its pair is amplified (docs/maths.md, subsampled teachers)
    subsample: int | None = None

    def __post_init__(self) -> None:
        _check_kc(self.K, self.C)
        object.__setattr__(self, "sigma", _sigma("sigma", self.sigma))
        object.__setattr__(self, "prior", parse_prior(self.prior, self.C))
        if self.subsample is not None:
            m = integer_in("subsample", self.subsample, 1, self.K)
            object.__setattr__(self, "subsample", None if m == self.K else m)
        check_error_work(self.m, self.C, self.sigma, self.prior)

    @property
    def m(self) -> int:
        """The teachers each answer reads: ``subsample``, or K."""
        return self.K if self.subsample is None else self.subsample

    def canonical(self) -> dict[str, Any]:
        """The parameters' one form; ``subsample`` only where set (a table of every teacher keeps its id)."""
        out: dict[str, Any] = {"K": self.K, "classes": self.C, "sigma": self.sigma,
                               "prior": prior_spec(self.prior, self.C)}
        if self.subsample is not None:
            out["subsample"] = self.subsample
        return out

    def key(self) -> str:
        return digest({"kind": "gnmax", **self.canonical()})


@dataclass(frozen=True)
class ConfidentGnmaxParams:
    """Confident-GNMax: ⊥ unless max_c h_c + N_ℤ(0, σ₁²) ≥ T, else GNMax with σ₂."""

    K: int
    C: int
    threshold: float
    sigma1: float
    sigma2: float
    prior: Any = "paper"

    def __post_init__(self) -> None:
        _check_kc(self.K, self.C)
        object.__setattr__(self, "threshold", finite_number("threshold", self.threshold))
        object.__setattr__(self, "sigma1", _sigma("sigma1", self.sigma1))
        object.__setattr__(self, "sigma2", _sigma("sigma2", self.sigma2))
        object.__setattr__(self, "prior", parse_prior(self.prior, self.C))
        check_error_work(self.K, self.C, self.sigma2, self.prior, "sigma2")

    @property
    def sigma(self) -> float:
        return self.sigma2

    def canonical(self) -> dict[str, Any]:
        return {"K": self.K, "classes": self.C, "threshold": self.threshold, "sigma1": self.sigma1,
                "sigma2": self.sigma2, "prior": prior_spec(self.prior, self.C)}

    def key(self) -> str:
        return digest({"kind": "confident-gnmax", **self.canonical()})


# ------------------------------------------------------------------------------------------------------
# The discrete Gaussian's law

def tail_cut(sigma: float) -> int:
    """L = ⌈14σ⌉ + 2: the noise values kept by the error computations."""
    return int(math.ceil(14.0 * sigma)) + 2


def discrete_gaussian_pmf(sigma: float, L: int) -> tuple[np.ndarray, float]:
    """(p(z) for z = −L..L, an upper bound of Pr[|Z| > L]) for Z ~ N_ℤ(0, σ²): p(z) = e^{−z²/2σ²}/S with
    S = Σ_z e^{−z²/2σ²} summed over |z| ≤ L + ⌈10σ⌉ (the rest below 1e-40 of it); the tail bound is
    2 Σ_{z > L} e^{−z²/2σ²}/S ≤ 2 e^{−(L+1)²/2σ²} / ((1 − e^{−(L+1)/σ²}) S) (a geometric series)."""
    M = L + int(math.ceil(10 * sigma)) + 2
    z = np.arange(-M, M + 1, dtype=np.float64)
    w = np.exp(-0.5 * (z / sigma) ** 2)
    S = float(math.fsum(w.tolist()))
    p = w[M - L : M + L + 1] / S
    r = math.exp(-(L + 1) / sigma**2)
    tail = 2 * math.exp(-0.5 * ((L + 1) / sigma) ** 2) / ((1 - r) * S) if r < 1 else 1.0
    return p, min(1.0, tail)


# ------------------------------------------------------------------------------------------------------
# Expected errors

def binary_gamma(K: int, sigma: float) -> np.ndarray:
    """γ(l) = Pr[answer = majority | L = l] − Pr[answer ≠ majority | L = l], l = 0..K, for C = 2 (module
    docstring): Pr[−d ≤ D < d] with d = |2l − K| and D the difference of two N_ℤ(0, σ²)."""
    L = tail_cut(sigma)
    p, _ = discrete_gaussian_pmf(sigma, L)
    d = np.convolve(p, p)  # D = −2L..2L
    cdf = np.concatenate([[0.0], np.cumsum(d)])  # cdf[i] = Pr[D < i − 2L]
    gam = np.zeros(K + 1)
    for l in range(K + 1):
        m = abs(2 * l - K)
        if m == 0:
            continue
        hi = min(m - 1, 2 * L)  # Pr[−m ≤ D < m] = Pr[D ≤ m − 1] − Pr[D ≤ −m − 1]
        lo = max(-m - 1, -2 * L - 1)
        gam[l] = min(1.0, float(cdf[hi + 2 * L + 1] - cdf[lo + 2 * L + 1]))
    return gam


def difference_sf(sigma: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(q_lo, q_hi) with q_lo(k) ≤ Pr[D > k] + ½·Pr[D = k] ≤ q_hi(k) for k = 0..n (up to float rounding), D =
    Z₁ − Z₂ with Z₁, Z₂ independent N_ℤ(0, σ²) (a noisy tie of two classes counted half): q_lo sums the kept
    noise (|Z| ≤ L, the law of D there by one convolution, summed from the top), q_hi adds the dropped mass
    2·Pr[|Z| > L] (:func:`discrete_gaussian_pmf`), capped at 1. Both decrease in k."""
    L = tail_cut(sigma)
    p, tail = discrete_gaussian_pmf(sigma, L)
    pd = np.convolve(p, p)  # D = −2L..2L, both kept
    sf = np.cumsum(pd[::-1])[::-1] - 0.5 * pd  # sf[i] = Pr[D > i − 2L] + ½·Pr[D = i − 2L], both kept
    k = np.arange(n + 1)
    lo = np.maximum(0.0, np.where(k <= 2 * L, sf[np.minimum(k + 2 * L, 4 * L)], 0.0))
    return lo, np.minimum(1.0, lo + 2 * tail)


def _gauss_legendre01(n: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.legendre.leggauss(n)
    return 0.5 * (x + 1.0), 0.5 * w


def multiclass_wrong(K: int, C: int, sigma: float, prior: MulticlassPrior) -> float:
    """Pr[GNMax_σ answers one given wrong class w] under ``prior`` (module docstring), plus the dropped
    noise mass."""
    Y, R = prior.count_pmfs(K, C)
    Z = normaliser(Y, R, K, C)
    L = tail_cut(sigma)
    p, tail = discrete_gaussian_pmf(sigma, L)
    F = np.concatenate([[0.0], np.cumsum(p)])  # F[i] = Pr[Z ≤ i − L − 1]
    nodes, weights = _gauss_legendre01(max(1, (C + 1) // 2))
    N = _fft_length((C - 1) * K)
    x = np.arange(K + 1)
    vs = np.arange(-L, K + L + 1)
    b = np.arange(K + 1)
    total = 0.0
    rows = [(v, j) for v in vs for j in range(nodes.size)]
    from scipy import fft

    step = max(1, CHUNK_CELLS // N)
    for lo in range(0, len(rows), step):
        chunk = rows[lo : lo + step]
        v = np.array([r[0] for r in chunk])[:, None]
        u = nodes[[r[1] for r in chunk]][:, None]
        k = v - x[None, :]  # v − x
        pk = np.where(np.abs(k) <= L, p[np.clip(k + L, 0, 2 * L)], 0.0)
        Fk = F[np.clip(k + L, 0, 2 * L + 1)]  # Pr[Z ≤ v − x − 1]
        G = Fk + u * pk
        spec = fft.rfft(Y * G, N, axis=1)
        if C > 2:
            spec = spec * fft.rfft(R * G, N, axis=1) ** (C - 2)
        poly = fft.irfft(spec, N, axis=1)[:, : K + 1]
        kb = v - b[None, :]  # v − b
        pb = np.where(np.abs(kb) <= L, p[np.clip(kb + L, 0, 2 * L)], 0.0)
        contrib = (poly[:, K - b] * pb * R[None, :]).sum(axis=1)
        total += float(weights[[r[1] for r in chunk]] @ contrib)
    return max(0.0, total / Z) + C * tail


@lru_cache(maxsize=64)
def gnmax_error(K: int, C: int, sigma: float, prior: Prior | MulticlassPrior) -> float:
    """GNMax's expected error under ``prior`` (module docstring)."""
    if isinstance(prior, Prior):
        from darrm_opt.model.objective import expected_error

        _, tail = discrete_gaussian_pmf(sigma, tail_cut(sigma))
        return min(1.0, float(expected_error(binary_gamma(K, sigma), prior)) + 2 * tail)
    return min(1.0, (C - 1) * multiclass_wrong(K, C, sigma, prior))


@lru_cache(maxsize=64)
def subsampled_gnmax_error(K: int, m: int, C: int, sigma: float, prior: Prior | MulticlassPrior) -> float:
    """The expected error of GNMax_σ run on a uniform m-subset of the K teachers (drawn without replacement),
    measured as every GNMax offer's is (module docstring):

    - a 0/1-vote prior: against the majority of ALL K teachers. Given L ones among the K the subset holds
      j ~ Hypergeometric(K, L, m) ones, so the release is DaRRM of the K votes with the table
      Γ = :func:`~darrm_opt.model.neighbours.subsampled_table` of the m-teacher effective table
      :func:`binary_gamma` (m, σ); its error is DaRRM's (Def. 2.4) of Γ under the prior of the K votes, plus
      the dropped noise mass;
    - a class-label prior: against the true class y. Every class-label prior draws the K votes i.i.d. given y
      (and, for ``dirichlet``, the class probabilities π), so any m of them are the m votes of the same prior
      (Multinomial(m, q), Dirichlet-multinomial(m; α)): the error is :func:`gnmax_error` (m, C, σ)."""
    if m == K:
        return gnmax_error(K, C, sigma, prior)
    if isinstance(prior, Prior):
        from darrm_opt.model.neighbours import subsampled_table
        from darrm_opt.model.objective import expected_error

        _, tail = discrete_gaussian_pmf(sigma, tail_cut(sigma))
        gam = subsampled_table(K, binary_gamma(m, sigma))
        return min(1.0, float(expected_error(gam, prior)) + 2 * tail)
    return gnmax_error(m, C, sigma, prior)


@lru_cache(maxsize=16)
def max_count_law(K: int, C: int, prior: Prior | MulticlassPrior) -> np.ndarray:
    """Pr[max_c h_c = m], m = 0..K, under ``prior`` (for C = 2 and a 0/1 prior: max(L, K − L))."""
    if isinstance(prior, Prior):
        from darrm_opt.model.objective import expected_pmf

        alpha = expected_pmf(K, prior)
        out = np.zeros(K + 1)
        np.add.at(out, np.maximum(np.arange(K + 1), K - np.arange(K + 1)), alpha)
        return out
    Y, R = prior.count_pmfs(K, C)
    N = _fft_length(C * K)
    le = np.empty(K + 1)
    step = max(1, CHUNK_CELLS // N)
    for lo in range(0, K + 1, step):  # Pr[max ≤ m]·Z = [Y_{≤m} * R_{≤m}^{*(C−1)}](K), caps m in chunks
        caps = np.arange(lo, min(K + 1, lo + step))[:, None] >= np.arange(K + 1)[None, :]
        le[lo : lo + caps.shape[0]] = np.fft.irfft(
            np.fft.rfft(Y * caps, N, axis=1) * np.fft.rfft(R * caps, N, axis=1) ** (C - 1), N, axis=1)[:, K]
    law = np.maximum(np.diff(le, prepend=0.0), 0.0)
    return law / law.sum()


def abstain_probability(params: ConfidentGnmaxParams) -> float:
    """Pr[⊥] = Σ_m Pr[max h = m]·Pr[Z₁ < T − m] with Z₁ ~ N_ℤ(0, σ₁²)."""
    L = tail_cut(params.sigma1)
    p, tail = discrete_gaussian_pmf(params.sigma1, L)
    law = max_count_law(params.K, params.C, params.prior)
    m = np.arange(params.K + 1)
    need = np.ceil(params.threshold - m).astype(np.int64)  # answered iff Z₁ ≥ need
    cdf = np.concatenate([[0.0], np.cumsum(p)])  # cdf[i] = Pr[Z < i − L]
    below = np.where(need > L, 1.0, np.where(need < -L, 0.0, cdf[np.clip(need + L, 0, 2 * L + 1)]))
    return min(1.0, float(law @ below) + tail)


@lru_cache(maxsize=64)
def confident_error(params: ConfidentGnmaxParams) -> float:
    """Confident-GNMax's error bound Pr[⊥] + error(GNMax_σ₂) (module docstring)."""
    return min(1.0, abstain_probability(params) + gnmax_error(params.K, params.C, params.sigma2, params.prior))
