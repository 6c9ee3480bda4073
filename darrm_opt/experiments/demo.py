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
3. Non-private teachers for GNMax: the same model without noise on the same shards.
4. Each query is answered with per-query privacy (mε, δ), δ = 1 − (1 − Δ)^m ≈ mΔ, by
   DaRRM γ_opt (certified, optimised for the paper's prior), DaRRM γ_Sub (subsampling m of K teachers), and
   GNMax on the non-private votes with σ calibrated to (mε, δ) (:func:`darrm_opt.privacy.pate.calibrate_gnmax_sigma`).
5. For each Q, ``n_draws`` random draws of Q queries from the pool (and of the mechanisms' coins); label
   accuracy against the true labels: mean and standard deviation. The total privacy loss over Q queries is
   the better of simple and general composition (δ′ = 10⁻⁴), as the paper's Table 9.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.pate import gnmax_aggregate
from darrm_opt.release.aggregator import Aggregator

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
    sigma: float | None = None
    gamma_opt: tuple = ()
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
            "gnmax_sigma": self.sigma,
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


def private_logreg(X, y, epsilon: float, reg: float, rng: np.random.Generator) -> np.ndarray:
    """ε-DP weights by output perturbation (Chaudhuri et al. 2011, Alg. 1); rows must have ‖x‖ ≤ 1."""
    w = _fit_logreg(X, y, reg)
    d = w.size
    n = X.shape[0]
    norm = rng.gamma(shape=d, scale=2.0 / (n * reg * epsilon))
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    return w + norm * direction


def _shards(y: np.ndarray, K: int, rng: np.random.Generator) -> list[np.ndarray]:
    idx = rng.permutation(y.size)
    return [np.sort(s) for s in np.array_split(idx, K)]


def darrm_answer(votes: np.ndarray, K: int, gamma: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """DaRRM (Alg. 1) for vote counts ``votes``: the service's exact-coin aggregator, fed seeded bytes."""
    agg = Aggregator(gamma, random_bytes=rng.bytes)
    assert agg.K == K
    return agg.answers_from_counts(np.asarray(votes, dtype=np.intp))


def gnmax_answer(votes: np.ndarray, K: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """GNMax on two classes: the noisy argmax of the histogram (K − L, L) (PATE Sec. 4.1)."""
    L = np.asarray(votes, dtype=np.float64)
    return gnmax_aggregate(np.stack([K - L, L], axis=-1), sigma, rng)


def run_demo(config: DemoConfig | None = None, *, solver: str = "highs") -> DemoResult:
    """Run the teachers demo (see the module docstring)."""
    from darrm_opt.experiments.compare import budget_rows
    from darrm_opt.model.baselines import gamma_sub
    from darrm_opt.model.params import Params
    from darrm_opt.optimize.optimizer import solve
    from darrm_opt.privacy.pate import calibrate_gnmax_sigma

    c = config or DemoConfig()
    if c.n_draws < 1:
        raise InvalidParameter("draws", "must be >= 1", c.n_draws)
    if not (0.0 < c.test_fraction < 1.0):
        raise InvalidParameter("test_fraction", "must be in (0, 1)", c.test_fraction)
    if c.reg <= 0:
        raise InvalidParameter("reg", "must be > 0", c.reg)
    params = Params(K=c.K, m=c.m, epsilon=c.epsilon, teacher_delta=c.teacher_delta)
    if not params.m_is_integer:
        raise InvalidParameter("m", "the demo's γ_Sub needs an integer m", c.m)
    rng = np.random.default_rng(c.seed)

    X, y = load_binary_digits(c.classes)
    perm = rng.permutation(y.size)
    n_pool = int(round(c.test_fraction * y.size))
    pool, train = perm[:n_pool], perm[n_pool:]
    if max(c.queries) > n_pool:
        raise InvalidParameter("queries", f"must be <= the query pool size {n_pool}", max(c.queries))
    feats = public_features(X[pool], c.n_components)
    X = feats(X)
    Xp, yp = X[pool], y[pool]
    shards = _shards(y[train], c.K, rng)

    private_votes = np.zeros(n_pool, dtype=np.int64)
    public_votes = np.zeros(n_pool, dtype=np.int64)
    acc_priv, acc_pub = [], []
    for s in shards:
        Xs, ys = X[train][s], y[train][s]
        w_pub = _fit_logreg(Xs, ys, c.reg)
        w_priv = private_logreg(Xs, ys, c.epsilon, c.reg, rng)
        pred_pub = (Xp @ w_pub > 0).astype(np.int64)
        pred_priv = (Xp @ w_priv > 0).astype(np.int64)
        public_votes += pred_pub
        private_votes += pred_priv
        acc_pub.append(float(np.mean(pred_pub == yp)))
        acc_priv.append(float(np.mean(pred_priv == yp)))

    gamma_opt = np.asarray(solve(params, solver=solver).gamma)
    g_sub = np.asarray(gamma_sub(c.K, c.m), dtype=np.float64)
    cal = calibrate_gnmax_sigma(params.m * params.epsilon, float(params.delta), 1)

    rows = []
    for q in c.queries:
        accs = {"opt": [], "sub": [], "gnmax": []}
        for _ in range(c.n_draws):
            idx = rng.choice(n_pool, size=q, replace=False)
            truth = yp[idx]
            accs["opt"].append(np.mean(darrm_answer(private_votes[idx], c.K, gamma_opt, rng) == truth))
            accs["sub"].append(np.mean(darrm_answer(private_votes[idx], c.K, g_sub, rng) == truth))
            accs["gnmax"].append(np.mean(gnmax_answer(public_votes[idx], c.K, cal.sigma, rng) == truth))
        for name, a in accs.items():
            a = np.asarray(a, dtype=np.float64)
            rows.append({"queries": q, "method": name, "mean": float(a.mean()), "std": float(a.std()),
                         "accuracies": a.tolist()})

    privacy = []
    per_eps, per_delta = params.m * params.epsilon, float(params.delta)
    for r in budget_rows(per_eps, per_delta, c.queries, c.delta_prime):
        if r["method"] == "best":
            privacy.append({"queries": r["queries"], "per_query_epsilon": per_eps, "per_query_delta": per_delta,
                            "total_epsilon": r["epsilon"], "total_delta": r["delta"], "rule": r["rule"]})
    return DemoResult(
        config=c, rows=rows, privacy=privacy,
        teacher_accuracy={"private_mean": float(np.mean(acc_priv)), "non_private_mean": float(np.mean(acc_pub)),
                          "private": acc_priv, "non_private": acc_pub,
                          "private_majority": float(np.mean((private_votes >= (c.K + 1) // 2) == yp)),
                          "non_private_majority": float(np.mean((public_votes >= (c.K + 1) // 2) == yp))},
        sigma=cal.sigma, gamma_opt=tuple(float(g) for g in gamma_opt), pool_size=int(n_pool),
        shard_size=int(min(len(s) for s in shards)),
    )
