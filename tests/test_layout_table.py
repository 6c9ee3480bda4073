"""docs/development.md's layout table against the tree: every package of the product has a row, every module
a row names exists in that package, and every module of the package is named in its row."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| `([^`]+)/` \| (.*) \|$")
#: a module as the table names it: `name` or `name.py` (a function is written `name()`, a class Capitalised)
NAME = re.compile(r"`([a-z_][a-z0-9_]*)(?:\.py)?`")


def layout_rows() -> dict[str, str]:
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    return {m.group(1): m.group(2) for m in (ROW.match(line) for line in text.splitlines()) if m}


def modules(folder: Path) -> set[str]:
    """The modules and subpackages directly in ``folder`` (``__init__`` and ``__main__`` aside)."""
    found = {p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")}
    found |= {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return found


def packages() -> list[str]:
    """The product's packages as the table names them: darrm_opt's subpackages (the linked api/ and
    solvers/ under their top-level folders) and the top-level api/ and solvers/."""
    inner = sorted(p.name for p in (ROOT / "darrm_opt").iterdir()
                   if p.is_dir() and not p.is_symlink() and (p / "__init__.py").exists())
    return ["solvers", "api"] + [f"darrm_opt/{name}" for name in inner]


def test_every_package_has_a_row() -> None:
    rows = layout_rows()
    missing = [p for p in packages() if p not in rows]
    assert not missing, f"docs/development.md's layout table has no row for {missing}"
    stale = [p for p in rows if p not in ("benchmarks",) and not (ROOT / p).is_dir()]
    assert not stale, f"the layout table names folders that do not exist: {stale}"


def test_every_module_named_exists_and_every_module_is_named() -> None:
    rows = layout_rows()
    for package in packages():
        here = modules(ROOT / package)
        named = set(NAME.findall(rows[package]))
        absent = sorted(n for n in named if n not in here and not (ROOT / package / n).exists())
        assert not absent, f"{package}: the layout table names modules that are not there: {absent}"
        unnamed = sorted(here - named)
        assert not unnamed, f"{package}: modules the layout table does not name: {unnamed}"
