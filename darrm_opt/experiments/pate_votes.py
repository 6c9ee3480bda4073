"""Synthetic teacher vote histograms for PATE's data-dependent experiments (a documented generator).

PATE's Table 2 MNIST row (Papernot et al. 2018, App. B.6) was computed on the votes of 250 MNIST teachers
on 640 student queries, which are not published. :func:`mnist_like_votes` draws a stand-in whose
statistics match the three data-dependent figures the row reports (E[answered] 283 of 640 at T = 200,
σ₁ = 150; E[RDP] 1.18 at λ = 14 for σ₂ = 40; E[SS_β] 0.0618 at β = 0.0329):

* with probability ``hard`` = 0.19 a query is hard: its class probabilities π ~ Dirichlet(1, …, 1);
* otherwise π ~ Dirichlet(13.5, 3.4, 0.02, …, 0.02): a true class, one confusable class, the rest rare;
* the K votes are i.i.d. from π (a Dirichlet-multinomial histogram); class 0 is the true class.

The parameters were fitted by a grid search on those three figures (averaged over 4 seeds: 281, 1.20,
0.0583); they are not MNIST's. :func:`dirichlet_votes` is the issue's consensus prior (Dirichlet(AY, AW…)),
the law of :class:`darrm_opt.model.multiclass.MulticlassPrior` ``dirichlet:AY,AW``.
"""

from __future__ import annotations

import numpy as np

from darrm_opt.errors import InvalidParameter

MNIST_LIKE = {"hard": 0.19, "true": 13.5, "confuser": 3.4, "rest": 0.02}


def _rng(seed: int) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InvalidParameter("seed", "must be an integer", seed)
    return np.random.default_rng(int(seed))


def dirichlet_votes(K: int, C: int, a_true: float, a_wrong: float, n: int, seed: int) -> np.ndarray:
    """``n`` histograms (shape (n, C), int64) of K votes i.i.d. from π ~ Dirichlet(a_true, a_wrong, …)."""
    rng = _rng(seed)
    pi = rng.dirichlet([a_true] + [a_wrong] * (C - 1), size=n)
    return np.asarray(rng.multinomial(K, pi), dtype=np.int64).reshape(n, C)


def mnist_like_votes(n: int = 640, seed: int = 0, K: int = 250, C: int = 10) -> np.ndarray:
    """``n`` MNIST-like histograms (module docstring), shape (n, C), int64."""
    rng = _rng(seed)
    p = MNIST_LIKE
    easy = np.array([p["true"], p["confuser"]] + [p["rest"]] * (C - 2))
    out = np.empty((n, C), dtype=np.int64)
    for i in range(n):
        alpha = np.ones(C) if rng.random() < p["hard"] else easy
        out[i] = rng.multinomial(K, rng.dirichlet(alpha))
    return out
