"""The documentation: the site builds with warnings as errors, and the README stays the front door."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # renders every page and the API reference, and runs the notebook (about 30 s)
def test_the_docs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # mkdocs' own warnings (the notebook's kernel may warn on its line of stderr about its TCP transport)
    assert not re.search(r"^WARNING\b", r.stderr, re.M), r.stderr
    api = (tmp_path / "site" / "python" / "index.html").read_text()
    for name in ("solve", "Params", "release_answers", "Ledger", "read_vote_rows", "plan_job", "Offer"):
        assert 'id="darrm_opt.' in api and re.search(rf'id="[\w.]*\b{name}"', api), name
    cli = (tmp_path / "site" / "cli" / "index.html").read_text()  # every command's --help, rendered at build
    from darrm_opt.cli import COMMANDS

    assert all(f"Usage: darrm-opt {name} [OPTIONS]" in cli for name in COMMANDS if name != "demo")
    example = (tmp_path / "site" / "examples" / "index.html").read_text()
    assert "teachers_on_disjoint_shards" in example  # the script itself is rendered
    # the notebook, run at the build: its three figures and the lines it printed are on its page
    notebook = (tmp_path / "site" / "notebooks" / "label_a_dataset" / "index.html").read_text()
    assert notebook.count("data:image/png;base64,") >= 3 and "chosen: darrm-pate-shaped" in notebook
    assert re.search(r"ledger: 200 answers, ε spent 7\.9\d{3} of 8", notebook)


def test_readme_opens_with_the_two_commands_and_ci_runs_its_test_command():
    lines = (ROOT / "README.md").read_text().splitlines()
    fence = lines.index("```bash")
    core, tests = lines[fence + 1], lines[fence + 2]
    assert fence < 5 and lines[fence + 3] == "```"
    assert core == "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/darrm-opt solve --K 11 --m 3"
    assert tests.startswith("python3 -m venv .venv && .venv/bin/pip install -e \".[test]\" && ")
    test_command = tests.split(" && ")[-1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci, "CI must run the README's test command"
    assert len(lines) <= 180, "the README is the front door; the rest belongs in docs/"


def test_every_docs_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages and all(page in nav for page in pages), pages - {p for p in pages if p in nav}
