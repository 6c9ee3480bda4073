"""One job, one set of offers, whatever the spelling of its prior (issue 34): the job normalises its prior
once (``labels:`` is implied by class-label votes; for C = 2 ``beta:A,B`` is ``dirichlet:A,B``), and a 0/1-vote
``beta:A,B`` job gets GNMax's offers like any other 0/1-vote prior."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import plan_job
from darrm_opt.model.gnmax import gnmax_error
from darrm_opt.model.params import Prior
from darrm_opt.planning.job import Job, normal_prior

ROOT = Path(__file__).resolve().parents[1]
JOB = dict(K=11, queries=10, budget_epsilon=2.0, budget_delta=1e-5)


def offers(**kw) -> list[tuple[str, str, float, float]]:
    _, found, refused = plan_job(Job(**JOB, **kw))
    return [(o.mechanism, o.accounting, o.expected_error, o.epsilon_spent) for o in found] + \
        [(k, "refused", 0.0, 0.0) for k in sorted(refused)]


def test_normal_prior_values():
    assert normal_prior("labels:paper", 2) == "paper"
    assert normal_prior(" labels:dirichlet:9,1", 3) == "dirichlet:9,1"
    assert normal_prior("beta:9,1", 2) == "dirichlet:9,1"
    assert normal_prior("labels:beta:9,1", 2) == "dirichlet:9,1"
    assert normal_prior("beta:9,1", None) == "beta:9,1"  # 0/1 votes keep their prior
    assert normal_prior("beta:9,1", 3) == "beta:9,1"  # no such class-label prior: the kinds refuse it
    assert Job(**JOB, classes=2, prior="labels:iid-uniform:0.6,1").prior == "iid-uniform:0.6,1"
    with pytest.raises(InvalidParameter, match="prior"):
        Job(**JOB, prior=None)  # type: ignore[arg-type]


def test_labels_prefix_gives_the_same_offers():
    plain = offers(classes=2, prior="paper")
    assert offers(classes=2, prior="labels:paper") == plain
    assert [m for m, *_ in plain][:1] == ["darrm-multiclass"]


def test_beta_is_the_two_class_dirichlet():
    want = offers(classes=2, prior="dirichlet:9,1")
    assert offers(classes=2, prior="beta:9,1") == want
    assert offers(classes=2, prior="labels:dirichlet:9,1") == want
    assert {m for m, acc, *_ in want if acc != "refused"} >= {"darrm-multiclass", "gnmax", "confident-gnmax"}


def test_binary_beta_prior_gets_gnmax_offers():
    chosen, found, refused = plan_job(Job(**JOB, prior="beta:9,1"))
    by = {o.mechanism: o for o in found}
    assert {"darrm-pate", "gnmax", "confident-gnmax"} <= set(by) and not any("gnmax" in k for k in refused)
    g = by["gnmax"]
    sigma = g.details["sigma"]
    assert g.expected_error == pytest.approx(gnmax_error(11, 2, sigma, Prior.parse("beta:9,1")), rel=1e-12)
    assert g.epsilon_spent <= 2.0 and chosen.expected_error <= g.expected_error


@pytest.mark.slow  # fresh interpreters
def test_cli_plan_json_is_the_same_for_both_spellings(tmp_path):
    script = Path(sys.executable).with_name("darrm-opt")
    exe = [str(script)] if script.exists() else [sys.executable, "-m", "darrm_opt"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    docs = []
    for prior in ("paper", "labels:paper"):
        r = subprocess.run([*exe, "plan", "--K", "11", "--classes", "2", "--queries", "10", "--budget", "2,1e-5",
                            "--prior", prior, "--format", "json", "-q"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        docs.append((doc["mechanism"], doc["expected_error"], doc["epsilon_spent"], doc["plan"]["job"]["prior"],
                     sorted((a["mechanism"], a["accounting"], a["expected_error"]) for a in doc["alternatives"])))
    assert docs[0] == docs[1] and docs[0][0] == "darrm-multiclass" and docs[0][3] == "paper"

