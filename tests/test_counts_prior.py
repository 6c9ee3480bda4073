"""The ``counts:`` prior (issue 35's weak-agreement job): the law of L, the number of 1-votes, written out
(``counts:225=0.9,126..224=0.1``), validated when parsed and against K when a job is made, read by every
binary kind through E[α_l] (:func:`darrm_opt.model.objective.expected_pmf`) and refused by the class-label
kinds with the reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import plan_job
from darrm_opt.model.objective import expected_pmf
from darrm_opt.model.params import Prior
from darrm_opt.model.pmf import binomial_pmf
from darrm_opt.planning.job import Job
from darrm_opt.planning.stability_plan import distance_law

ROOT = Path(__file__).resolve().parents[1]
JOB = dict(K=11, queries=10, budget_epsilon=2.0, budget_delta=1e-5)


def test_the_issue_law_as_written() -> None:
    p = Prior.parse("counts:225=0.9,126..224=0.1")
    alpha = expected_pmf(250, p)
    assert alpha[225] == 0.9 and alpha[126] == pytest.approx(0.1 / 99, rel=1e-15)
    assert alpha[:126].sum() == 0 and alpha[226:].sum() == 0 and (alpha[126:225] == alpha[126]).all()
    assert alpha.sum() == pytest.approx(1.0, abs=1e-15)
    assert p.spec == "counts:225=0.9,126..224=0.1" and Prior.parse(p.spec) == p
    assert Prior.parse(" counts: 225 = 0.9 , 126..224=0.1 ") == p


def test_overlapping_items_add_and_weights_are_divided_by_their_sum() -> None:
    alpha = expected_pmf(4, Prior.parse("counts:0..4=0.5,4=0.5"))
    assert alpha.tolist() == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.6], abs=1e-16)
    within = expected_pmf(3, Prior.parse("counts:3=0.6,2=0.4000000001"))  # 1 + 1e-10: within 1e-9
    assert within.sum() == pytest.approx(1.0, abs=1e-15) and within[3] == pytest.approx(0.6 / 1.0000000001)


@pytest.mark.parametrize("spec", [
    "counts:", "counts:3", "counts:3=", "counts:3=x", "counts:-1=1", "counts:2.5=1", "counts:4..2=1",
    "counts:3=0.5", "counts:3=1.1,2=-0.1", "counts:3=nan", "counts:3=inf", "counts:a..b=1", "counts:1..=1",
])
def test_bad_laws_are_refused_naming_prior(spec: str) -> None:
    with pytest.raises(InvalidParameter, match="^invalid prior: "):
        Prior.parse(spec)


def test_counts_beyond_K_are_refused_when_the_job_is_made() -> None:
    with pytest.raises(InvalidParameter, match=r"^invalid prior: .counts. puts weight on L = 12 > K = 11"):
        Job(**JOB, prior="counts:12=1")
    with pytest.raises(InvalidParameter, match="prior"):
        expected_pmf(11, Prior.parse("counts:0..12=1"))
    assert Job(**JOB, prior="counts: 11=1").prior == "counts:11=1.0"  # the canonical spelling


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.floats(0.5, 1.0))
def test_a_written_out_binomial_is_the_iid_prior(K: int, q: float) -> None:
    """A ``counts`` law that writes out Binomial(K, q) term by term is the i.i.d. prior of mean q."""
    pmf = binomial_pmf(K, q)
    spec = "counts:" + ",".join(f"{l}={w!r}" for l, w in enumerate(pmf.tolist()))
    a, b = 2 * q - 1, 1.0  # Uniform[a, b] has mean q
    got = expected_pmf(K, Prior.parse(spec))
    if a >= 0.5 and a < b:
        np.testing.assert_allclose(got, expected_pmf(K, Prior("iid-uniform", a, b)), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(got, pmf / pmf.sum(), rtol=1e-12, atol=1e-300)


def _paper_as_counts(K: int) -> str:
    return "counts:" + ",".join(f"{l}={w!r}" for l, w in enumerate(binomial_pmf(K, 0.75).tolist()))


def test_every_binary_kind_plans_the_written_out_paper_prior_as_paper() -> None:
    """Every kind that plans 0/1 votes reads a ``counts`` prior through E[α]: the paper prior written out
    gets the same offers (errors within float rounding) as ``paper``."""
    _, want, refused_want = plan_job(Job(**JOB, prior="paper"))
    _, got, refused = plan_job(Job(**JOB, prior=_paper_as_counts(11)))
    assert refused == refused_want
    assert [(o.label, o.epsilon_spent) for o in got] == [(o.label, o.epsilon_spent) for o in want]
    for g, w in zip(got, want, strict=True):
        assert g.expected_error == pytest.approx(w.expected_error, rel=1e-9, abs=1e-15)
    assert {"darrm-pate", "darrm-pate-shaped", "gnmax", "confident-gnmax", "stability"} <= {o.label for o in got}


def test_shared_teachers_plan_a_counts_prior() -> None:
    job = dict(K=11, queries=1, budget_epsilon=1.0, budget_delta=1e-5, teachers="shared", epsilon=0.1,
               teacher_delta=1e-6)
    _, want, _ = plan_job(Job(**job, prior="paper"), kinds=["darrm"])
    _, got, _ = plan_job(Job(**job, prior=_paper_as_counts(11)), kinds=["darrm"])
    assert got[0].expected_error == pytest.approx(want[0].expected_error, rel=1e-6)


def test_the_weak_agreement_law_of_d() -> None:
    """The stability release reads L's law: g = |2L − K|, d = max(0, ⌈g/2⌉ − 1) = L − 126 for L ≥ 126, K = 250."""
    law = distance_law(250, None, "counts:225=0.9,126..224=0.1")
    assert law.mass[99] == 0.9 and law.mass[:99] == pytest.approx([0.1 / 99] * 99, rel=1e-12)
    assert law.mass[100:].sum() == 0 and not law.wrong.any()


@pytest.mark.parametrize("classes", [2, 3])
def test_class_label_kinds_refuse_a_counts_prior_with_the_reason(classes: int) -> None:
    with pytest.raises(InvalidParameter, match="no mechanism fits") as err:
        plan_job(Job(**JOB, classes=classes, prior="counts:11=1"))
    reason = "'counts' is a law of the count of 1-votes: a prior for 0/1 votes"
    for kind in ("darrm-multiclass", "gnmax", "confident-gnmax", "stability"):
        assert f"{kind}: invalid prior: {reason}" in str(err.value)


@pytest.mark.slow  # a fresh interpreter
def test_cli_plan_takes_a_counts_prior(tmp_path) -> None:
    script = Path(sys.executable).with_name("darrm-opt")
    exe = [str(script)] if script.exists() else [sys.executable, "-m", "darrm_opt"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    base = [*exe, "plan", "--K", "11", "--teachers", "disjoint-nonprivate", "--queries", "10", "--budget", "2,1e-5",
            "--format", "json", "-q"]
    r = subprocess.run([*base, "--prior", "counts:10=0.9,6..9=0.1"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["plan"]["job"]["prior"] == "counts:10=0.9,6..9=0.1"
    _, found, _ = plan_job(Job(**JOB, prior="counts:10=0.9,6..9=0.1"))
    assert doc["expected_error"] == found[0].expected_error
    bad = subprocess.run([*base, "--prior", "counts:12=1"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode != 0 and "prior" in bad.stderr and "Traceback" not in bad.stderr
