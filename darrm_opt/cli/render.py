"""Text views of results for the terminal (rich tables rendered to plain text)."""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table

from darrm_opt.certify.certificate import Certificate
from darrm_opt.certify.words import certificate_line, corner_words, multiset_words  # noqa: F401 - re-used names
from darrm_opt.model.params import Params

LABELS = {"opt": "γ_opt", "sub": "γ_Sub", "dsub": "γ_DSub", "const": "γ_const", "const_opt": "γ_const_opt",
          "gnmax": "GNMax", "gnmax_paper": "GNMax (paper σ)", "majority": "majority"}


def recording_console() -> Console:
    """A console that renders to text only (``export_text``), never to the terminal."""
    return Console(record=True, width=120, file=open(os.devnull, "w"), highlight=False)


def fmt_error(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f}"


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
    console.print("l: number of teachers voting 1; γ(l): probability of releasing their majority (else a fair coin)")
    console.print("values are rounded down; each printed column is certified (mε, δ)-DP as printed")
    console.print(certificate_line(cert), soft_wrap=True)
    return console.export_text()


def render_compare(rows, epsilon: float, teacher_delta: float, error_keys) -> str:
    """The ``compare`` table view: one row per m; unavailable methods and the teacher setting below."""
    con = recording_console()
    p0 = rows[0].params
    who = ("non-private teachers on disjoint shards, per answer (mε, δ)" if rows[0].teachers == "disjoint-nonprivate"
           else f"teachers each (ε={epsilon:g}, Δ={teacher_delta:g})-DP")
    con.print(f"Expected error, K={p0.K} {who}; γ_opt optimised for prior {p0.prior.spec}; errors under actual "
              f"{rows[0].actual}", soft_wrap=True)
    keys = [k for k in error_keys if any(k in r.errors for r in rows)]
    t = Table(show_edge=False, pad_edge=False)
    for col in ("m", "mε", "δ", *(LABELS[k] for k in keys), "GNMax σ", "paper σ"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(f"{r.m:g}", f"{r.m * r.params.epsilon:g}", f"{r.params.delta:.4g}",
                  *(fmt_error(r.errors.get(k)) for k in keys),
                  *("—" if s is None else f"{s:.4f}" for s in (r.sigma, r.sigmas.get("rdp"))))
    con.print(t)
    con.print("GNMax: σ calibrated exactly for the one bit it releases (exact-one-bit); paper σ: RDP with the "
              "classic conversion (App. D.2.1)", soft_wrap=True)
    reasons = {(k, why) for r in rows for k, why in r.unavailable.items()}
    for k, why in sorted(reasons):
        con.print(f"— {LABELS.get(k, k)} unavailable: {why}", soft_wrap=True)
    con.print(f"teachers: {rows[0].teachers}: {rows[0].note.get('note', '')}", soft_wrap=True)
    return con.export_text()


def render_budget(rows: list[dict], eps: float, dlt: float, delta_prime: float) -> str:
    """The ``budget`` table view: one row per (Q, method)."""
    con = recording_console()
    con.print(f"Total privacy loss of Q answers, each ({eps:g}, {dlt:.3e})-DP; δ′ = {delta_prime:.3e}")
    t = Table(show_edge=False, pad_edge=False)
    for col in ("Q", "method", "ε", "δ"):
        t.add_column(col, justify="right")
    for r in rows:
        name = r["method"] + (f" ({r['rule']})" if "rule" in r else "")
        t.add_row(str(r["queries"]), name, f"{r['epsilon']:.3f}", f"{r['delta']:.3e}")
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
    """The teachers demo's table view: label accuracy per Q and method, in both teacher settings."""
    c = res.config
    con = recording_console()
    ta = res.teacher_accuracy
    con.print(f"digits {c.classes[0]} vs {c.classes[1]}: K={c.K} teachers; query pool {res.pool_size}; private "
              f"teachers ({c.epsilon:g}, {c.teacher_delta:g})-DP by output perturbation, m={c.m:g}", soft_wrap=True)
    con.print(f"shared: each teacher sees the whole training set (DaRRM's setting); accuracy {ta['shared_mean']:.3f} "
              f"(majority {ta['shared_majority']:.3f})", soft_wrap=True)
    con.print(f"disjoint: shards of ≥{res.shard_size} images; private {ta['private_mean']:.3f} (majority "
              f"{ta['private_majority']:.3f}), non-private {ta['non_private_mean']:.3f} (majority "
              f"{ta['non_private_majority']:.3f}); GNMax σ={res.sigma:.4f} (exact one-bit), "
              f"{res.sigma_paper:.4f} (paper's RDP)", soft_wrap=True)
    names = {"opt": "γ_opt", "sub": "γ_Sub", "majority": "majority", "pate_opt": "PATE γ_opt", "gnmax": "GNMax",
             "gnmax_paper": "GNMax₀"}
    p0 = res.privacy[0]
    con.print(f"shared: γ_opt, γ_Sub on the shared teachers; disjoint: the private teachers' plain majority, and on "
              f"the non-private votes PATE γ_opt and GNMax (exact σ; GNMax₀: paper's σ); per query "
              f"({p0['per_query_epsilon']:.4g}, {p0['per_query_delta']:.2g})", soft_wrap=True)
    t = Table(show_edge=False, pad_edge=False, title=f"label accuracy, mean (std) over {c.n_draws} draws")
    for col in ("Q", *names.values(), "total (ε, δ)"):
        t.add_column(col, justify="right")
    priv = {p["queries"]: p for p in res.privacy}
    for q in c.queries:
        cells = []
        for name in names:
            r = next(r for r in res.rows if r["queries"] == q and r["method"] == name)
            cells.append(f"{r['mean']:.3f} ({r['std']:.3f})")
        p = priv[q]
        t.add_row(str(q), *cells, f"({p['total_epsilon']:.3f}, {p['total_delta']:.3f}) {p['rule']}")
    con.print(t)
    con.print(f"total (ε, δ) is for the per-query mechanisms; the disjoint private majority's total is the cap "
              f"({res.cap[0]:g}, {res.cap[1]:g}) for any Q (parallel composition)", soft_wrap=True)
    return con.export_text()


def render_table_budget(rows: list[dict], table: str) -> str:
    """The ``budget --table`` view: one row per (Q, method), exact composition first; ``table`` describes
    the table (its kind's ``describe``)."""
    con = recording_console()
    con.print(f"Total privacy loss of Q answers of {table}", soft_wrap=True)
    t = Table(show_edge=False, pad_edge=False)
    for col in ("Q", "method", "ε", "δ_total"):
        t.add_column(col, justify="right")
    for r in rows:
        eps = "—" if r["epsilon"] is None else f"{r['epsilon']:.4f}"
        t.add_row(str(r["queries"]), r["method"], eps, f"{r['delta']:.4g}")
    con.print(t)
    return con.export_text()
