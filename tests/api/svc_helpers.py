"""Helpers for the service tests: real uvicorn processes on loopback ports, real databases.

Every server is ``python -m uvicorn darrm_opt.api.main:create_app --factory`` in a subprocess with its settings in
``DARRM_*`` variables, a temporary SQLite file (or a fresh PostgreSQL database created for the test run and
dropped afterwards) and its log in the temporary directory. Loops that wait are bounded in time.

:func:`in_process_client` runs the same application in the test's own process (FastAPI's ``TestClient``: the
same routes, middleware and lifespan, no uvicorn and no socket), for tests that need HTTP semantics only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
KEY = "test-key-" + uuid.uuid4().hex[:12]
AUTH = {"Authorization": f"Bearer {KEY}"}
PG_URL = os.environ.get("DARRM_TEST_POSTGRES_URL")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process (uvicorn, possibly with several workers) on 127.0.0.1."""

    def __init__(self, workdir: Path, database_url: str, *, workers: int = 1, env: dict | None = None,
                 name: str = "server", argv: list[str] | None = None, port: int | None = None) -> None:
        self.workdir = workdir
        self.database_url = database_url
        self.workers = workers
        self.extra_env = dict(env or {})
        self.name = name
        self.argv = argv
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = workdir / f"{name}-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> Server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
        env.update({
            "DARRM_DATABASE_URL": self.database_url,
            "DARRM_API_KEYS": f"{KEY},second-key",
            "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
            "PYTHONUNBUFFERED": "1",
        })
        env.update(self.extra_env)
        argv = self.argv or [
            sys.executable, "-m", "uvicorn", "darrm_opt.api.main:create_app", "--factory",
            "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers),
            "--log-level", "warning",
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(argv, cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} did not become ready in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def kill9(self) -> None:
        """SIGKILL the whole process group (uvicorn and its workers): a crash, no shutdown."""
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill9()

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=AUTH, timeout=kw.pop("timeout", 60.0), **kw)


@contextlib.contextmanager
def in_process_client(database_url: str, *, keyed: bool = True, **settings) -> Iterator[httpx.Client]:
    """A client of ``create_app`` in this process, with a Server's keys and only the settings given here
    (nothing from this process's ``DARRM_*`` variables, as a Server drops them); the lifespan runs on entry
    (migrations, the debit writer, the solve pool) and drains on exit. ``keyed``: every request carries the
    first key (as ``Server.client()``'s do); without it, only the headers each request names."""
    from fastapi.testclient import TestClient

    from darrm_opt.api.main import create_app
    from darrm_opt.api.settings import Settings

    class Given(Settings):
        @classmethod
        def settings_customise_sources(cls, settings_cls, init_settings, **other_sources):
            return (init_settings,)

    app = create_app(Given(database_url=database_url, api_keys=[KEY, "second-key"], **settings))
    with TestClient(app, headers=AUTH if keyed else None) as c:
        yield c


def without_key(c: httpx.Client, method: str, url: str, **kw) -> httpx.Response:
    """A request from ``c`` with no Authorization header, whatever ``c`` sends by default."""
    request = c.build_request(method, url, **kw)
    request.headers.pop("Authorization", None)
    return c.send(request)


def make_table(c: httpx.Client, timeout: float = 120.0, **params) -> dict:
    """POST the parameters; on 202 follow the job until its table is ready (bounded in time)."""
    r = c.post("/v1/tables", json=params)
    if r.status_code == 202:
        url = r.json()["status_url"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = c.get(url).json()
            assert job["status"] in ("queued", "running", "done"), job
            if job["status"] == "done":
                return job["table"]
            time.sleep(0.05)
        raise AssertionError(f"job {url} did not finish in {timeout} s")
    assert r.status_code == 200, r.text
    return r.json()


def settled(c: httpx.Client, r: httpx.Response, timeout: float = 300.0) -> httpx.Response:
    """A plan request's final answer: ``r`` itself, or, when it was accepted to be planned in the background
    (202), its status URL polled as documented until it answers otherwise (at most ``timeout`` seconds)."""
    if r.status_code == 202:
        url, deadline = r.json()["status_url"], time.monotonic() + timeout
        while r.status_code == 202 and time.monotonic() < deadline:
            time.sleep(0.2)
            r = c.get(url)
    return r


def make_ledger(c: httpx.Client, epsilon_budget: float, delta_budget: float, name: str = "test") -> dict:
    r = c.post("/v1/ledgers", json={"name": name, "epsilon_budget": epsilon_budget, "delta_budget": delta_budget})
    assert r.status_code == 201, r.text
    return r.json()
