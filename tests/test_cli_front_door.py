"""The command line as a new user meets it: ``--help`` at 80 columns, one-line usage errors, and a suite of bad
inputs run as subprocesses (exit 2, one line naming the parameter, never a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer.main

from darrm_opt.cli import COMMANDS, app

ENV80 = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "darrm_opt", *args], capture_output=True, text=True, timeout=120,
                          env=ENV80, cwd=cwd)


def test_every_option_of_every_command_has_help_text():
    root = typer.main.get_command(app)
    for name in COMMANDS:
        command = root.commands[name]  # type: ignore[attr-defined]
        assert command.help and "``" not in command.help, name
        assert "Example" in command.help, f"{name}: no example in its help"
        for param in command.params:
            assert getattr(param, "help", None), f"{name} {param.name}: no help text"
            assert "``" not in param.help, f"{name} {param.name}: raw markup in its help"


@pytest.mark.slow  # one interpreter per command
@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_help_fits_80_columns_and_names_every_option_whole(name):
    r = run(*([name] if name else []), "--help")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    assert "…" not in r.stdout and "``" not in r.stdout and "╭" not in r.stdout
    if name:
        root = typer.main.get_command(app)
        for param in root.commands[name].params:  # type: ignore[attr-defined]
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert opt in r.stdout, f"{opt} missing from `{name} --help`"
        assert "Example" in r.stdout


#: (arguments, what the one line must name)
BAD_INPUTS = [
    (("solve", "--K", "11", "--m", "3", "--foo"), "--foo"),
    (("solve", "--K", "x", "--m", "3"), "--K"),
    (("solve", "--m", "3"), "--K"),
    (("solve", "--K", "11", "--m", "3", "--format", "xml"), "--format"),
    (("nosuchcommand",), "nosuchcommand"),
    (("solve", "--K", "11", "--m", "3", "--dask-scheduler", "notaurl", "-q"), "dask-scheduler"),
    (("solve", "--K", "100001", "--m", "3", "-q"), "--K"),
    (("solve", "--K", "10", "--m", "3", "-q"), "K"),
    (("solve", "--K", "11", "--m", "30", "-q"), "m"),
    (("solve", "--K", "11", "--m", "3", "--epsilon", "-1", "-q"), "epsilon"),
    (("compare", "--K", "5", "--m", "3", "--teachers", "disjoint-nonprivate"), "m"),
    (("compare", "--K", "5", "--epsilon", "0.2", "--teachers", "disjoint-nonprivate", "--target-epsilon", "1"),
     "epsilon"),
    (("compare", "--K", "5", "--target-epsilon", "1"), "target-epsilon"),
    (("plot", "--K", "5", "--m", "3", "--teachers", "disjoint-nonprivate", "--out", "f.png"), "m"),
    (("plot", "--K", "5", "--m", "3", "--out", "f.pdf"), "out"),
    (("budget", "--per-query", "1", "--queries", "10"), "per-query"),
    (("verify", "no-such-file.json"), "no-such-file.json"),
]


@pytest.mark.slow  # one interpreter per case
@pytest.mark.parametrize(("args", "named"), BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, named):
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "╭" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert named in lines[0], lines[0]
    assert not list(tmp_path.iterdir()), "a refused command wrote a file"


def test_the_plot_format_is_refused_before_anything_is_computed(monkeypatch):
    """`plot --out f.pdf` never reaches the solver."""
    from typer.testing import CliRunner

    import darrm_opt.cli.compare as compare_cli

    def boom(*args, **kwargs):
        raise AssertionError("computed before the format was checked")

    monkeypatch.setattr(compare_cli, "comparison_rows", boom)
    monkeypatch.setattr("darrm_opt.cli.plot.comparison_rows", boom)
    r = CliRunner().invoke(app, ["plot", "--K", "5", "--m", "3", "--out", "f.pdf"])
    assert r.exit_code == 2 and "must end in .png or .svg" in r.output


def test_usage_errors_are_one_line_in_process_too():
    from typer.testing import CliRunner

    r = CliRunner().invoke(app, ["solve", "--K", "11", "--bogus"])
    assert r.exit_code == 2
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert lines == ["error: No such option: --bogus (see `darrm-opt solve --help`)"] or (
        len(lines) == 1 and lines[0].startswith("error: No such option: --bogus"))


def test_the_python_aggregator_refuses_1d_votes_naming_them():
    import numpy as np

    from darrm_opt import Aggregator, Params, certify_table, solve
    from darrm_opt.errors import InvalidParameter

    sol = solve(Params(K=5, m=3))
    with pytest.raises(InvalidParameter) as exc:
        Aggregator(certify_table(sol.params, sol.gamma))(np.array([1, 1, 0, 0, 1]))
    assert exc.value.parameter == "votes" and "2-D" in exc.value.rule
