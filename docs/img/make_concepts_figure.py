"""Draw docs/img/concepts.svg, the picture of README.md and docs/concepts.md: K = 11 teachers vote, l of them
say 1; DaRRM releases their majority with probability γ(l), else a fair coin. Shows γ_opt (certified, solved
here) against γ_Sub for (mε, δ) = (0.3, 3e-5). Run: python docs/img/make_concepts_figure.py (needs `plots`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from darrm_opt import Params, solve  # noqa: E402
from darrm_opt.model.baselines import gamma_sub  # noqa: E402

OUT = Path(__file__).with_name("concepts.svg")


def main() -> None:
    params = Params(K=11, m=3)
    sol = solve(params)
    ls = np.arange(params.K + 1)
    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "darrm"})
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    ax.bar(ls - 0.2, sol.gamma, width=0.4, label="γ_opt (certified optimal)", color="#1f77b4")
    ax.bar(ls + 0.2, gamma_sub(params.K, params.m), width=0.4, label="γ_Sub (the paper's closed form)", color="#bbbbbb")
    ax.axvline(params.K / 2, color="k", lw=0.8, ls=":")
    ax.text(params.K / 2 + 0.1, 1.04, "tie: K/2", fontsize=8)
    ax.set_xticks(ls)
    ax.set_xlabel("l = number of the K = 11 teachers voting 1")
    ax.set_ylabel("γ(l) = P(release the majority)")
    ax.set_ylim(0, 1.12)
    ax.set_title("Each answer: the majority with probability γ(l), else a fair coin;\n"
                 "each teacher (ε = 0.1, Δ = 1e-5)-DP, each answer (mε, δ) = (0.3, 3e-5)-DP (m = 3)", fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(OUT, format="svg", metadata={"Date": None})
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
