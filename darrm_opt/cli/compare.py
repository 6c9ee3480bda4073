"""``darrm-opt compare``, ``plot``, ``budget`` and ``demo``."""

from __future__ import annotations

import json
import os
from enum import Enum
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from ..compare import ERROR_KEYS, budget_rows, compare as compare_rows, error_curves, parse_actual, parse_float_list
from ..errors import InvalidParameter
from .common import handle_errors, write_output

LABELS = {"opt": "γ_opt", "sub": "γ_Sub", "dsub": "γ_DSub", "const": "γ_const", "gnmax": "GNMax"}


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


def _console() -> Console:
    return Console(record=True, width=120, file=open(os.devnull, "w"), highlight=False)


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.4f}"


def _rows(K, m, epsilon, teacher_delta, delta, prior, actual, solver):
    ms = parse_float_list(m, "m")
    act = parse_actual(actual)
    return compare_rows(K, ms, epsilon=epsilon, teacher_delta=teacher_delta, delta=delta, prior=prior,
                        actual=act, solver=solver)


def _int_list(text: str, name: str) -> list[int]:
    vals = parse_float_list(text, name)
    if any(v != int(v) or v < 1 for v in vals):
        raise InvalidParameter(name, "must be a comma-separated list of integers >= 1", text)
    return [int(v) for v in vals]


def _pair(text: str, name: str) -> tuple[float, float]:
    vals = parse_float_list(text, name)
    if len(vals) != 2:
        raise InvalidParameter(name, "must be two numbers EPS,DELTA", text)
    return vals[0], vals[1]


def register(app: typer.Typer) -> None:
    @app.command()
    def compare(
        K: int = typer.Option(11, "--K", "-K", help="number of teachers (odd)"),
        m: str = typer.Option("1,3,5,7", "--m", help="privacy allowances, comma-separated"),
        epsilon: float = typer.Option(0.1, "--epsilon", help="each teacher's ε"),
        teacher_delta: float = typer.Option(1e-5, "--teacher-delta", help="each teacher's Δ"),
        delta: Optional[float] = typer.Option(None, "--delta", help="target δ (default 1 − (1 − Δ)^m)"),
        prior: str = typer.Option("paper", "--prior", help="prior γ_opt is optimised for"),
        actual: str = typer.Option("prior", "--actual",
                                   help="prior | paper | iid-uniform:A,B | common-uniform:A,B | fixed:P"),
        solver: str = typer.Option("highs", "--solver"),
        fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
        out: Optional[Path] = typer.Option(None, "--out", help="write the result here instead of stdout"),
    ) -> None:
        """Expected error of γ_opt, γ_Sub, γ_DSub, γ_const and GNMax at the same (mε, δ), per m."""
        with handle_errors():
            rows = _rows(K, m, epsilon, teacher_delta, delta, prior, actual, solver)
            if fmt is OutputFormat.json:
                text = json.dumps([r.to_dict() for r in rows], indent=2)
            else:
                con = _console()
                p0 = rows[0].params
                con.print(f"Expected error, K={K} teachers each (ε={epsilon:g}, Δ={teacher_delta:g})-DP; γ_opt "
                          f"optimised for prior {p0.prior.spec}; errors under actual {rows[0].actual}")
                t = Table(show_edge=False, pad_edge=False)
                for col in ("m", "mε", "δ", *(LABELS[k] for k in ERROR_KEYS), "GNMax σ"):
                    t.add_column(col, justify="right")
                for r in rows:
                    t.add_row(f"{r.m:g}", f"{r.m * epsilon:g}", f"{r.params.delta:.4g}",
                              *(_fmt(r.errors.get(k)) for k in ERROR_KEYS),
                              "—" if r.sigma is None else f"{r.sigma:.4f}")
                con.print(t)
                con.print("— : undefined (γ_Sub/γ_DSub need integer m; γ_DSub pure DP; GNMax needs δ > 0)")
                text = con.export_text()
            write_output(text, out)

    @app.command()
    def plot(
        out: Path = typer.Option(..., "--out", help="figure path (.png or .svg)"),
        K: int = typer.Option(11, "--K", "-K"),
        m: str = typer.Option("1,3,5,7", "--m"),
        epsilon: float = typer.Option(0.1, "--epsilon"),
        teacher_delta: float = typer.Option(1e-5, "--teacher-delta"),
        delta: Optional[float] = typer.Option(None, "--delta"),
        prior: str = typer.Option("paper", "--prior"),
        solver: str = typer.Option("highs", "--solver"),
        points: int = typer.Option(101, "--points", help="grid points of p in [0, 1]"),
    ) -> None:
        """γ shapes over l and error curves E(DaRRM_γ) against i.i.d. p, one panel per m (Figure 2)."""
        with handle_errors():
            from ..plots import plot_comparison

            if points < 2:
                raise InvalidParameter("points", "must be >= 2", points)
            rows = _rows(K, m, epsilon, teacher_delta, delta, prior, "prior", solver)
            ps = np.linspace(0.0, 1.0, points)
            panels = [{"m": r.m, "gammas": r.gammas, "p": ps, "curves": error_curves(r.gammas, ps)} for r in rows]
            path = plot_comparison(panels, out, title=f"K={K}, ε={epsilon:g}, Δ={teacher_delta:g}, "
                                                      f"γ_opt for prior {rows[0].params.prior.spec}")
            typer.echo(f"wrote {path}")

    @app.command()
    def budget(
        per_query: str = typer.Option(..., "--per-query", help="per-query EPS,DELTA"),
        queries: str = typer.Option("20,50,100", "--queries", help="numbers of queries Q"),
        delta_prime: float = typer.Option(1e-4, "--delta-prime", help="δ′ of general composition"),
        fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
        out: Optional[Path] = typer.Option(None, "--out"),
    ) -> None:
        """Total privacy loss over Q queries: simple (Thm 2.2), general (Thm 2.3) and the best (Table 2)."""
        with handle_errors():
            eps, dlt = _pair(per_query, "per-query")
            rows = budget_rows(eps, dlt, _int_list(queries, "queries"), delta_prime)
            if fmt is OutputFormat.json:
                text = json.dumps(rows, indent=2)
            else:
                con = _console()
                con.print(f"Total privacy loss of Q answers, each ({eps:g}, {dlt:g})-DP; δ′ = {delta_prime:g}")
                t = Table(show_edge=False, pad_edge=False)
                for col in ("Q", "method", "ε", "δ"):
                    t.add_column(col, justify="right")
                for r in rows:
                    name = r["method"] + (f" ({r['rule']})" if "rule" in r else "")
                    t.add_row(str(r["queries"]), name, f"{r['epsilon']:.3f}", f"{r['delta']:.3f}")
                con.print(t)
                text = con.export_text()
            write_output(text, out)

    @app.command()
    def demo(
        what: str = typer.Argument("teachers", help="the demo to run: teachers"),
        epsilon: float = typer.Option(0.0892, "--epsilon", help="each private teacher's ε (paper MNIST: 0.0892)"),
        teacher_delta: float = typer.Option(1e-4, "--teacher-delta"),
        m: float = typer.Option(3, "--m"),
        queries: str = typer.Option("20,50,100", "--queries"),
        draws: int = typer.Option(10, "--draws"),
        seed: int = typer.Option(0, "--seed"),
        fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table | json"),
        plot_out: Optional[Path] = typer.Option(None, "--plot", help="also write an accuracy plot (.png/.svg)"),
        out: Optional[Path] = typer.Option(None, "--out"),
    ) -> None:
        """Digits 5 vs 8, K=11 teachers: accuracy of DaRRM γ_opt, γ_Sub and GNMax over Q queries (Table 1)."""
        with handle_errors():
            from ..demo import DemoConfig, run_demo

            if what != "teachers":
                raise InvalidParameter("demo", "must be 'teachers'", what)
            cfg = DemoConfig(m=m, epsilon=epsilon, teacher_delta=teacher_delta,
                             queries=tuple(_int_list(queries, "queries")), n_draws=draws, seed=seed)
            res = run_demo(cfg)
            if plot_out is not None:
                from ..plots import plot_demo

                plot_demo(res.rows, plot_out, title=f"digits 5 vs 8, K={cfg.K}, per query "
                                                    f"({cfg.m * cfg.epsilon:g}, {res.privacy[0]['per_query_delta']:.2g})")
            text = json.dumps(res.to_dict(), indent=2) if fmt is OutputFormat.json else render_demo(res)
            write_output(text, out)


