"""The Dockerfile's steps, run here (docker/smoke.sh builds and runs the image where a daemon runs): the
build context of .dockerignore, ``pip install .``, the CMD (on loopback) and the HEALTHCHECK; and the
migrations as packaged."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from svc_helpers import ROOT, Server, free_port

DOCKERFILE = ROOT / "Dockerfile"
LOCK_IN_IMAGE = "docker/requirements.lock"
LOCK = ROOT / LOCK_IN_IMAGE


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def exec_form(rest: str) -> list[str]:
    return json.loads(rest[rest.index("["):])


def test_dockerfile_shape():
    ins = instructions()
    words = [w for w, _ in ins]
    froms = [i for i, w in enumerate(words) if w == "FROM"]
    # three stages: the locked dependencies, the project on top of them, then the image
    assert [ins[i][1] for i in froms] == ["${BASE_IMAGE} AS deps", "deps AS project", "${BASE_IMAGE}"]
    # the base image is a build argument (a mirror's, or docker/debian-base.sh's), python:3.11-slim by default
    assert ins[0] == ("ARG", "BASE_IMAGE=python:3.11-slim") and froms[0] == 1
    # the package index and a CA bundle are build arguments of the build stages, and of no other
    build_args = {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "CA_BUNDLE"}
    for start, stop in ((froms[0], froms[1]), (froms[1], froms[2])):
        assert {r for w, r in ins[start:stop] if w == "ARG"} == build_args
    assert not any(w == "ARG" for w, _ in ins[froms[2]:])
    deps, project, final = ins[froms[0]:froms[1]], ins[froms[1]:froms[2]], ins[froms[2]:]
    users = [r for w, r in final if w == "USER"]
    assert users and users[-1] not in ("root", "0")
    final_words = [w for w, _ in final]
    assert final_words.index("USER") > max(i for i, (w, r) in enumerate(final) if w == "RUN")  # root installs
    assert ("EXPOSE", "8000") in ins
    # the dependencies from the lock, binary wheels only (no compiler), in a stage that only the lock (and a CA
    # bundle the builder puts in docker/ca/) feeds
    assert [r for w, r in deps if w == "COPY"] == [f"{LOCK_IN_IMAGE} {LOCK_IN_IMAGE}", "docker/ca/ docker/ca/"]
    [lock_install] = [r for w, r in deps if w == "RUN"]
    assert 'export PIP_CERT="/src/docker/ca/$CA_BUNDLE"' in lock_install
    assert f"-r {LOCK_IN_IMAGE}" in lock_install and "--only-binary=:all:" in lock_install
    assert "--without-pip" in lock_install  # no installer in the image
    # then the source, and the project itself (the service extra) without dependencies: all are in the lock
    assert [r for w, r in project if w == "COPY"] == [". ."] and project[5] == ("COPY", ". .")
    [install] = [r for w, r in project if w == "RUN"]
    assert "\".[service]\"" in install and "--no-deps" in install and "--only-binary=:all:" in install
    assert "pip --python /opt/venv/bin/python check" in install  # the lock satisfies the project, or no build
    assert "/stage/" in install
    # the image: the dependencies' environment, and as its last layer the project's files alone
    layers = [(w, r) for w, r in final if w in ("RUN", "COPY", "ADD")]
    assert ("COPY", "--from=deps /opt/venv /opt/venv") in layers and layers[-1] == ("COPY", "--from=project /stage/ /")
    assert not any("pip" in r for w, r in final if w == "RUN")
    assert not re.search(r"gcc|build-essential|pytest|\[test\]|\[all\]", DOCKERFILE.read_text())
    assert any(w == "VOLUME" and "/data" in r for w, r in ins)
    health = next(r for w, r in ins if w == "HEALTHCHECK")
    assert "/healthz" in health and "CMD" in health
    cmd = exec_form(next(r for w, r in ins if w == "CMD"))
    assert cmd[:2] == ["darrm-opt", "serve"] and "0.0.0.0" in cmd and "sqlite:////data/darrm.db" in cmd


def _locked() -> dict[str, str]:
    """The lock's pins, by normalised name; every line is a comment or NAME==VERSION."""
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version.strip() and " " not in line and ";" not in line, line
        assert canonicalize_name(name) not in pins, f"{name} pinned twice"
        pins[canonicalize_name(name)] = version
    return pins


