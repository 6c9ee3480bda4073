"""Readable output: the table view explains l and "—", the certificate states its bound and names the worst
multiset's corners in words, budget prints δ in scientific notation."""

from __future__ import annotations

import math

from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.cli.render import corner_words, multiset_words
from darrm_opt.model.corners import corner_exprs

runner = CliRunner()


def test_every_corner_has_its_own_words():
    e, d = math.exp(0.1), 1e-5
    words = [corner_words(p, q) for p, q in corner_exprs(0.1, d)]
    assert words[:3] == ["always vote 0", "vote 1 only on D′ (probability 1e-05)",
                         "vote 1 only on D (probability 1e-05)"]
    assert words[4:7] == ["always vote 1", "vote 0 only on D′ (probability 1e-05)",
                          "vote 0 only on D (probability 1e-05)"]
    hi = f"{(e + d) / (e + 1):.4g}"
    assert words[3] == f"vote 1 with probability {hi} on D and {(1 - d) / (e + 1):.4g} on D′ (randomised response)"
    assert len(set(words)) == 8
    pure = [corner_words(p, q) for p, q in corner_exprs(0.1, 0)]
    assert pure[0] == "always vote 0" and pure[2] == "always vote 1" and "randomised response" in pure[1]


def test_multiset_words_skip_empty_corners():
    corners = [list(c) for c in corner_exprs(0.1, 1e-5)]
    assert multiset_words([0, 0, 4, 7, 0, 0, 0, 0], corners).startswith(
        "4 teachers vote 1 only on D (probability 1e-05); 7 teachers vote 1 with probability 0.525 on D")
    assert multiset_words([1, 0, 0, 0, 0, 0, 0, 0], corners) == "1 teacher always vote 0"


def test_table_view_explains_l_dash_and_bound():
    r = runner.invoke(app, ["solve", "--K", "11", "--m", "3", "-q"])
    assert r.exit_code == 0, r.output
    out = r.output
    assert "l: number of teachers voting 1" in out
    assert "— γ_DSub unavailable: γ_DSub is defined for pure DP only" in out  # the reason of each "—"
    assert "γ_Sub unavailable" not in out  # γ_Sub is shown, so it is not explained away
    assert "<= bound e^(mε) − 1 + 2δ = 0.349918806976" in out
    assert "worst multiset: 4 teachers vote 1 only on D (probability 1e-05); 7 teachers vote 1" in out
    pure = runner.invoke(app, ["solve", "--K", "5", "--m", "2", "--teacher-delta", "0", "--delta", "0", "-q"])
    assert pure.exit_code == 0 and "unavailable" not in pure.output


def test_budget_prints_delta_in_scientific_notation():
    r = runner.invoke(app, ["budget", "--per-query", "0.1,1e-6", "--queries", "100", "--delta-prime", "1e-4"])
    assert r.exit_code == 0, r.output
    assert "each (0.1, 1.000e-06)-DP; δ′ = 1.000e-04" in r.output
    simple = next(line for line in r.output.splitlines() if "│" in line and " simple " in line)
    assert simple.split("│")[-1].strip() == f"{1 - (1 - 1e-6) ** 100:.3e}"  # 9.999e-05, not 0.000