def render_demo(res) -> str:
    c = res.config
    con = _console()
    ta = res.teacher_accuracy
    con.print(f"digits {c.classes[0]} vs {c.classes[1]}: K={c.K} teachers on disjoint shards of ≥{res.shard_size} "
              f"images; query pool {res.pool_size}; private teachers ({c.epsilon:g}, {c.teacher_delta:g})-DP, "
              f"m={c.m:g}; GNMax σ={res.sigma:.4f}")
    con.print(f"teacher accuracy on the pool: private {ta['private_mean']:.3f} (majority {ta['private_majority']:.3f}), "
              f"non-private {ta['non_private_mean']:.3f} (majority {ta['non_private_majority']:.3f})")
    t = Table(show_edge=False, pad_edge=False, title=f"label accuracy, mean (std) over {c.n_draws} draws")
    for col in ("Q", "DaRRM γ_opt", "DaRRM γ_Sub", "GNMax", "per query (ε, δ)", "total (ε, δ)"):
        t.add_column(col, justify="right")
    priv = {p["queries"]: p for p in res.privacy}
    for q in c.queries:
        cells = []
        for name in ("opt", "sub", "gnmax"):
            r = next(r for r in res.rows if r["queries"] == q and r["method"] == name)
            cells.append(f"{r['mean']:.3f} ({r['std']:.3f})")
        p = priv[q]
        t.add_row(str(q), *cells, f"({p['per_query_epsilon']:.4g}, {p['per_query_delta']:.2g})",
                  f"({p['total_epsilon']:.3f}, {p['total_delta']:.3f}) {p['rule']}")
    con.print(t)
    return con.export_text()
