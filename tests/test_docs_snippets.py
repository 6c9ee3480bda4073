"""Figures that cannot go stale: the README's and the docs' snippets are run, and what they print is compared
with what the text says they print.

* Console blocks (a fenced block with ``$ `` command lines followed by output lines) are run in bash, in a
  fresh folder, with ``darrm-opt`` meaning this checkout's CLI; the output shown after the last command must
  be that command's output (stdout and stderr), line for line, but for lines the text elides (``...``) and
  the seconds a solve took. Blocks whose commands print nothing are not compared here (the commands' own tests
  run them).
* Python blocks whose ``print(...)`` lines show the number they print in a comment (``# 8.393: ...``) are run
  in a fresh folder, and each printed number must round to the one shown.
* The REST comment (README.md and docs/rest.md: the ε a ledger states after the curl lines' one answer) is
  checked against the same ledger code run from Python; the curl lines themselves need a server and are not
  run here (tests/api run the endpoints).
* docs/examples.md's output lines are compared by tests/test_examples.py, which runs the example anyway (about
  a minute: more than this file's 20 s per snippet).

Skipped, and why: every block that needs a running server (README.md's and docs/rest.md's curl lines,
docs/tenancy.md's); the `plan` lines of README.md and docs/cli.md (35 to 60 s each on two cores);
Python blocks that show no number (docs/python.md's read files a reader makes first).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: output shown in a block may differ from a run in these places only
TIMING = re.compile(r"\b\d+\.\d+ s\)")


def console_blocks() -> list[tuple[str, list[str], list[str]]]:
    """(where, commands, shown output of the last command) for every fenced block with both."""
    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = lines[i].strip()
            if not fence.startswith("```"):
                i += 1
                continue
            j = i + 1
            while not lines[j].strip().startswith("```"):
                j += 1
            body = [line.strip() for line in lines[i + 1:j]]
            commands = [line[2:] for line in body if line.startswith("$ ")]
            if commands and not body[-1].startswith("$ "):
                last = max(k for k, line in enumerate(body) if line.startswith("$ "))
                found.append((f"{page.relative_to(ROOT)}:{i + 1}", commands, body[last + 1:]))
            i = j + 1
    return found


BLOCKS = console_blocks()


def test_the_docs_have_console_blocks_with_output():
    where = {w.split(":")[0] for w, _, _ in BLOCKS}
    assert {"docs/cli.md", "docs/python.md"} <= where, where


@pytest.mark.slow  # each block runs the CLI as a subprocess: a solve and an aggregate with a ledger, 2 to 10 s
@pytest.mark.parametrize("where, commands, shown", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_a_console_block_prints_what_its_page_shows(where, commands, shown, tmp_path):
    pytest.importorskip("sqlalchemy")  # an aggregate with a ledger
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "darrm-opt"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m darrm_opt "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for command in commands[:-1]:
        r = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{where}: {command}: {r.stderr}"
    r = subprocess.run(["bash", "-c", commands[-1]], cwd=work, env=env, capture_output=True, text=True,
                       timeout=120)
    printed = [line.strip() for line in (r.stdout + r.stderr).splitlines()]
    for line in shown:
        if line == "..." or line.endswith(" ..."):
            continue  # elided by the page
        pattern = re.escape(TIMING.sub("<s>", line)).replace(re.escape("<s>"), r"\d+\.\d+ s\)")
        assert any(re.fullmatch(pattern, p) for p in printed), f"{where}: shown, not printed: {line!r}\n" + \
            "\n".join(printed)


SHOWN_NUMBER = re.compile(r"^\s*print\(.*\)\s*#\s*(-?\d+(?:\.\d+)?)\b")


def python_blocks() -> list[tuple[str, str, list[str]]]:
    """(where, code, numbers shown after its print lines, in order) for each Python block that shows some."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.M | re.S):
            shown = [n.group(1) for line in m.group(1).splitlines() if (n := SHOWN_NUMBER.match(line))]
            if shown:
                found.append((f"{page.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}", m.group(1), shown))
    return found


PYTHON_BLOCKS = python_blocks()


def test_the_readme_python_block_shows_what_it_prints():
    assert [w for w, _, _ in PYTHON_BLOCKS if w.startswith("README.md")], PYTHON_BLOCKS


@pytest.mark.slow  # a solve, its certified profile and 100 paid answers in a subprocess (about 5 s)
@pytest.mark.parametrize("where, code, shown", PYTHON_BLOCKS, ids=[b[0] for b in PYTHON_BLOCKS])
def test_a_python_block_prints_what_its_page_shows(where, code, shown, tmp_path):
    pytest.importorskip("sqlalchemy")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, f"{where}: {r.stderr}"
    printed = [float(x) for x in r.stdout.split()]
    assert len(printed) == len(shown), (where, r.stdout)
    for value, text in zip(printed, shown):
        decimals = len(text.partition(".")[2])
        assert abs(value - float(text)) <= 0.5 * 10 ** -decimals, f"{where}: prints {value}, shows {text}"


@pytest.mark.slow  # a solve, its privacy profile and one paid answer (about 3 s)
def test_the_rest_comment_states_the_epsilon_the_ledger_states(tmp_path):
    pytest.importorskip("sqlalchemy")
    from darrm_opt import Ledger, Params, certify_table, release_answers, solve

    comments = [line for page in (ROOT / "README.md", ROOT / "docs" / "rest.md")
                for line in page.read_text().splitlines() if line.startswith('# {"answers"')]
    assert len(comments) == 2
    sol = solve(Params(K=11, m=3))  # the curl lines' table, ledger (1, 1e-4) and one row of votes
    table = certify_table(sol.params, sol.gamma)
    with Ledger(f"sqlite:///{tmp_path / 'l.db'}", "job-1", epsilon_budget=1, delta_budget=1e-4) as ledger:
        release_answers(table, [[1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0]], ledger)
        view = ledger.view()
    for comment in comments:
        shown = re.search(r'"epsilon_spent":([0-9.]+)\.\.\.', comment)
        assert shown and f"{view['epsilon_spent']:.17f}".startswith(shown.group(1)), (comment, view)
        assert f'"delta_target":{view["delta_target"]}' in comment
        assert f'"composition":"{view["composition"]}"' in comment
