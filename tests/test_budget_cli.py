import json

import pytest
from typer.testing import CliRunner

from darrm_opt.cli import app

runner = CliRunner()


def _best(eps, delta, queries="20,50,100"):
    res = runner.invoke(app, ["budget", "--per-query", f"{eps},{delta}", "--queries", queries,
                              "--delta-prime", "1e-4", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert all(set(r) >= {"queries", "epsilon", "delta", "method"} for r in rows)
    return {r["queries"]: r for r in rows if r["method"] == "best"}, rows


def test_table2_mnist():
    best, rows = _best(0.2676, 3e-4)
    for q, (e, d) in {20: (5.352, 0.006), 50: (9.901, 0.015), 100: (15.044, 0.030)}.items():
        assert round(best[q]["epsilon"], 3) == e
        assert round(best[q]["delta"], 3) == d
    simple = {r["queries"]: r for r in rows if r["method"] == "simple"}
    assert simple[50]["epsilon"] == pytest.approx(50 * 0.2676)
    assert simple[50]["delta"] == pytest.approx(1 - (1 - 3e-4) ** 50)


def test_table5_and_fashion():
    best, _ = _best(0.0892, 1e-4)
    assert [round(best[q]["epsilon"], 3) for q in (20, 50, 100)] == [1.704, 2.837, 4.202]
    best, _ = _best(0.2556, 3e-4)
    assert [round(best[q]["epsilon"], 3) for q in (20, 50, 100)] == [5.112, 9.382, 14.219]


def test_table_format_and_errors():
    res = runner.invoke(app, ["budget", "--per-query", "0.2676,3e-4"])
    assert res.exit_code == 0 and "15.044" in res.stdout
    res = runner.invoke(app, ["budget", "--per-query", "0.2676"])
    assert res.exit_code != 0 and "per-query" in res.output
    res = runner.invoke(app, ["budget", "--per-query", "0.2676,3e-4", "--queries", "2.5"])
    assert res.exit_code != 0 and "queries" in res.output
