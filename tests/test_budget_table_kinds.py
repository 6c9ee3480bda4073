"""``darrm-opt budget --table`` on PATE-setting (disjoint-nonprivate) and multi-class table files, run as a
subprocess: the Q answers are composed exactly from the table's own privacy profile
(:func:`darrm_opt.privacy.pair_profile.pate_profile`, :func:`~darrm_opt.privacy.pair_profile.multiclass_profile`)
next to basic, general and optimal composition of its per-answer (ε, δ)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli

from darrm_opt.privacy import accounting, pld
from darrm_opt.privacy.pair_profile import multiclass_profile, pate_profile
from darrm_opt.release.table_file import load_any_table

# slow tier: subprocess CLI runs, each solving or composing a K = 7..11 table
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DELTA_TOTAL = 1e-4
QUERIES = (1, 5, 20)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, timeout=240, module=True)


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("budget-kinds")
    for name, args in (("pate", ("--K", "11", "--teachers", "disjoint-nonprivate", "--target-epsilon", "0.5",
                                 "--delta", "1e-5")),
                       ("multiclass", ("--K", "7", "--classes", "3", "--target-epsilon", "1", "--delta", "1e-6",
                                       "--no-baselines"))):
        r = cli("solve", *args, "--format", "json", "--out", f"{name}.json", "-q", cwd=d)
        assert r.returncode == 0, r.stderr
    return {"pate": d / "pate.json", "multiclass": d / "multiclass.json"}


PROFILES = {"pate": pate_profile, "multiclass": multiclass_profile}
PER_ANSWER = {"pate": (0.5, 1e-5), "multiclass": (1.0, 1e-6)}


@pytest.mark.parametrize("kind", ["pate", "multiclass"])
def test_budget_of_a_table_composes_its_own_profile(tables, kind):
    path = tables[kind]
    r = cli("budget", "--table", str(path), "--queries", ",".join(map(str, QUERIES)), "--delta-total",
            str(DELTA_TOTAL), "--format", "json", "-q", cwd=path.parent)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["method"] for row in rows] == ["exact", "basic", "general", "optimal"] * len(QUERIES)
    by = {(row["queries"], row["method"]): row for row in rows}
    eps = {k: math.inf if row["epsilon"] is None else row["epsilon"] for k, row in by.items()}  # null: ∞
    eps0, delta0 = PER_ANSWER[kind]
    params, gamma = load_any_table(path)
    profile = PROFILES[kind](params, gamma)
    exact = [eps[(q, "exact")] for q in QUERIES]
    for q, e in zip(QUERIES, exact):
        assert by[(q, "exact")]["delta"] == DELTA_TOTAL
        assert e == pld.exact_epsilon([(profile, q)], DELTA_TOTAL)  # the table's own profile, composed
        assert pld.exact_delta([(profile, q)], e) <= DELTA_TOTAL * (1 + 1e-9)
        assert by[(q, "basic")]["epsilon"] == pytest.approx(q * eps0, rel=1e-15)
        assert by[(q, "basic")]["delta"] == pytest.approx(1 - (1 - delta0) ** q, rel=1e-12)
        assert eps[(q, "optimal")] == accounting.optimal_epsilon(eps0, delta0, q, DELTA_TOTAL)
        assert e <= eps[(q, "general")] and e <= q * eps0
    # one answer: at most the table's per-answer ε, and where its own profile crosses δ_total (within 0.1 %)
    assert exact[0] <= eps0
    assert profile.delta(exact[0]) <= DELTA_TOTAL < profile.delta(exact[0] * (1 - 1e-3))
    assert all(a < b for a, b in zip(exact, exact[1:]))  # more answers cost more
    # 20 answers of the (0.5, 1e-5) PATE table: basic composition alone spends δ = 2e-4 > δ_total, so no
    # generic (ε, δ) rule reaches δ_total; the table's own profile does (its δ(ε′) falls below 1e-5)
    if kind == "pate":
        assert by[(20, "optimal")]["epsilon"] is None and by[(20, "general")]["epsilon"] is None
        assert math.isfinite(exact[-1])
    # the recomputed profile holds the statement the table is certified for
    assert profile.delta(eps0) <= delta0


def test_the_paper_target_without_delta_total(tables):
    r = cli("budget", "--table", str(tables["pate"]), "--queries", "10", "--delta-prime", "1e-4", "--format",
            "json", "-q", cwd=tables["pate"].parent)
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)[0]
    assert row["method"] == "exact" and row["delta"] == pytest.approx(1 - (1 - 1e-5) ** 10 * (1 - 1e-4), rel=1e-12)
    assert 0 < row["epsilon"] < 10 * 0.5


@pytest.mark.parametrize("kind, header", [("pate", "PATE-setting table K = 11"),
                                          ("multiclass", "multi-class table K = 7, C = 3")])
def test_the_table_view_names_the_kind(tables, kind, header):
    r = cli("budget", "--table", str(tables[kind]), "--queries", "5", "-q", cwd=tables[kind].parent)
    assert r.returncode == 0, r.stderr
    assert header in r.stdout and "exact" in r.stdout and "optimal" in r.stdout


@pytest.mark.parametrize("kind", ["pate", "multiclass"])
def test_an_uncertified_table_is_refused(tables, kind, tmp_path):
    doc = json.loads(tables[kind].read_text())
    g = np.array(doc["gamma"])
    doc["gamma"] = list(np.where(g > 0, np.minimum(1.0, g * 1.01), 0.0))  # every row scales with γ
    doc.pop("privacy_profile")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = cli("budget", "--table", str(bad), "--queries", "5", "--format", "json", "-q", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    assert "is not (ε, δ)-DP per answer" in r.stderr and "Traceback" not in r.stderr
