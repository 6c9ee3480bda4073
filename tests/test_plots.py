import numpy as np
import pytest
from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.errors import InvalidParameter
from darrm_opt.experiments.plots import DPI, plot_comparison, plot_demo

PNG = b"\x89PNG\r\n\x1a\n"


def _size(path):
    import matplotlib.image as mpimg

    return mpimg.imread(path).shape[:2]


def _panels(n):
    ps = np.linspace(0, 1, 11)
    return [{"m": m, "gammas": {"opt": np.linspace(0, 1, 12), "sub": None}, "p": ps,
             "curves": {"opt": ps * (1 - ps)}} for m in range(1, n + 1)]


def test_comparison_png_and_svg(tmp_path):
    p = plot_comparison(_panels(2), tmp_path / "f.png", panel_size=(4.0, 3.0))
    assert p.read_bytes()[:8] == PNG
    assert _size(p) == (2 * 3 * DPI, 2 * 4 * DPI)
    s = plot_comparison(_panels(1), tmp_path / "f.svg")
    assert s.read_text().lstrip().startswith("<?xml") and "<svg" in s.read_text()
    with pytest.raises(InvalidParameter):
        plot_comparison(_panels(1), tmp_path / "f.jpg")


def test_demo_plot(tmp_path):
    rows = [{"queries": q, "method": k, "mean": 0.7, "std": 0.1} for q in (20, 50) for k in ("opt", "gnmax")]
    p = plot_demo(rows, tmp_path / "d.png", size=(5.0, 4.0))
    assert p.read_bytes()[:8] == PNG and _size(p) == (4 * DPI, 5 * DPI)


@pytest.mark.slow  # four K = 11 solves and a figure
def test_plot_cli(tmp_path):
    out = tmp_path / "fig.png"
    res = CliRunner().invoke(app, ["plot", "--K", "11", "--m", "1,3,5,7", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == PNG
    assert _size(out) == (2 * 320, 4 * 400)  # default panel 4 x 3.2 inches at 100 dpi
