"""Teachers demo (DaRRM paper Sec. 6.2 on scikit-learn's digits, 5 vs 8).

    .venv/bin/python examples/teachers_demo.py [--small] [--plot FIG.png]

Prints the accuracy table (mean and std over draws) and the total privacy loss; see darrm_opt/demo.py.
"""

from __future__ import annotations

import argparse

from darrm_opt.cli.render import render_demo
from darrm_opt.experiments.demo import DemoConfig, run_demo
from darrm_opt.experiments.plots import plot_demo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="CI size (fewer queries and draws)")
    ap.add_argument("--epsilon", type=float, default=0.0892)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", default=None)
    a = ap.parse_args()
    cfg = (DemoConfig.small if a.small else DemoConfig)(epsilon=a.epsilon, seed=a.seed)
    res = run_demo(cfg)
    print(render_demo(res))
    if a.plot:
        plot_demo(res.rows, a.plot, title="digits 5 vs 8, K=11")
        print(f"wrote {a.plot}")


if __name__ == "__main__":
    main()
