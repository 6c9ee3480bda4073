"""End-to-end demo: private majority labels from K teachers on scikit-learn's digits (5 vs 8).

The DaRRM paper's Sec. 6.2 / Tables 1, 6–9 on a dataset that ships with scikit-learn (no download):

1. Digits 5 and 8 of ``sklearn.datasets.load_digits`` (~356 images of 8×8 pixels). A random stratified
   split gives a query pool (``test_fraction``) and a training set, cut into K disjoint shards.
2. Private teachers: L2-regularised logistic regression released by *output perturbation* (Chaudhuri,
   Monteleoni & Sarwate 2011, Alg. 1), which is ε-DP: every record is scaled to ‖x‖ ≤ 1 (with a constant
   feature for the intercept), the minimiser w* of (1/n)Σ log(1 + e^{−y wᵀx}) + (λ/2)‖w‖² has
   L2-sensitivity 2/(nλ), and w* + b with density ∝ exp(−nλε‖b‖/2) (‖b‖ ~ Gamma(d, 2/(nλε)), uniform
   direction) is ε-DP. Pure ε-DP implies (ε, Δ)-DP for every Δ, so the teachers are (ε, Δ)-DP with the
   paper's Δ = 10⁻⁴. (diffprivlib's LogisticRegression would do the same job, but diffprivlib 0.6 does not
   import with the installed scikit-learn: ``sklearn.tree._tree.DOUBLE`` is gone. The guarantee assumes the
   minimiser is exact; L-BFGS stops at tolerance 1e-10.)
3. Two teacher settings (:mod:`darrm_opt.model.neighbours`), both reported:

   - ``shared`` (the setting DaRRM is for): K private teachers that each see the *whole* training set
     (independent output-perturbation noise). Each query is answered with per-query (mε, δ),
     δ = 1 − (1 − Δ)^m, by DaRRM γ_opt (certified, optimised for the paper's prior) and γ_Sub.
   - ``disjoint`` shards (the paper's Sec. 6.2 and PATE): K teachers on disjoint shards. Private ones:
     by parallel composition the K teachers together are (ε, Δ)-DP, so the plain majority of their votes
     (``majority``) is free: its total stays (ε, Δ) for any number of queries. Non-private ones (the PATE
     setting, L moves by one): DaRRM's PATE-setting γ_opt (``pate_opt``) and GNMax at the exact one-bit σ
     (``gnmax``) and at the paper's RDP σ (``gnmax_paper``), all at per-query (mε, δ).
4. For each Q, ``n_draws`` random draws of Q queries from the pool (and of the mechanisms' coins); label
   accuracy against the true labels: mean and standard deviation. The total privacy loss over Q queries of
   a per-query (mε, δ) mechanism is the better of simple and general composition (δ′ = 10⁻⁴), as the
   paper's Table 9; the disjoint private majority's total is the cap (ε, Δ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms.vote_samplers import BinarySampler
from darrm_opt.model.neighbours import SETTING_NOTES
from darrm_opt.privacy.gnmax import gnmax_aggregate

#: The paper's MNIST setting: each teacher (0.0892, 1e-4)-DP, m = 3 ⇒ (0.2676, 3e-4) per query.
PAPER_EPSILON = 0.0892
PAPER_TEACHER_DELTA = 1e-4


@dataclass(frozen=True)
class DemoConfig:
    K: int = 11
    m: float = 3
    epsilon: float = PAPER_EPSILON
    teacher_delta: float = PAPER_TEACHER_DELTA
    queries: tuple[int, ...] = (20, 50, 100)
    n_draws: int = 10
    reg: float = 0.05  #: λ of the regularised logistic regression
    n_components: int = 5  #: PCA dimensions (fitted on the public query pool)
    test_fraction: float = 0.35
    delta_prime: float = 1e-4
    classes: tuple[int, int] = (5, 8)
    seed: int = 0

    @classmethod
    def small(cls, **kw) -> DemoConfig:
        """A CI-sized run (a few seconds)."""
        return cls(**{"queries": (10, 20), "n_draws": 3, **kw})


@dataclass
class DemoResult:
    config: DemoConfig
    rows: list[dict]  #: {queries, method, mean, std, accuracies}
    privacy: list[dict]  #: {queries, per_query_epsilon, per_query_delta, total_epsilon, total_delta, rule}
    teacher_accuracy: dict = field(default_factory=dict)  #: mean accuracy of private / non-private teachers
    sigma: float | None = None  #: GNMax's σ at the exact one-bit calibration
    gamma_opt: tuple = ()
    sigma_paper: float | None = None  #: GNMax's σ by the paper's RDP recipe
    cap: tuple[float, float] = (0.0, 0.0)  #: the disjoint private teachers' total (ε, Δ)
    pool_size: int = 0
    shard_size: int = 0

    def to_dict(self) -> dict:
        c = self.config
        return {
            "config": {"K": c.K, "m": c.m, "epsilon": c.epsilon, "teacher_delta": c.teacher_delta,
                       "queries": list(c.queries), "n_draws": c.n_draws, "reg": c.reg, "seed": c.seed,
                       "classes": list(c.classes)},
            "pool_size": self.pool_size,
            "shard_size": self.shard_size,
            "teacher_accuracy": self.teacher_accuracy,
            "gnmax_sigma": {"exact-one-bit": self.sigma, "rdp": self.sigma_paper},
            "settings": {"shared": SETTING_NOTES["shared"],
                         "disjoint": {"private": SETTING_NOTES["disjoint-private"],
                                      "nonprivate": SETTING_NOTES["disjoint-nonprivate"],
                                      "total_cap": {"epsilon": self.cap[0], "delta": self.cap[1]}}},
            "gamma_opt": list(self.gamma_opt),
            "accuracy": [{k: v for k, v in r.items() if k != "accuracies"} for r in self.rows],
            "privacy": self.privacy,
        }


def load_binary_digits(classes=(5, 8)):
    """Digits of the two classes as (X, y): raw pixels / 16, y ∈ {0, 1} (1 for the second class)."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, classes)
    return X[keep].astype(np.float64) / 16.0, (y[keep] == classes[1]).astype(np.int64)