def test_the_lock_pins_the_core_and_the_service_extra_and_nothing_else():
    """Each requirement of the core install and of the `service` extra is pinned, at a version its specifier
    in pyproject.toml allows; the project itself and the other extras' packages are not in the lock."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = _locked()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    linux = {"sys_platform": "linux", "platform_system": "Linux", "python_version": "3.11"}
    for text in [*project["dependencies"], *project["optional-dependencies"]["service"]]:
        req = Requirement(text.split("#")[0].strip())
        if req.marker is not None and not req.marker.evaluate(linux):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in the lock"
        assert req.specifier.contains(pins[name], prereleases=True), (req, pins[name])
    assert "darrm-opt" not in pins
    for other in ("gurobipy", "pulp", "matplotlib", "scikit-learn", "dask", "pytest", "hypothesis", "ruff", "mypy"):
        assert other not in pins, other
    assert len(pins) >= len(project["dependencies"]) + len(project["optional-dependencies"]["service"])


def build_context(dest: Path) -> Path:
    """The Docker build context: the checkout minus .dockerignore's patterns."""
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]

    def ignored(rel: str) -> bool:
        name = rel.rsplit("/", 1)[-1]
        for p in patterns:
            p = p.removeprefix("**/")
            if fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p):
                return True
        return False

    def ignore(directory: str, names: list[str]) -> set[str]:
        rel_dir = os.path.relpath(directory, ROOT)
        return {n for n in names if ignored(n if rel_dir == "." else f"{rel_dir}/{n}")}

    ctx = dest / "context"
    shutil.copytree(ROOT, ctx, ignore=ignore)
    assert not (ctx / ".venv").exists() and not (ctx / "tests").exists()
    assert (ctx / "darrm_opt" / "ledger" / "alembic.ini").exists()
    assert (ctx / LOCK_IN_IMAGE).read_text() == LOCK.read_text()
    return ctx


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """``pip install ".[service]"`` of the build context (dependencies come from this environment: --no-deps)."""
    d = tmp_path_factory.mktemp("docker-steps")
    ctx = build_context(d)
    site = d / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), "."],
                       cwd=ctx, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for rel in ("darrm_opt/ledger/alembic.ini", "darrm_opt/ledger/migrations/env.py",
                "darrm_opt/ledger/migrations/versions/0007_table_content_ids.py",
                "darrm_opt/api/routers/aggregate.py", "darrm_opt/api/static/ui.html", "darrm_opt/api/static/app.js",
                "darrm_opt/solvers/highs.py", "darrm_opt/cli/serve.py", "darrm_opt/py.typed", "bin/darrm-opt"):
        assert (site / rel).is_file() and not (site / rel).is_symlink(), rel
    # one installed namespace: nothing named api or solvers beside darrm_opt to collide with users' modules
    assert not (site / "api").exists() and not (site / "solvers").exists()
    assert any(p.name == "LICENSE" for p in site.glob("darrm_opt-*.dist-info/**/LICENSE*")) or any(
        site.glob("darrm_opt-*.dist-info/licenses/LICENSE"))
    return site


@pytest.mark.slow  # installs the package, runs its CMD as a process
def test_cmd_and_healthcheck_of_the_installed_package(installed, tmp_path):
    ins = instructions()
    port = free_port()
    cmd = exec_form(next(r for w, r in ins if w == "CMD"))
    cmd = [c.replace("0.0.0.0", "127.0.0.1").replace("8000", str(port))
           .replace("sqlite:////data/darrm.db", f"sqlite:///{tmp_path / 'data' / 'darrm.db'}") for c in cmd]
    (tmp_path / "data").mkdir()
    argv = [sys.executable, str(installed / "bin" / "darrm-opt"), *cmd[1:]]
    env = {"PYTHONPATH": str(installed)}
    probe = subprocess.run([sys.executable, "-c", "import darrm_opt.api as api; print(api.__file__)"],
                           env={**os.environ, **env}, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip().startswith(str(installed)), probe  # the installed copy, not the checkout
    server = Server(tmp_path, "unused", argv=argv, env=env, port=port, name="docker-cmd").start()
    try:
        health = exec_form(next(r for w, r in ins if w == "HEALTHCHECK"))
        health = [h.replace("8000", str(port)) for h in health]
        assert health[0] == "python"
        r = subprocess.run([sys.executable, *health[1:]], capture_output=True, timeout=30)
        assert r.returncode == 0, r
        assert (tmp_path / "data" / "darrm.db").exists()
    finally:
        server.stop()
    server.proc = None
    r = subprocess.run([sys.executable, *health[1:]], capture_output=True, timeout=30)
    assert r.returncode != 0  # and it fails when the server is down


def test_migrations_upgrade_and_downgrade(tmp_path):
    from alembic import command
    from sqlalchemy import inspect

    from darrm_opt.ledger.db import Database, alembic_config, migrate

    url = f"sqlite:///{tmp_path / 'm.db'}"
    db = Database(url)
    try:
        migrate(db)
        migrate(db)  # idempotent
        tables = set(inspect(db.engine).get_table_names())
        assert {"gamma_tables", "solve_jobs", "ledgers", "ledger_usage", "spends", "alembic_version"} <= tables
        command.downgrade(alembic_config(url), "base")
        assert set(inspect(db.engine).get_table_names()) <= {"alembic_version"}
        command.upgrade(alembic_config(url), "head")
        assert "spends" in set(inspect(db.engine).get_table_names())
    finally:
        db.dispose()


def test_postgres_urls_use_psycopg3():
    from darrm_opt.ledger.db import normalize_url

    assert normalize_url("postgresql://u@h:5432/d").drivername == "postgresql+psycopg"
    assert normalize_url("postgres://u@h/d").drivername == "postgresql+psycopg"
    assert normalize_url("sqlite:///x.db").drivername == "sqlite"
    for bad in ("mysql://u@h/d", "sqlite://", "sqlite:///:memory:"):
        with pytest.raises(ValueError):
            normalize_url(bad)


@pytest.mark.parametrize("script", ["docker/smoke.sh", "docker/debian-base.sh"])
def test_the_docker_scripts_parse(script):
    r = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert os.access(ROOT / script, os.X_OK)


def test_the_smoke_script_skips_where_no_docker_daemon_answers(tmp_path):
    """docker/smoke.sh builds and runs the image where a daemon answers (run by hand: its figures are in the
    CHANGELOG); elsewhere, as on CI, it says so and exits 0, building nothing."""
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path / 'no-daemon.sock'}"}
    r = subprocess.run(["bash", str(ROOT / "docker" / "smoke.sh")], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "smoke.sh: skipped: no Docker daemon answers ('docker info' failed)"
