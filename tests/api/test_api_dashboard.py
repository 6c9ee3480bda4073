"""The dashboard at /ui and the endpoints it reads (the application in process); the page itself in headless
Chromium against a live server (Debian's ``chromium``; the browser test is skipped, saying why, when it is not
installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import numpy as np
import pytest
from svc_helpers import KEY, Server, in_process_client, make_ledger, make_table, without_key

from darrm_opt.model.baselines import gamma_sub

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
VOTES = [[1, 1, 1, 0, 0], [0, 0, 0, 0, 1], [1, 1, 1, 1, 1], [1, 0, 1, 0, 1]]


def populate(c: httpx.Client) -> dict:
    """Two tables (K = 5: approximate and pure DP), one ledger paid three times and one unused."""
    approx = make_table(c, K=5, m=2)
    pure = make_table(c, K=5, m=2, teacher_delta=0, delta=0)
    ledger = make_ledger(c, 3.0, 1e-3, name="labelling-job")
    make_ledger(c, 1.0, 0.0, name="unused")
    for votes in (VOTES[:2], VOTES, VOTES[:1]):
        r = c.post("/v1/aggregate", json={"table_id": approx["id"], "ledger_id": ledger["id"], "votes": votes})
        assert r.status_code == 200, r.text
    return {"approx": approx, "pure": pure, "ledger": ledger}


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> Iterator[dict]:
    """The service in process on a fresh SQLite file, populated."""
    d = tmp_path_factory.mktemp("dashboard-app")
    with in_process_client(f"sqlite:///{d / 'darrm.db'}") as c:
        yield {"client": c, **populate(c)}


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[dict]:
    """A fresh server process, populated, for the browser."""
    d = tmp_path_factory.mktemp("dashboard")
    server = Server(d, f"sqlite:///{d / 'darrm.db'}", name="dashboard").start()
    try:
        with server.client() as c:
            data = populate(c)
        yield {"server": server, "dir": d, **data}
    finally:
        server.stop()


def test_ledger_list_and_spend_history(app):
    c = app["client"]
    listed = c.get("/v1/ledgers").json()
    assert listed["total"] == 2 and [x["name"] for x in listed["items"]] == ["labelling-job", "unused"]
    job = listed["items"][0]
    full = c.get(f"/v1/ledgers/{job['id']}").json()
    assert job["answers"] == 7 and job["epsilon_spent"] == full["epsilon_spent"]
    assert job["epsilon_remaining"] == pytest.approx(3.0 - full["epsilon_spent"], abs=0)
    assert job["delta_target"] == full["delta_target"] == 1e-3 and "delta_remaining" not in job
    spends = c.get(f"/v1/ledgers/{job['id']}/spends").json()
    assert [s["rows"] for s in spends["items"]] == [2, 4, 1] and not spends["truncated"]
    eps = [s["epsilon_spent"] for s in spends["items"]]
    # the history holds the ledger's statement after each debit: never decreasing, the last one its view
    assert eps == sorted(eps) and eps[-1] == full["epsilon_spent"] and full["composition"] == "exact"
    last_two = c.get(f"/v1/ledgers/{job['id']}/spends", params={"limit": 2}).json()
    assert [s["rows"] for s in last_two["items"]] == [4, 1] and last_two["truncated"]
    assert c.get("/v1/ledgers/" + "0" * 32 + "/spends").status_code == 404
    assert without_key(c, "GET", "/v1/ledgers").status_code == 401


def test_baselines_are_the_closed_forms(app):
    c = app["client"]
    b = c.get(f"/v1/tables/{app['approx']['id']}/baselines").json()
    assert b["gamma"]["opt"] == app["approx"]["gamma"] and b["gamma"]["dsub"] is None
    np.testing.assert_allclose(b["gamma"]["sub"], gamma_sub(5, 2), rtol=0, atol=0)
    assert b["expected_error"]["opt"] == pytest.approx(app["approx"]["expected_error"], rel=1e-12)
    assert b["expected_error"]["opt"] <= b["expected_error"]["sub"] <= b["expected_error"]["const"]
    pure = c.get(f"/v1/tables/{app['pure']['id']}/baselines").json()
    assert len(pure["gamma"]["dsub"]) == 6
    assert c.get("/v1/tables/" + "0" * 32 + "/baselines").status_code == 404


def test_page_and_assets_are_local_and_need_no_key(app):
    c = app["client"]
    page = without_key(c, "GET", "/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert not re.search(r"(src|href)=\"(https?:)?//", page.text)  # nothing from another origin
    for asset, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        r = without_key(c, "GET", f"/ui/{asset}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(kind)
        assert "http://" not in r.text.replace("http://www.w3.org/2000/svg", "")
    assert without_key(c, "GET", "/ui/../api/db.py").status_code == 404
    assert without_key(c, "GET", "/ui/secret.py").status_code == 404


class _Dom(HTMLParser):
    """The elements of a dumped DOM: (tag, attributes) in document order, and the visible text."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        if data.strip():
            self.text.append(data.strip())


