"""Text views of results for the terminal (rich tables rendered to plain text)."""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table

from darrm_opt.certify.certificate import Certificate
from darrm_opt.model.params import Params

LABELS = {"opt": "γ_opt", "sub": "γ_Sub", "dsub": "γ_DSub", "const": "γ_const", "gnmax": "GNMax"}


def recording_console() -> Console:
    """A console that renders to text only (``export_text``), never to the terminal."""
    return Console(record=True, width=120, file=open(os.devnull, "w"), highlight=False)


def fmt_error(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f}"


def certificate_line(cert: Certificate) -> str:
    status = "CERTIFIED" if cert.certified else "VIOLATED"
    rel = "<=" if cert.certified else ">"
    return (
        f"certificate: {status}: max privacy cost {cert.max_privacy_cost:.12g} {rel} bound {cert.bound:.12g} "
        f"over {cert.multisets_checked:,} corner multisets (worst multiset {cert.worst_multiset}; "
        f"{cert.high_precision_checked} re-checked in {40}-digit arithmetic)"
    )


def render_gamma_table(params: Params, columns: dict[str, list[str]], errors: dict, cert: Certificate,
                       seconds: float, solver: str, mode: str) -> str:
    """The ``solve`` table view: one row per l, one column per certified γ, expected errors below."""
    console = recording_console()
    console.print(
        f"DaRRM γ for K={params.K} teachers, each (ε={params.epsilon:g}, Δ={params.teacher_delta:g})-DP, "
        f"released as a (mε={params.m * params.epsilon:g}, δ={params.delta:.6g})-DP majority "
        f"(m={params.m:g}, prior {params.prior.spec}, solver {solver}, {mode} mode, {seconds:.3f} s)",
        soft_wrap=True,
    )
    t = Table(show_edge=False, pad_edge=False)
    t.add_column("l", justify="right", min_width=8)
    for name in columns:
        t.add_column(name, justify="right")
    for l in range(params.K + 1):
        t.add_row(str(l), *(col[l] for col in columns.values()))
    t.add_section()
    t.add_row(r"E\[error]", *(fmt_error(errors.get(k)) for k in errors))
    console.print(t)
    console.print("values are rounded down; each printed column is certified (mε, δ)-DP as printed")
    console.print(certificate_line(cert), soft_wrap=True)
    return console.export_text()


def render_compare(rows, epsilon: float, teacher_delta: float, error_keys) -> str:
    """The ``compare`` table view: one row per m."""
    con = recording_console()
    p0 = rows[0].params
    con.print(f"Expected error, K={p0.K} teachers each (ε={epsilon:g}, Δ={teacher_delta:g})-DP; γ_opt "
              f"optimised for prior {p0.prior.spec}; errors under actual {rows[0].actual}")
    t = Table(show_edge=False, pad_edge=False)
    for col in ("m", "mε", "δ", *(LABELS[k] for k in error_keys), "GNMax σ"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(f"{r.m:g}", f"{r.m * epsilon:g}", f"{r.params.delta:.4g}",
                  *(fmt_error(r.errors.get(k)) for k in error_keys),
                  "—" if r.sigma is None else f"{r.sigma:.4f}")
    con.print(t)
    con.print("— : undefined (γ_Sub/γ_DSub need integer m; γ_DSub pure DP; GNMax needs δ > 0)")
    return con.export_text()


def render_budget(rows: list[dict], eps: float, dlt: float, delta_prime: float) -> str:
    """The ``budget`` table view: one row per (Q, method)."""
    con = recording_console()
    con.print(f"Total privacy loss of Q answers, each ({eps:g}, {dlt:g})-DP; δ′ = {delta_prime:g}")
    t = Table(show_edge=False, pad_edge=False)
    for col in ("Q", "method", "ε", "δ"):
        t.add_column(col, justify="right")
    for r in rows:
        name = r["method"] + (f" ({r['rule']})" if "rule" in r else "")
        t.add_row(str(r["queries"]), name, f"{r['epsilon']:.3f}", f"{r['delta']:.3f}")
    con.print(t)
    return con.export_text()


def render_grid(sols, seconds: float) -> str:
    """The ``grid`` table view: one row per certified table."""
    console = recording_console()
    t = Table(title=f"{len(sols)} certified tables in {seconds:.1f} s")
    for col in ("K", "m", "δ", "E[error]", "max cost", "bound", "multisets", "seconds"):
        t.add_column(col.replace("[", r"\["), justify="right")
    for s in sols:
        c = s.certificate
        t.add_row(str(s.params.K), f"{s.params.m:g}", f"{s.params.delta:.3g}", f"{s.expected_error:.4f}",
                  f"{c.max_privacy_cost:.10f}", f"{c.bound:.10f}", f"{c.multisets_checked:,}",
                  f"{s.seconds:.2f}")
    console.print(t)
    return console.export_text()


def render_demo(res) -> str:
    """The teachers demo's table view: label accuracy per Q and method."""
    c = res.config
    con = recording_console()
    ta = res.teacher_accuracy
    con.print(f"digits {c.classes[0]} vs {c.classes[1]}: K={c.K} teachers on disjoint shards of ≥{res.shard_size} "
              f"images; query pool {res.pool_size}; private teachers ({c.epsilon:g}, {c.teacher_delta:g})-DP, "
              f"m={c.m:g}; GNMax σ={res.sigma:.4f}")
    con.print(f"teacher accuracy on the pool: private {ta['private_mean']:.3f} "
              f"(majority {ta['private_majority']:.3f}), "
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


def render_table_budget(rows: list[dict], params: Params) -> str:
    """The ``budget --table`` view: one row per (Q, method), exact composition first."""
    con = recording_console()
    con.print(f"Total privacy loss of Q answers of the table K = {params.K}, m = {params.m:g}, "
              f"ε = {params.epsilon:g}, δ = {params.delta:.3g}")
    t = Table(show_edge=False, pad_edge=False)
    for col in ("Q", "method", "ε", "δ_total"):
        t.add_column(col, justify="right")
    for r in rows:
        eps = "—" if r["epsilon"] is None else f"{r['epsilon']:.4f}"
        t.add_row(str(r["queries"]), r["method"], eps, f"{r['delta']:.4g}")
    con.print(t)
    return con.export_text()
