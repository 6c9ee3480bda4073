"""A small mutation tester: operator and constant mutations applied with ``ast``, killed by targeted tests.

    python tests/tools/mutate.py darrm_opt/certify/exact.py -t tests/test_exact_recheck.py [-t ...]
        [--jobs 2] [--timeout 120] [--json out.json] [--only LINE,LINE]

For every mutation site of the module (one mutant per site and operator) a child process is forked from
a parent that has already imported the heavy third-party packages (numpy, scipy, mpmath, pytest,
hypothesis), the mutated source is installed for the module's import name by a meta-path finder, and the
tests run with ``pytest -x``. A mutant is *killed* when the tests fail (or time out), *survived* when they
pass. The unmutated module must pass first. Mutations (as in mutmut): + ↔ −, * ↔ /, // → /, ** → *,
% → /, << ↔ >>, & ↔ |, < ↔ <=, > ↔ >=, == ↔ !=, is ↔ is not, in ↔ not in, and ↔ or, unary − and
``not`` removed, numbers n → n + 1, True ↔ False. Docstrings, strings and annotations are not mutated.
"""

from __future__ import annotations

import argparse
import ast
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
         ast.Pow: ast.Mult, ast.Mod: ast.Div, ast.LShift: ast.RShift, ast.RShift: ast.LShift,
         ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitAnd}
CMPOP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


@dataclass(frozen=True)
class Site:
    index: int
    line: int
    kind: str
    before: str
    after: str


def _skip_ids(tree: ast.AST) -> set[int]:
    """Nodes never mutated: docstrings, annotations and everything under them."""
    skip: set[int] = set()

    def mark(node):
        for sub in ast.walk(node):
            skip.add(id(sub))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                mark(body[0])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.returns is not None:
                mark(node.returns)
            for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                if a.annotation is not None:
                    mark(a.annotation)
        if isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            mark(node)
    return skip


def _candidates(node: ast.AST):
    """(kind, before, after, apply) for each mutation of ``node``; apply mutates it in place."""
    out = []
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINOP:
        new = BINOP[type(node.op)]
        out.append(("binop", type(node.op).__name__, new.__name__, lambda n=node, c=new: setattr(n, "op", c())))
    elif isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in CMPOP:
                new = CMPOP[type(op)]

                def apply(n=node, i=i, c=new):
                    n.ops[i] = c()

                out.append(("compare", type(op).__name__, new.__name__, apply))
    elif isinstance(node, ast.BoolOp):
        new = ast.Or if isinstance(node.op, ast.And) else ast.And
        out.append(("boolop", type(node.op).__name__, new.__name__, lambda n=node, c=new: setattr(n, "op", c())))
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        v = node.value
        out.append(("number", repr(v), repr(v + 1), lambda n=node, v=v: setattr(n, "value", v + 1)))
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        v = node.value
        out.append(("bool", repr(v), repr(not v), lambda n=node, v=v: setattr(n, "value", not v)))
    return out


def _unary_parents(tree: ast.AST):
    """(parent, field, index, unary) for each unary − / not whose operand can replace it."""
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            items = value if isinstance(value, list) else [value]
            for i, child in enumerate(items):
                if isinstance(child, ast.UnaryOp) and isinstance(child.op, (ast.USub, ast.Not)):
                    yield parent, field, (i if isinstance(value, list) else None), child