def render(url: str, out: Path, screenshot: Path | None = None) -> _Dom:
    """The DOM of ``url`` after its scripts ran (headless Chromium, virtual time)."""
    args = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            f"--user-data-dir={out / 'profile'}", "--virtual-time-budget=20000", "--window-size=1000,1400"]
    if screenshot is not None:
        subprocess.run([*args, f"--screenshot={screenshot}", url], capture_output=True, timeout=120)
    r = subprocess.run([*args, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = _Dom()
    dom.feed(r.stdout)
    return dom


@pytest.mark.slow  # a headless browser
@pytest.mark.skipif(BROWSER is None, reason="no chromium here (apt-get install chromium; .ci/run tries to)")
def test_dashboard_renders_in_chromium(live, tmp_path):
    base = live["server"].url
    shot = live["dir"] / "dashboard.png"
    dom = render(f"{base}/ui#key={KEY}", tmp_path, screenshot=shot)
    body = next(a for t, a in dom.elements if t == "body")
    assert body.get("data-loaded") == "true", " | ".join(dom.text)[:2000]
    ledgers = [a["data-ledger-id"] for t, a in dom.elements if "data-ledger-id" in a]
    assert ledgers[0] == live["ledger"]["id"] and len(ledgers) == 2
    series = [(a["data-series"], a["data-points"]) for t, a in dom.elements if t == "g" and "data-series" in a]
    # ledger plots: ε (at the ledger's fixed δ) from 0 then after each of 3 paid requests; the unused one: 0
    assert series[:2] == [("epsilon", "4"), ("epsilon", "1")]
    # table plots: γ over l = 0..5 for γ_opt and the baselines (γ_DSub only for the pure table)
    assert sorted(series[2:]) == sorted([(k, "6") for k in ("opt", "sub", "const")] * 2 + [("dsub", "6")])
    text = " ".join(dom.text)
    assert "labelling-job" in text and "CERTIFIED" in text and "2 ledger(s), 2 table(s)" in text
    assert "(fixed: every statement is (ε, δ)-DP at this δ)" in text and "δ spent" not in text
    # at a glance: each ledger's share of its ε budget, as a bar and in its title
    spent = live_ledger_share(live)
    shares = [a["data-share"] for t, a in dom.elements if "data-share" in a]
    assert shares == [f"{spent:.4f}", "0.0000"] and f"labelling-job: {100 * spent:.3g} % of the ε budget spent" in text
    # labelled axes (answers on the ledgers' x axis) and full legends, as HTML text that wraps
    classes = [a.get("class") for t, a in dom.elements if t == "text"]
    assert classes.count("x-label") == 4 and classes.count("y-label") == 4  # 2 ledgers, 2 tables
    assert "answers paid" in text and text.count("l = number of teachers voting 1") == 2
    assert "ε spent (at δ = 0.001)" in text and text.count("γ(l) = P(majority)") == 2
    legends = [a["data-legend"] for t, a in dom.elements if t == "li" and "data-legend" in a]
    assert legends.count("epsilon") == 2 and legends.count("budget") == 2 and legends.count("opt") == 2
    assert re.search(r"γ_opt \(E\[err\] [0-9.e-]+\)", text) and "ε budget 3" in text
    # creating a ledger or a table from the page, and the key's link documented on the page itself
    names = {a.get("name") for t, a in dom.elements if t in ("input", "select")}
    assert {"name", "epsilon_budget", "delta_budget", "K", "m", "teachers", "target_epsilon"} <= names
    assert "Create ledger" in text and "Solve and certify" in text
    assert shot.exists() and shot.stat().st_size > 10_000


def live_ledger_share(live: dict) -> float:
    with live["server"].client() as c:
        view = c.get(f"/v1/ledgers/{live['ledger']['id']}").json()
    return view["epsilon_spent"] / view["epsilon_budget"]


@pytest.mark.slow  # a headless browser
@pytest.mark.skipif(BROWSER is None, reason="no chromium here (apt-get install chromium; .ci/run tries to)")
def test_dashboard_without_a_key_shows_the_key_form_and_the_link(live, tmp_path):
    dom = render(f"{live['server'].url}/ui", tmp_path)
    text = " ".join(dom.text)
    assert "/ui#key=YOUR-KEY" in text and "DARRM_API_KEYS" in text
    assert any(t == "input" and a.get("id") == "key" for t, a in dom.elements)
    assert not any("data-ledger-id" in a for _, a in dom.elements)


@pytest.mark.slow  # a headless browser
@pytest.mark.skipif(BROWSER is None, reason="no chromium here (apt-get install chromium; .ci/run tries to)")
def test_dashboard_with_a_wrong_key_shows_nothing(live, tmp_path):
    dom = render(f"{live['server'].url}/ui#key=not-a-key", tmp_path)
    assert not any("data-ledger-id" in a or "data-table-id" in a for _, a in dom.elements)
    assert "the API key was refused (401)" in " ".join(dom.text)


class _Browser:
    """Headless Chromium driven over the DevTools protocol (a page, JavaScript evaluated in it)."""

    def __init__(self, profile: Path) -> None:
        self.proc = subprocess.Popen(
            [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             f"--user-data-dir={profile}", "--remote-debugging-port=0", "--window-size=1000,1400", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in self.proc.stderr:  # type: ignore[union-attr]
            if "DevTools listening on" in line:
                self.port = int(line.split("ws://")[1].split("/")[0].rsplit(":", 1)[1])
                break
        else:
            raise RuntimeError("chromium printed no DevTools address")

    def page(self) -> str:
        pages = httpx.get(f"http://127.0.0.1:{self.port}/json/list", timeout=10).json()
        return next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _evaluate(ws_url: str, steps: list) -> list:
    """Run each step in the page in turn: ``("open", url)`` navigates; ``("wait", cond, value)`` polls the
    JavaScript ``cond`` until it holds (60 s at most) and gives ``value``; a string is evaluated (promises
    awaited). Returns their values."""
    import asyncio
    import json

    websockets = pytest.importorskip("websockets")

    async def run() -> list:
        out: list = []
        counter = iter(range(1, 1_000_000))
        async with websockets.connect(ws_url, max_size=None) as ws:

            async def call(method: str, **params) -> dict:
                n = next(counter)
                await ws.send(json.dumps({"id": n, "method": method, "params": params}))
                while True:
                    msg = json.loads(await ws.recv())
                    if msg.get("id") == n:
                        return msg.get("result", msg)

            async def evaluate(expr: str) -> dict:
                return await call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)

            for step in steps:
                if isinstance(step, tuple) and step[0] == "open":
                    out.append(await call("Page.navigate", url=step[1]))
                elif isinstance(step, tuple) and step[0] == "wait":
                    for _ in range(600):  # a context destroyed by a navigation is an exception: try again
                        r = await evaluate(step[1])
                        if "exceptionDetails" not in r and r["result"].get("value") is True:
                            break
                        await asyncio.sleep(0.1)
                    r = await evaluate(step[2])
                    out.append(r["result"].get("value"))
                else:
                    r = await evaluate(step)
                    assert "exceptionDetails" not in r, r
                    out.append(r["result"].get("value"))
        return out

    return asyncio.run(run())


@pytest.mark.slow  # a headless browser, a solve
@pytest.mark.skipif(BROWSER is None, reason="no chromium here (apt-get install chromium; .ci/run tries to)")
def test_a_ledger_and_a_table_are_created_from_the_page(live, tmp_path):
    pytest.importorskip("websockets")
    browser = _Browser(tmp_path / "profile")
    try:
        loaded = "!!document.body && document.body.dataset.loaded === 'true'"
        ledgers = "document.querySelectorAll('[data-ledger-id]').length"
        tables = "document.querySelectorAll('[data-table-id]').length"
        message = "document.getElementById('create-status').textContent"
        fill = "(f, values) => { for (const [k, v] of Object.entries(values)) f.elements[k].value = v; }"
        steps = [
            ("open", f"{live['server'].url}/ui#key={KEY}"),
            ("wait", loaded, f"[{ledgers}, {tables}]"),
            f"({fill})(document.getElementById('new-ledger'), {{name: 'from-the-page', epsilon_budget: '2', "
            "delta_budget: '1e-4'}); document.getElementById('new-ledger').requestSubmit(); true",
            ("wait", f"{ledgers} === 3", message),
            f"({fill})(document.getElementById('new-table'), {{K: '7', m: '2'}}); "
            "document.getElementById('new-table').requestSubmit(); true",
            ("wait", f"{tables} === 3", message),
            f"({fill})(document.getElementById('new-table'), {{K: '7', m: '2', target_epsilon: '1'}}); "
            "document.getElementById('new-table').requestSubmit(); true",
            ("wait", "document.getElementById('create-status').className === 'error'", message),
        ]
        got = _evaluate(browser.page(), steps)
    finally:
        browser.close()
    assert got[1] == [2, 2]
    assert got[3].startswith("created ledger from-the-page (")
    assert re.fullmatch(r"table [0-9a-f]{32}: CERTIFIED", got[5]), got[5]
    # the one setting rule, as the API states it: target_epsilon applies only to non-private teachers
    assert "target_epsilon" in got[7] and "422" not in got[7], got[7]
    with live["server"].client() as c:
        names = [x["name"] for x in c.get("/v1/ledgers").json()["items"]]
        assert "from-the-page" in names
        assert any(t["K"] == 7 and t["m"] == 2 for t in c.get("/v1/tables").json()["items"])
