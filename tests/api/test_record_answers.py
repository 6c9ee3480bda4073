"""Free re-answers by record id (``record_answers``, migration 0014): a ledger asked again about a record it
answered returns the same answer and pays nothing (the spent ε before and after equal), a record named twice in
one request is answered and paid once, a record asked with other votes is re-answered and reported, another
tenant's ledger never sees a record, and the record is written in the debit's own transaction (a lost commit
acknowledgement records and charges once; a transaction that fails writes neither); from Python (SQLite and,
when DARRM_TEST_POSTGRES_URL is set, PostgreSQL), the CLI as a process and REST (``/v1/aggregate`` and
``/v1/jobs`` batches, where a stability job continues across batches and is paid once)."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from darrm_opt.errors import InvalidParameter
from darrm_opt.ledger.core import Debit, row_digests
from darrm_opt.ledger.db import Database
from darrm_opt.ledger.local import Ledger
from darrm_opt.ledger.schema import RecordAnswer, SpendRecord
from darrm_opt.ledger.writer import DebitWriter, disjoint_records
from darrm_opt.mechanisms import certify_table, mechanism
from darrm_opt.mechanisms.stability import StabilityParams
from darrm_opt.model.baselines import gamma_sub
from darrm_opt.model.params import Params
from darrm_opt.privacy.stability import SvtParams
from darrm_opt.release.release import Aggregator

pytest.importorskip("sqlalchemy")
ROOT = Path(__file__).resolve().parents[2]
STABILITY = mechanism("stability")


@pytest.fixture
def url(database_url: str) -> str:
    """Each ledger test on SQLite and on PostgreSQL (conftest's ``database_url``)."""
    return database_url


@pytest.fixture(scope="module")
def sub5():
    """γ_Sub of K = 5, m = 2 (closed form), certified with its profile."""
    return certify_table(Params(5, 2), gamma_sub(5, 2))


def stability_table(quota: int = 10):
    # s·d = 3000 for unanimous votes of K = 61: stable (the exact plurality) with probability > 1 − 1e-7
    return STABILITY.certify_table(StabilityParams(61, 3, SvtParams(100, 100, 100, 1200, 2), quota), np.zeros(0))


def votes5(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, (n, 5))


def count(db: Database, model, ledger_id: str) -> int:
    with db.read() as conn:
        return conn.execute(select(func.count()).select_from(model).where(model.ledger_id == ledger_id)).scalar_one()


# --- Python -------------------------------------------------------------------------------------------------
def test_a_record_asked_again_gets_its_answer_and_pays_nothing(url, sub5):
    v = votes5(6)
    with Ledger(url, "r", epsilon_budget=50.0, delta_budget=1e-3) as book, \
            Ledger(url, "plain", epsilon_budget=50.0, delta_budget=1e-3) as plain:
        first = Aggregator(sub5, book).answer(v, ["a", "b", "c", "d", "a", "e"])  # "a" twice: paid once
        spent = book.view()
        Aggregator(sub5, plain)(v[:5])  # five answers paid without records
        assert (spent["answers"], spent["epsilon_spent"]) == (5, plain.view()["epsilon_spent"])
        assert first.reanswered == (4,) and first.answers[4] == first.answers[0]
        assert first.changed == ((4,) if (v[4] != v[0]).any() and sorted(v[4]) != sorted(v[0]) else ())

        again = Aggregator(sub5, book).answer(v[[2, 0, 3]], ["c", "a", "d"])
        assert again.reanswered == (0, 1, 2) and again.changed == ()
        assert list(again.answers) == [first.answers[2], first.answers[0], first.answers[3]]
        view = book.view()
        assert (view["answers"], view["epsilon_spent"], view["composition"]) == \
               (5, spent["epsilon_spent"], spent["composition"])

        other = v[1].copy()
        other[:3] = 1 - other[:3]  # record "b" asked with other votes: its stored answer, reported
        mixed = Aggregator(sub5, book).answer(np.vstack([other, v[5]]), ["b", "new"])
        assert mixed.reanswered == (0,) and mixed.changed == (0,) and mixed.answers[0] == first.answers[1]
        Aggregator(sub5, plain)(v[5:6])
        assert (book.view()["answers"], book.view()["epsilon_spent"]) == (6, plain.view()["epsilon_spent"])
        assert count(book.db, RecordAnswer, book.id) == 6 and book.answered(["a", "zz", "new"]) == {"a", "new"}
        other_table = certify_table(Params(5, 3), gamma_sub(5, 3))  # the record's answer, reported as changed
        across = Aggregator(other_table, book).answer(v[:1], ["a"])
        assert (list(across.answers), across.reanswered, across.changed) == ([first.answers[0]], (0,), (0,))
        assert (book.view()["answers"], book.view()["epsilon_spent"]) == (6, plain.view()["epsilon_spent"])


def test_records_are_checked_naming_the_field(tmp_path, sub5):
    with Ledger(f"sqlite:///{tmp_path / 'l.db'}", "r", epsilon_budget=5.0, delta_budget=1e-3) as book:
        for records, field in ((["a"], "records"), (["a", ""], "records[1]"), (["a", "x" * 201], "records[1]"),
                               (["a", "b\n"], "records[1]"), ("ab", "records")):
            with pytest.raises(InvalidParameter) as err:
                Aggregator(sub5, book).answer(votes5(2), records)
            assert err.value.parameter == field
        assert book.view()["answers"] == 0
        assert list(Aggregator(sub5, book).answer(votes5(2), [7, "x" * 200]).answers) is not None
        assert book.answered(["7", "x" * 200]) == {"7", "x" * 200}
    with pytest.raises(InvalidParameter) as err:
        Aggregator(sub5).answer(votes5(1), ["a"])
    assert err.value.parameter == "records"


def test_a_stability_record_asked_again_neither_runs_nor_pays_the_job(url):
    t = stability_table(quota=10)
    rows = np.zeros((4, 61), dtype=np.int64)
    with Ledger(url, "s", epsilon_budget=50.0, delta_budget=1e-3) as book:
        first = Aggregator(t, book).answer(rows, ["a", "b", "a", "c"])
        state = json.loads(book.job_state(t).state)
        spent = book.view()["epsilon_spent"]
        assert list(first.answers) == [0, 0, 0, 0] and first.reanswered == (2,)
        assert (state["jobs"], state["current"]["queries"], book.view()["answers"]) == (1, 3, 3)
        version = book.job_state(t).version
        again = Aggregator(t, book).answer(rows[:3], ["c", "b", "a"])
        assert again.reanswered == (0, 1, 2) and book.job_state(t).version == version
        more = Aggregator(t, book).answer(rows[:2], ["a", "d"])
        assert more.reanswered == (0,) and json.loads(book.job_state(t).state)["current"]["queries"] == 4
        assert (book.view()["epsilon_spent"], book.view()["answers"]) == (spent, 4)


# --- crash safety -------------------------------------------------------------------------------------------
class LosesOneAcknowledgement(Database):
    """The first debit transaction commits, then reports the connection lost (a COMMIT whose reply was lost)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.lost = 0

    @contextlib.contextmanager
    def write(self):
        with super().write() as conn:
            yield conn
        if self.lost == 0:
            self.lost += 1
            raise OperationalError("COMMIT", {}, ConnectionError("server closed the connection unexpectedly"))


class FailsBeforeCommit(Database):
    """The first ``failures`` debit transactions write everything and then fail before COMMIT (rolled back)."""

    def __init__(self, url: str, failures: int) -> None:
        super().__init__(url)
        self.failures = failures

    @contextlib.contextmanager
    def write(self):
        with super().write() as conn:
            yield conn
            if self.failures > 0:
                self.failures -= 1
                raise OperationalError("INSERT", {}, ConnectionError("the connection dropped"))


def _debit(book: Ledger, table, v: np.ndarray, records: list[str]) -> Debit:
    answers = np.arange(len(records), dtype=np.uint8) % 2
    return Debit.of(book.id, table, len(records), answers=answers, records=records, record_digests=row_digests(v))


def test_a_lost_commit_acknowledgement_records_and_charges_once(url, sub5):
    v = votes5(3)
    with Ledger(url, "ack", epsilon_budget=50.0, delta_budget=1e-3) as book:
        book.register(sub5)
        db = LosesOneAcknowledgement(url)
        writer = DebitWriter(db, max_batch=1, profile_of=book.profile_of)
        try:
            result = writer.submit(_debit(book, sub5, v, ["a", "b", "a"])).result(timeout=120)
        finally:
            writer.stop()
            db.dispose()
        assert db.lost == 1 and result.status == "paid" and list(result.answers) == [0, 1, 0]
        assert book.view()["answers"] == 2
        assert count(book.db, SpendRecord, book.id) == 1 and count(book.db, RecordAnswer, book.id) == 2


def test_a_debit_and_its_records_are_written_together_or_not_at_all(url, sub5):
    v = votes5(2)
    with Ledger(url, "atomic", epsilon_budget=50.0, delta_budget=1e-3) as book:
        book.register(sub5)
        db = FailsBeforeCommit(url, failures=10)  # every attempt fails: nothing paid, nothing recorded
        writer = DebitWriter(db, max_batch=1, profile_of=book.profile_of)
        try:
            with pytest.raises(OperationalError):
                writer.submit(_debit(book, sub5, v, ["a", "b"])).result(timeout=120)
        finally:
            writer.stop()
            db.dispose()
        assert book.view()["answers"] == 0 and book.view()["epsilon_spent"] == 0.0
        assert count(book.db, SpendRecord, book.id) == 0 and count(book.db, RecordAnswer, book.id) == 0

        db = FailsBeforeCommit(url, failures=1)  # the first attempt rolled back, the retry commits once
        writer = DebitWriter(db, max_batch=1, profile_of=book.profile_of)
        try:
            assert writer.submit(_debit(book, sub5, v, ["a", "b"])).result(timeout=120).status == "paid"
        finally:
            writer.stop()
            db.dispose()
        assert book.view()["answers"] == 2
        assert count(book.db, SpendRecord, book.id) == 1 and count(book.db, RecordAnswer, book.id) == 2


def test_debits_sharing_a_record_are_decided_in_turn(sub5):
    def d(lid, records):
        return Debit(lid, "T", 1.0, 0.0, len(records), "shared", records=records)

    a, b, c, e = d("L", ["x", "y"]), d("L", ["z"]), d("L", ["y"]), d("M", ["y"])
    plain = Debit("L", "T", 1.0, 0.0, 1, "shared")
    assert disjoint_records([a, b, c, e, plain]) == [[a, b, e, plain], [c]]


# --- CLI ----------------------------------------------------------------------------------------------------
def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, timeout=300, module=True)


@pytest.mark.slow  # CLI subprocesses
def test_the_cli_answers_records_again_at_no_cost(tmp_path, sub5):
    from darrm_opt.mechanisms import table_document

    (tmp_path / "t.json").write_text(json.dumps(table_document(sub5)))
    v = votes5(4, seed=3)
    (tmp_path / "v.csv").write_text("".join(",".join(map(str, row)) + "\n" for row in v))
    (tmp_path / "ids.txt").write_text("q1\nq2\nq1\nq,3\n")
    base = ("aggregate", "--table", "t.json", "--votes", "v.csv", "--ledger", "job", "--ledger-db", "l.db")
    first = cli(*base, "--budget", "10,1e-3", "--records", "ids.txt", "--format", "json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["records"] == ["q1", "q2", "q1", "q,3"] and doc["reanswered"] == [2]
    assert doc["answers"][2] == doc["answers"][0] and doc["ledger"]["answers"] == 3
    again = cli(*base, "--records", "ids.txt", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["record,answer,reanswered"] + [
        f"{r},{a},1" for r, a in zip(["q1", "q2", "q1", '"q,3"'], doc["answers"], strict=True)]
    assert "4 row(s) answered before" in again.stderr
    with Ledger(str(tmp_path / "l.db"), "job") as book:
        assert (book.view()["answers"], book.view()["epsilon_spent"]) == (3, doc["ledger"]["epsilon_spent"])
    (tmp_path / "short.txt").write_text("q1\n")
    bad = cli(*base, "--records", "short.txt", cwd=tmp_path)
    assert bad.returncode == 2 and "records" in bad.stderr and "1 ids for 4 rows" in bad.stderr
    alone = cli("aggregate", "--table", "t.json", "--votes", "v.csv", "--records", "ids.txt", cwd=tmp_path)
    assert alone.returncode == 2 and "--ledger" in alone.stderr


# --- REST ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    from svc_helpers import in_process_client

    d = tmp_path_factory.mktemp("records-svc")
    url = f"sqlite:///{d / 'svc.db'}"
    with in_process_client(url) as c:
        yield c, url


def _store(c, table) -> None:
    c.app.state.services.tables.store(table, solver="closed-form", solve_seconds=0.0, params_key=None)


def _ledger(c, name: str, budget: tuple[float, float] = (50.0, 1e-3)) -> str:
    r = c.post("/v1/ledgers", json={"name": name, "epsilon_budget": budget[0], "delta_budget": budget[1]})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_rest_aggregate_answers_records_again_at_no_cost(svc, sub5):
    c, _ = svc
    _store(c, sub5)
    lid = _ledger(c, "rest-records")
    v = votes5(5, seed=7)
    body = {"table_id": sub5.id, "ledger_id": lid, "votes": v.tolist(), "records": ["a", "b", 3, "a", "c"]}
    first = c.post("/v1/aggregate", json=body)
    assert first.status_code == 200, first.text
    a = first.json()
    assert (a["ledger_answers"], a["reanswered"], a["answers"][3]) == (4, [3], a["answers"][0])
    flipped = 1 - v[:3]  # other votes for the same records: the stored answers, reported as changed
    again = c.post("/v1/aggregate", json={**body, "votes": flipped.tolist(), "records": ["a", "b", "3"]}).json()
    assert again["answers"] == a["answers"][:3] and again["reanswered"] == [0, 1, 2]
    assert again["changed"] == [j for j in range(3) if sorted(flipped[j]) != sorted(v[j])]
    assert (again["epsilon_spent"], again["ledger_answers"]) == (a["epsilon_spent"], 4)

    for records, loc in ((["a"] * 4, ["body", "records"]), (["a", "b", "", "d", "e"], ["body", "records", 2]),
                         (["a", "b", "x" * 201, "d", "e"], ["body", "records", 2]),
                         (["a", "b", "c\u0007", "d", "e"], ["body", "records", 2]),
                         (["a", "b", 10**300, "d", "e"], ["body", "records", 2])):
        r = c.post("/v1/aggregate", json={**body, "records": records})
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"][:len(loc)] == loc
    assert c.get(f"/v1/ledgers/{lid}").json()["answers"] == 4


def test_rest_large_bodies_carry_records(svc, sub5):
    c, _ = svc
    _store(c, sub5)
    lid = _ledger(c, "rest-large", (1e9, 0.9))
    n = 2_000
    v = votes5(n, seed=9)
    records = [f"row-{i}" for i in range(n)]
    body = json.dumps({"table_id": sub5.id, "ledger_id": lid, "votes": v.tolist(), "records": records})
    assert len(body) > 16 * 1024
    first = c.post("/v1/aggregate", content=body, headers={"Content-Type": "application/json"})
    assert first.status_code == 200, first.text
    again = c.post("/v1/aggregate", json={"table_id": sub5.id, "ledger_id": lid, "votes": v[:2].tolist(),
                                          "records": records[:2]}).json()
    assert again["answers"] == first.json()["answers"][:2] and again["reanswered"] == [0, 1]
    assert again["ledger_answers"] == n


def test_another_tenant_never_sees_a_record(tmp_path, sub5):
    from test_api_tenants import in_process

    with in_process(f"sqlite:///{tmp_path / 'tenants.db'}") as clients:
        alice, bob = clients["alice"], clients["bob"]
        _store(alice, sub5)
        mine = _ledger(alice, "alice-records")
        body = {"table_id": sub5.id, "ledger_id": mine, "votes": votes5(2).tolist(), "records": ["x", "y"]}
        assert alice.post("/v1/aggregate", json=body).status_code == 200
        r = bob.post("/v1/aggregate", json=body)  # Alice's ledger: unknown to Bob, its records unread
        assert r.status_code == 404 and "answers" not in r.json()
        theirs = _ledger(bob, "bob-records")
        b = bob.post("/v1/aggregate", json={**body, "ledger_id": theirs}).json()
        assert b["reanswered"] == [] and b["ledger_answers"] == 2  # Bob's own ledger pays its own records
        assert alice.get(f"/v1/ledgers/{mine}").json()["answers"] == 2


def test_a_stability_job_continues_across_rest_job_batches_and_is_paid_once(svc):
    from darrm_opt.ledger.db import Database
    from darrm_opt.ledger.job_state import JobStates
    from darrm_opt.ledger.jobs import LabelJobStore

    c, url = svc
    t = stability_table(quota=10)
    _store(c, t)
    tenant = c.get(f"/v1/ledgers/{_ledger(c, 'probe')}").json()["tenant"]
    db = Database(url)
    try:
        request = {"K": 61, "classes": 3, "queries": 10, "budget": [50.0, 1e-3], "teachers": "disjoint-nonprivate",
                   "epsilon": None, "teacher_delta": None, "prior": "paper", "solver": "highs",
                   "kinds": ["stability"]}
        job, _ = LabelJobStore(db).open(tenant, "stable-job", request)
        LabelJobStore(db).planned(job["id"], t.id)
        url_votes = f"/v1/jobs/{job['id']}/votes"
        rows = np.zeros((6, 61), dtype=int).tolist()
        first = c.post(url_votes, json={"records": ["r0", "r1", "r2", "r3"], "votes": rows[:4]})
        assert first.status_code == 200, first.text
        spent = first.json()["statement"]["epsilon"]
        second = c.post(url_votes, json={"records": ["r2", "r3", "r4", "r5"], "votes": rows[2:6]})
        assert second.status_code == 200, second.text
        s = second.json()
        state = json.loads(JobStates(db).get(job["ledger_id"], t.id).state)
    finally:
        db.dispose()
    assert first.json()["labels"] == [0] * 4 and s["labels"] == [0] * 4
    assert (s["reanswered"], s["replayed"], s["statement"]["answered_now"]) == ([0, 1], False, 2)
    assert (state["jobs"], state["current"]["queries"]) == (1, 6)  # one job, the new records only
    assert s["statement"]["epsilon"] == spent and s["statement"]["ledger"]["answers"] == 6
    assert "rho" not in json.dumps([first.json(), s])