def sites_and_mutants(source: str):
    """Every mutation site with the mutated source text."""
    probe = ast.parse(source)
    skip = _skip_ids(probe)
    n_plain = sum(len(_candidates(n)) for n in ast.walk(probe) if id(n) not in skip)
    n_unary = sum(1 for p, f, i, u in _unary_parents(probe) if id(u) not in skip)
    result = []
    for k in range(n_plain + n_unary):
        tree = ast.parse(source)
        skip = _skip_ids(tree)
        if k < n_plain:
            j = 0
            for node in ast.walk(tree):
                if id(node) in skip:
                    continue
                for kind, before, after, apply in _candidates(node):
                    if j == k:
                        line = getattr(node, "lineno", 0)
                        apply()
                        site = Site(k, line, kind, before, after)
                    j += 1
        else:
            target = k - n_plain
            unaries = [x for x in _unary_parents(tree) if id(x[3]) not in skip]
            parent, field, i, u = unaries[target]
            if i is None:
                setattr(parent, field, u.operand)
            else:
                getattr(parent, field)[i] = u.operand
            site = Site(k, u.lineno, "unary", type(u.op).__name__, "removed")
        ast.fix_missing_locations(tree)
        result.append((site, ast.unparse(tree)))
    return result


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, name: str, path: str, source: str) -> None:
        self.name, self.path, self.source = name, path, source

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name:
            return importlib.util.spec_from_file_location(fullname, self.path, loader=self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(compile(self.source, self.path, "exec"), module.__dict__)


def _child(module_name: str, path: str, source: str | None, tests: list[str]) -> None:
    import pytest

    if source is not None:
        sys.meta_path.insert(0, _Finder(module_name, path, source))
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    code = pytest.main([*tests, "-x", "-q", "-p", "no:cacheprovider", "--timeout", "600"])
    os._exit(int(code))


def _start(module_name, path, source, tests):
    pid = os.fork()
    if pid == 0:
        try:
            _child(module_name, path, source, tests)
        finally:
            os._exit(99)
    return pid


def run(module_path: str, tests: list[str], jobs: int, timeout: float, only: set[int] | None):
    path = str(Path(module_path).resolve())
    module_name = module_path.removesuffix(".py").replace("/", ".")
    source = Path(module_path).read_text()
    for mod in ("numpy", "scipy", "scipy.stats", "scipy.special", "mpmath", "pytest", "hypothesis", "highspy"):
        try:
            __import__(mod)
        except ImportError:
            pass
    t0 = time.time()
    pid = _start(module_name, path, None, tests)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the unmutated module fails its tests ({tests}); fix that first")
    baseline = time.time() - t0
    mutants = [(s, src) for s, src in sites_and_mutants(source) if only is None or s.line in only]
    results: list[dict] = []
    running: dict[int, tuple[Site, float]] = {}
    queue = list(mutants)
    limit = max(timeout, 10 * baseline)
    while queue or running:
        while queue and len(running) < jobs:
            site, src = queue.pop(0)
            running[_start(module_name, path, src, tests)] = (site, time.time())
        time.sleep(0.05)
        for pid, (site, start) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0 and time.time() - start > limit:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                results.append({**asdict(site), "outcome": "timeout"})
                del running[pid]
            elif done:
                code = os.waitstatus_to_exitcode(status)
                outcome = "survived" if code == 0 else "killed"
                results.append({**asdict(site), "outcome": outcome, "exit": code})
                del running[pid]
            if done or pid not in running:
                r = results[-1]
                print(f"  [{len(results)}/{len(mutants)}] line {r['line']} {r['kind']} {r['before']} -> "
                      f"{r['after']}: {r['outcome']}", file=sys.stderr, flush=True)
    results.sort(key=lambda r: r["index"])
    return results, baseline, time.time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module")
    ap.add_argument("-t", "--tests", action="append", required=True)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--only", help="comma-separated line numbers")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    only = {int(x) for x in a.only.split(",")} if a.only else None
    results, baseline, wall = run(a.module, a.tests, a.jobs, a.timeout, only)
    killed = sum(r["outcome"] in ("killed", "timeout") for r in results)
    for r in results:
        if r["outcome"] == "survived":
            print(f"SURVIVED {a.module}:{r['line']} {r['kind']} {r['before']} -> {r['after']}")
    rate = 100.0 * killed / len(results) if results else 100.0
    print(f"{a.module}: {killed}/{len(results)} mutants killed ({rate:.1f} %), "
          f"baseline tests {baseline:.1f} s, wall {wall:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps({"module": a.module, "tests": a.tests, "killed": killed,
                                            "total": len(results), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
