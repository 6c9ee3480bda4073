"""Figures (matplotlib, Agg backend): functions that take computed data and a path, and write PNG or SVG.

Nothing here computes a γ; callers pass the tables (see :mod:`darrm_opt.experiments.compare` and
:mod:`darrm_opt.experiments.demo`). The format follows the suffix of the path (``.png`` or ``.svg``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from darrm_opt.errors import InvalidParameter, TableFileError  # noqa: E402

#: Labels and styles of the methods, in the paper's notation.
STYLES = {
    "opt": dict(label="DaRRM γ_opt", color="tab:red", marker="o"),
    "sub": dict(label="γ_Sub (subsampling)", color="tab:blue", marker="s"),
    "dsub": dict(label="γ_DSub (double subsampling)", color="tab:green", marker="^"),
    "const": dict(label="γ_const (randomized response)", color="tab:gray", marker="x"),
    "const_opt": dict(label="γ_const_opt (best certified constant)", color="tab:brown", marker="+"),
    "gnmax": dict(label="GNMax (exact one-bit σ)", color="tab:purple", marker="d"),
    "gnmax_paper": dict(label="GNMax (paper's RDP σ)", color="tab:pink", marker="v"),
    "majority": dict(label="plain majority (free under the cap)", color="black", marker="."),
}
#: line styles per method, so that curves lying on top of each other stay visible
LINESTYLES = {"opt": "-", "sub": "--", "dsub": ":", "const": "-.", "gnmax": (0, (5, 1, 1, 1))}
FORMATS = (".png", ".svg")
DPI = 100


def _check_path(path) -> Path:
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise InvalidParameter("out", "must end in .png or .svg", str(path))
    return p


def _save(fig, path: Path) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format=path.suffix.lower()[1:], dpi=DPI)
    except OSError as exc:
        raise TableFileError(f"cannot write figure {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return path


def plot_comparison(panels: Sequence[Mapping], path, *, title: str | None = None,
                    panel_size: tuple[float, float] = (4.0, 3.2)) -> Path:
    """γ shapes over l (top row) and error curves against p (bottom row), one column per m.

    ``panels``: one mapping per m with keys ``m``, ``gammas`` ({method: γ(0..K) or None}), ``p`` (grid of
    p) and ``curves`` ({method: errors at each p}). The figure is ``len(panels)·panel_size[0]`` by
    ``2·panel_size[1]`` inches at :data:`DPI`.
    """
    path = _check_path(path)
    n = len(panels)
    if n == 0:
        raise InvalidParameter("m", "need at least one panel")
    w, h = panel_size
    fig, axes = plt.subplots(2, n, figsize=(w * n, 2 * h), squeeze=False)
    for j, panel in enumerate(panels):
        ax_g, ax_e = axes[0, j], axes[1, j]
        for name, g in panel["gammas"].items():
            if g is None:
                continue
            g = np.asarray(g, dtype=float)
            st = STYLES.get(name, dict(label=name))
            ax_g.plot(np.arange(g.size), g, linewidth=1.2, markersize=4, linestyle=LINESTYLES.get(name, "-"),
                      markerfacecolor="none", **st)
        release = (f": ({panel['epsilon0']:g}, {panel['delta']:.3g})-DP" if "delta" in panel else "")
        ax_g.set_title(f"m = {panel['m']:g}{release}", fontsize="medium")
        ax_g.set_xlabel("l (votes for 1)")
        ax_g.set_ylim(-0.03, 1.03)
        if j == 0:
            ax_g.set_ylabel("γ(l)")
        ps = np.asarray(panel["p"], dtype=float)
        for name, e in panel["curves"].items():
            st = dict(STYLES.get(name, dict(label=name)))
            ax_e.plot(ps, np.asarray(e, dtype=float), linewidth=1.4, linestyle=LINESTYLES.get(name, "-"),
                      markevery=max(1, ps.size // 10), markersize=4, markerfacecolor="none", **st)
        ax_e.set_xlabel("p (i.i.d. p_i = p)")
        if j == 0:
            ax_e.set_ylabel("E(DaRRM_γ)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    for ax in axes.ravel():
        for hd, lb in zip(*ax.get_legend_handles_labels()):
            if lb not in labels:
                handles.append(hd)
                labels.append(lb)
    fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize="small")
    if title:
        fig.suptitle(title, fontsize="medium")
    fig.tight_layout(rect=(0, 0.07, 1, 0.95 if title else 1))
    return _save(fig, path)


def plot_demo(results: Sequence[Mapping], path, *, title: str | None = None,
              size: tuple[float, float] = (6.4, 4.0)) -> Path:
    """Label accuracy (mean ± std over draws) against Q, one line per method.

    ``results``: mappings with keys ``queries``, ``method``, ``mean``, ``std``.
    """
    path = _check_path(path)
    fig, ax = plt.subplots(figsize=size)
    methods = list(dict.fromkeys(r["method"] for r in results))
    for name in methods:
        rows = sorted((r for r in results if r["method"] == name), key=lambda r: r["queries"])
        q = [r["queries"] for r in rows]
        st = STYLES.get(name, dict(label=name))
        ax.errorbar(q, [r["mean"] for r in rows], yerr=[r["std"] for r in rows], capsize=3, **st)
    ax.set_xlabel("Q (number of queries)")
    ax.set_ylabel("label accuracy")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title, fontsize="medium")
    fig.tight_layout()
    return _save(fig, path)
