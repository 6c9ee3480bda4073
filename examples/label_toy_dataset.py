"""Label a small dataset end to end with private answers (PATE's setting, DaRRM's noise).

1. K = 11 teachers (scikit-learn logistic regressions), each trained on its own disjoint shard of the
   labelled data: one record changes one teacher, so one vote.
2. A plan for the job: the certified table whose Q answers fit the total budget (ε, δ), from
   `darrm-opt plan --teachers disjoint-nonprivate`, which weighs every mechanism (DaRRM tables, shaped
   tables, GNMax) by the exact composition of its privacy profile and picks the most accurate.
3. The teachers vote on Q unlabelled records; the answers are paid from a durable ledger first, then drawn.
4. A student trained only on those Q private labels; its accuracy on held-out data.

Run it with `python examples/label_toy_dataset.py [--queries 100] [--budget 8,1e-3] [--workdir DIR]`
(needs the `demo` and `service` extras: `pip install -e ".[demo,service]"`). It prints what it did and
ends with one JSON line (read by tests/test_examples.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from darrm_opt import Ledger, load_certified, release_answers

K = 11


def teachers_on_disjoint_shards(X: np.ndarray, y: np.ndarray, K: int, seed: int) -> list:
    """K models, the i-th fitted on the i-th of K disjoint shards of (X, y)."""
    order = np.random.default_rng(seed).permutation(len(y))
    models = []
    for shard in np.array_split(order, K):
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        models.append(model.fit(X[shard], y[shard]))
    return models


def plan_table(K: int, queries: int, budget: str, workdir: Path) -> Path:
    """The planned table file, from the command line (its one line of progress goes to stderr)."""
    out = workdir / "plan.json"
    cmd = [sys.executable, "-m", "darrm_opt", "plan", "--K", str(K), "--teachers", "disjoint-nonprivate",
           "--queries", str(queries), "--budget", budget, "--format", "json", "--out", str(out), "--quiet"]
    subprocess.run(cmd, check=True)
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=100, help="records to label (Q)")
    ap.add_argument("--budget", default="8,1e-3", help="total budget EPS,DELTA of the Q answers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=None, help="where plan.json and ledger.db go")
    args = ap.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="darrm-example-"))
    workdir.mkdir(parents=True, exist_ok=True)

    # The data: labelled records for the teachers, an unlabelled pool for the student, a test set.
    X, y = load_breast_cancer(return_X_y=True)
    X_private, X_rest, y_private, y_rest = train_test_split(X, y, train_size=0.55, random_state=args.seed,
                                                            stratify=y)
    X_pool, X_test, _, y_test = train_test_split(X_rest, y_rest, train_size=args.queries, random_state=args.seed,
                                                 stratify=y_rest)

    # 1. Teachers on disjoint shards.
    teachers = teachers_on_disjoint_shards(X_private, y_private, K, args.seed)
    votes = np.stack([t.predict(X_pool) for t in teachers], axis=1).astype(np.uint8)  # (Q, K) 0/1 votes
    print(f"{K} teachers on disjoint shards of {len(y_private)} records; "
          f"their plain majority labels the test set with accuracy "
          f"{np.mean((np.stack([t.predict(X_test) for t in teachers], 1).sum(1) > K / 2) == y_test):.3f}")

    # 2. A plan: the certified table whose Q answers fit the budget.
    table = load_certified(plan_table(K, args.queries, args.budget, workdir))
    eps, dlt = (float(v) for v in args.budget.split(","))
    print(f"planned table: the most accurate mechanism for the job is {table.kind}, per answer "
          f"(ε, δ) = ({table.epsilon0:.4g}, {table.delta0:.3g}), E[error] = {table.expected_error:.4g}")

    # 3. Answers paid through a durable ledger, then drawn.
    with Ledger(str(workdir / "ledger.db"), "toy-labels", epsilon_budget=eps, delta_budget=dlt) as ledger:
        labels = np.asarray(release_answers(table, votes, ledger))
        view = ledger.view()
    print(f"ledger 'toy-labels': {view['answers']} answers, ε spent {view['epsilon_spent']:.4f} of {eps:g} "
          f"at δ = {view['delta_target']:g} ({view['composition']} composition)")

    # 4. The student learns from the private labels only.
    student = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(X_pool, labels)
    accuracy = float(student.score(X_test, y_test))
    print(f"student trained on {len(labels)} private labels: test accuracy {accuracy:.3f}")
    result = {"queries": int(len(labels)), "epsilon_spent": float(view["epsilon_spent"]), "epsilon_budget": eps,
              "delta_target": float(view["delta_target"]), "composition": view["composition"],
              "mechanism": table.kind, "per_answer_epsilon": float(table.epsilon0), "student_accuracy": accuracy,
              "label_agreement": float(np.mean(labels == (votes.sum(1) > K / 2)))}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