def public_features(X_pool: np.ndarray, n_components: int):
    """A feature map fitted on the *public, unlabelled* query pool only (as in PATE's semi-supervised
    setting): PCA to ``n_components`` dimensions, scaled so the pool's 90th-percentile norm is 1/√2, each
    row clipped to norm 1/√2 and a constant 1/√2 appended (the intercept), so every ‖x‖ ≤ 1. It is fixed
    before the teachers see their data, so it costs no privacy of the training set."""
    from sklearn.decomposition import PCA

    pca = PCA(n_components=n_components, random_state=0).fit(X_pool)
    scale = float(np.quantile(np.linalg.norm(pca.transform(X_pool), axis=1), 0.9)) or 1.0

    def transform(X):
        Z = pca.transform(X) / scale / math.sqrt(2.0)
        n = np.linalg.norm(Z, axis=1, keepdims=True)
        Z = Z / np.maximum(1.0, n * math.sqrt(2.0))
        return np.hstack([Z, np.full((Z.shape[0], 1), 1.0 / math.sqrt(2.0))])

    return transform


def _fit_logreg(X: np.ndarray, y: np.ndarray, reg: float) -> np.ndarray:
    """argmin_w (1/n) Σ log(1 + e^{−y' wᵀx}) + (reg/2)‖w‖², y' = ±1 (no separate intercept)."""
    from sklearn.linear_model import LogisticRegression

    n = X.shape[0]
    if np.unique(y).size < 2:  # a one-class shard: the regularised minimiser still exists; solve directly
        from scipy.optimize import minimize

        s = 2.0 * y - 1.0

        def f(w):
            z = s * (X @ w)
            return np.mean(np.logaddexp(0.0, -z)) + 0.5 * reg * w @ w, \
                -(X.T @ (s / (1.0 + np.exp(z)))) / n + reg * w

        return minimize(f, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B", tol=1e-12).x
    lr = LogisticRegression(C=1.0 / (n * reg), fit_intercept=False, tol=1e-10, max_iter=10_000)
    lr.fit(X, y)
    return lr.coef_.ravel().copy()


def output_perturbation(w: np.ndarray, n: int, epsilon: float, reg: float, rng: np.random.Generator) -> np.ndarray:
    """w + b, ‖b‖ ~ Gamma(d, 2/(nλε)) in a uniform direction: ε-DP for the exact minimiser w on n records."""
    d = w.size
    norm = rng.gamma(shape=d, scale=2.0 / (n * reg * epsilon))
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    return w + norm * direction


def _shards(y: np.ndarray, K: int, rng: np.random.Generator) -> list[np.ndarray]:
    idx = rng.permutation(y.size)
    return [np.sort(s) for s in np.array_split(idx, K)]


def darrm_answer(votes: np.ndarray, K: int, gamma: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """DaRRM (Alg. 1) for vote counts ``votes``: the service's exact-coin aggregator, fed seeded bytes."""
    agg = BinarySampler([float(x) for x in gamma], random_bytes=rng.bytes)
    assert agg.K == K
    return agg.answers_from_counts(np.asarray(votes, dtype=np.intp))


def gnmax_answer(votes: np.ndarray, K: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """GNMax on two classes: the noisy argmax of the histogram (K − L, L) (PATE Sec. 4.1)."""
    L = np.asarray(votes, dtype=np.float64)
    return np.asarray(gnmax_aggregate(np.stack([K - L, L], axis=-1), sigma, rng))


@dataclass(frozen=True)
class _Data:
    """The public query pool (features, labels) and the labelled training set, after the public feature map."""

    X_pool: np.ndarray
    y_pool: np.ndarray
    X_train: np.ndarray
    y_train: np.ndarray


def _check_config(c: DemoConfig):
    from darrm_opt.model.params import Params

    if c.n_draws < 1:
        raise InvalidParameter("draws", "must be >= 1", c.n_draws)
    if not (0.0 < c.test_fraction < 1.0):
        raise InvalidParameter("test_fraction", "must be in (0, 1)", c.test_fraction)
    if c.reg <= 0:
        raise InvalidParameter("reg", "must be > 0", c.reg)
    params = Params(K=c.K, m=c.m, epsilon=c.epsilon, teacher_delta=c.teacher_delta)
    if not params.m_is_integer:
        raise InvalidParameter("m", "the demo's γ_Sub needs an integer m", c.m)
    return params


def _load(c: DemoConfig, rng: np.random.Generator) -> _Data:
    X, y = load_binary_digits(c.classes)
    perm = rng.permutation(y.size)
    n_pool = int(round(c.test_fraction * y.size))
    pool, train = perm[:n_pool], perm[n_pool:]
    if max(c.queries) > n_pool:
        raise InvalidParameter("queries", f"must be <= the query pool size {n_pool}", max(c.queries))
    X = public_features(X[pool], c.n_components)(X)
    return _Data(X[pool], y[pool], X[train], y[train])


def _teacher_votes(c: DemoConfig, d: _Data, rng: np.random.Generator) -> tuple[dict, dict, int]:
    """Vote counts on the pool: ``shared`` (K private teachers on the whole training set), ``disjoint``
    private and non-private (K shards); per-teacher accuracies; the smallest shard size."""
    votes = {k: np.zeros(d.y_pool.size, dtype=np.int64) for k in ("shared", "private", "public")}
    acc: dict[str, list[float]] = {k: [] for k in votes}
    shards = _shards(d.y_train, c.K, rng)
    w_full = _fit_logreg(d.X_train, d.y_train, c.reg)
    for s in shards:
        Xs, ys = d.X_train[s], d.y_train[s]
        w_shard = _fit_logreg(Xs, ys, c.reg)
        weights = {"public": w_shard, "private": output_perturbation(w_shard, s.size, c.epsilon, c.reg, rng),
                   "shared": output_perturbation(w_full, d.y_train.size, c.epsilon, c.reg, rng)}
        for k, w in weights.items():
            pred = (d.X_pool @ w > 0).astype(np.int64)
            votes[k] += pred
            acc[k].append(float(np.mean(pred == d.y_pool)))
    return votes, acc, int(min(len(s) for s in shards))


def _mechanisms(c: DemoConfig, params, votes: dict, solver: str) -> tuple[dict, dict[str, Any]]:
    """name → (setting, answer(idx, rng)) for every labelling method, and the tables and σ behind them."""
    from darrm_opt.model.baselines import gamma_sub
    from darrm_opt.model.neighbours import PateParams
    from darrm_opt.optimize.optimizer import solve
    from darrm_opt.optimize.pate_setting import solve_pate
    from darrm_opt.privacy.gnmax import calibrate_gnmax

    eps, dlt = params.m * params.epsilon, float(params.delta)
    info: dict[str, Any] = {"gamma_opt": np.asarray(solve(params, solver=solver).gamma),
            "gamma_pate": np.asarray(solve_pate(PateParams(c.K, eps, dlt), solver=solver).gamma),
            "sigma": calibrate_gnmax(eps, dlt, "exact-one-bit", K=c.K).sigma,
            "sigma_paper": calibrate_gnmax(eps, dlt, "rdp").sigma}
    g_sub = np.asarray(gamma_sub(c.K, c.m), dtype=np.float64)
    half = (c.K + 1) // 2
    mech = {
        "opt": ("shared", lambda i, r: darrm_answer(votes["shared"][i], c.K, info["gamma_opt"], r)),
        "sub": ("shared", lambda i, r: darrm_answer(votes["shared"][i], c.K, g_sub, r)),
        "majority": ("disjoint", lambda i, r: (votes["private"][i] >= half).astype(np.int64)),
        "pate_opt": ("disjoint", lambda i, r: darrm_answer(votes["public"][i], c.K, info["gamma_pate"], r)),
        "gnmax": ("disjoint", lambda i, r: gnmax_answer(votes["public"][i], c.K, info["sigma"], r)),
        "gnmax_paper": ("disjoint", lambda i, r: gnmax_answer(votes["public"][i], c.K, info["sigma_paper"], r)),
    }
    return mech, info


def _accuracy_rows(c: DemoConfig, mech: dict, y_pool: np.ndarray, rng: np.random.Generator) -> list[dict]:
    rows = []
    for q in c.queries:
        accs: dict[str, list[float]] = {name: [] for name in mech}
        for _ in range(c.n_draws):
            idx = rng.choice(y_pool.size, size=q, replace=False)
            for name, (_, answer) in mech.items():
                accs[name].append(float(np.mean(answer(idx, rng) == y_pool[idx])))
        for name, a in accs.items():
            arr = np.asarray(a, dtype=np.float64)
            rows.append({"queries": q, "method": name, "setting": mech[name][0], "mean": float(arr.mean()),
                         "std": float(arr.std()), "accuracies": arr.tolist()})
    return rows


def _privacy_rows(c: DemoConfig, params) -> list[dict]:
    from darrm_opt.experiments.compare import budget_rows

    per_eps, per_delta = params.m * params.epsilon, float(params.delta)
    return [{"queries": r["queries"], "per_query_epsilon": per_eps, "per_query_delta": per_delta,
             "total_epsilon": r["epsilon"], "total_delta": r["delta"], "rule": r["rule"]}
            for r in budget_rows(per_eps, per_delta, c.queries, c.delta_prime) if r["method"] == "best"]


def run_demo(config: DemoConfig | None = None, *, solver: str = "highs") -> DemoResult:
    """Run the teachers demo in both teacher settings (see the module docstring)."""
    c = config or DemoConfig()
    params = _check_config(c)
    rng = np.random.default_rng(c.seed)
    data = _load(c, rng)
    votes, acc, shard_size = _teacher_votes(c, data, rng)
    mech, info = _mechanisms(c, params, votes, solver)
    rows = _accuracy_rows(c, mech, data.y_pool, rng)
    half = (c.K + 1) // 2
    teacher_accuracy = {
        "private_mean": float(np.mean(acc["private"])), "non_private_mean": float(np.mean(acc["public"])),
        "shared_mean": float(np.mean(acc["shared"])),
        "private": acc["private"], "non_private": acc["public"], "shared": acc["shared"],
        **{f"{k}_majority": float(np.mean((votes[v] >= half) == data.y_pool))
           for k, v in (("private", "private"), ("non_private", "public"), ("shared", "shared"))},
    }
    return DemoResult(config=c, rows=rows, privacy=_privacy_rows(c, params), teacher_accuracy=teacher_accuracy,
                      sigma=info["sigma"], gamma_opt=tuple(float(g) for g in info["gamma_opt"]),
                      pool_size=int(data.y_pool.size), shard_size=shard_size, sigma_paper=info["sigma_paper"],
                      cap=(c.epsilon, c.teacher_delta))
