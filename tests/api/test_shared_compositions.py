"""Exact compositions shared through the database (darrm_opt.ledger.compositions), on SQLite and PostgreSQL:
one process computes a composition, another reads the same float; a fresh claim is waited for, a stale one
taken over; a database that fails means computing locally; and the composition scheduler
(darrm_opt.ledger.scheduler) gives each tenant at most one fine composition at a time, and, while another
tenant is served, its share of the time; the child processes that compute them run at the server's
niceness + FINE_NICE."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import types

import pytest

from darrm_opt.ledger.compositions import SharedCompositions
from darrm_opt.ledger.core import NeedsExact
from darrm_opt.ledger.db import Database, migrate
from darrm_opt.ledger.scheduler import CompositionScheduler
from darrm_opt.privacy import pld
from darrm_opt.privacy.gaussian_profile import GaussianProfile

DELTA = 1e-5


def _profile(sigma: float) -> GaussianProfile:
    return GaussianProfile(sigma, (1.0, 1.0))


_fresh = iter(range(1, 10**6))


def _new_sigma(base: float) -> float:
    """A σ whose compositions no earlier test put in this process's memory."""
    return base + next(_fresh) / 1024


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    url = (f"sqlite:///{tmp_path / 'c.db'}" if request.param == "sqlite"
           else request.getfixturevalue("empty_pg_database"))
    database = Database(url)
    migrate(database)
    yield database
    database.dispose()


def test_the_key_names_the_composition_exactly():
    a, b = _profile(3.0), _profile(5.0)
    key = pld.composition_key([(a, 4), (b, 6)], DELTA)
    assert key == pld.composition_key([(b, 6), (a, 1), (a, 3)], DELTA)  # merged, in canonical order
    others = {pld.composition_key([(a, 4), (b, 7)], DELTA), pld.composition_key([(a, 4), (b, 6)], 2e-5),
              pld.composition_key([(a, 4), (b, 6)], DELTA, coarse=True),
              pld.composition_key([(_profile(3.0000000000000004), 4), (b, 6)], DELTA)}  # one ulp of σ
    assert key not in others and len(others) == 4
    code = ("from darrm_opt.privacy import pld; from darrm_opt.privacy.gaussian_profile import GaussianProfile as G;"
            "print(pld.composition_key([(G(5.0, (1.0, 1.0)), 6), (G(3.0, (1.0, 1.0)), 4)], 1e-05))")
    other_process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other_process.stdout.strip() == key


def test_another_process_reads_the_stored_value_and_computes_nothing(db):
    sigma = _new_sigma(4.0)
    parts = [(_profile(sigma), 30)]
    shared = SharedCompositions(db)
    value = shared.obtain(parts, DELTA, False, lambda: pld.exact_epsilon(parts, DELTA))
    assert value == pld.exact_epsilon(parts, DELTA) and shared.computed == 1
    code = f"""
import json
from darrm_opt.ledger.compositions import SharedCompositions
from darrm_opt.ledger.db import Database
from darrm_opt.privacy.gaussian_profile import GaussianProfile
def compute():
    raise AssertionError("computed again")
shared = SharedCompositions(Database({db.url.render_as_string(hide_password=False)!r}))
value = shared.obtain([(GaussianProfile(float.fromhex({sigma.hex()!r}), (1.0, 1.0)), 30)], 1e-05, False, compute)
print(json.dumps([value.hex(), shared.read, shared.computed]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [value.hex(), 1, 0]  # the same float, bit for bit


def test_a_fresh_claim_is_waited_for_and_a_stale_one_taken_over(db):
    sigma = _new_sigma(6.0)
    parts = [(_profile(sigma), 12)]
    key = pld.composition_key(parts, DELTA)
    owner = SharedCompositions(db)
    assert owner.claim(key) == (None, True)
    assert owner.claim(key) == (None, False)  # claimed: nobody else computes it

    def computes():
        raise AssertionError("the claim's owner computes it")

    later = threading.Timer(0.3, owner.store, (key, 1.25))
    later.start()
    waiter = SharedCompositions(db, poll_s=0.02)
    assert waiter.obtain(parts, DELTA, False, computes) == 1.25 and waiter.read == 1 and waiter.computed == 0
    later.join()

    parts2 = [(_profile(sigma), 13)]
    assert owner.claim(pld.composition_key(parts2, DELTA)) == (None, True)
    assert SharedCompositions(db).obtain(parts2, DELTA, False, lambda: 9.0, wait_s=0) is None  # the look-ahead
    time.sleep(0.3)
    heir = SharedCompositions(db, stale_s=0.2, poll_s=0.02)
    value = heir.obtain(parts2, DELTA, False, lambda: pld.exact_epsilon(parts2, DELTA))
    assert heir.computed == 1 and value == pld.exact_epsilon(parts2, DELTA)
    assert heir.peek(pld.composition_key(parts2, DELTA)) == (value, False)  # stored for the others


HOLDER = """
import sys, time
from darrm_opt.ledger.compositions import SharedCompositions
from darrm_opt.ledger.db import Database
from darrm_opt.privacy.gaussian_profile import GaussianProfile
def compute():
    print("computing", flush=True)
    time.sleep(float(sys.argv[2]))
    return 4.5
shared = SharedCompositions(Database(sys.argv[1]))
print(shared.obtain([(GaussianProfile(float.fromhex(sys.argv[3]), (1.0, 1.0)), 17)], 1e-05, False, compute), flush=True)
"""


def _holder(db, sigma: float, seconds: float) -> subprocess.Popen:  # noqa: ANN001
    """A process that claims the composition of σ (17 answers) and computes it for ``seconds``."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, db.url.render_as_string(hide_password=False), str(seconds),
                          sigma.hex()], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "computing"
    return p


def test_a_claim_lives_while_its_holder_computes_and_dies_with_it(db):
    """Issue 38, item 1: a holder computing longer than STALE_S keeps its claim (renewed); once it is
    SIGKILLed another process takes the claim over within STALE_S + a poll, not minutes."""
    from darrm_opt.ledger.compositions import STALE_S

    sigma = _new_sigma(8.0)
    parts = [(_profile(sigma), 17)]
    holder = _holder(db, sigma, 600)
    try:
        time.sleep(STALE_S + 1.0)  # older than the stale time: alive only because it is renewed
        assert SharedCompositions(db).obtain(parts, DELTA, False, lambda: 9.0, wait_s=0) is None
        holder.kill()
        holder.wait(10)
        t = time.monotonic()
        heir = SharedCompositions(db, poll_s=0.02)
        assert heir.obtain(parts, DELTA, False, lambda: 2.0) == 2.0 and heir.computed == 1
        assert time.monotonic() - t < 5.0
    finally:
        holder.kill()
        holder.wait(10)


def test_a_live_holder_slower_than_the_stale_time_is_waited_for(db):
    from darrm_opt.ledger.compositions import STALE_S

    sigma = _new_sigma(9.0)
    holder = _holder(db, sigma, STALE_S + 2.0)
    try:
        waiter = SharedCompositions(db, poll_s=0.02)

        def computes():
            raise AssertionError("the live holder computes it")

        assert waiter.obtain([(_profile(sigma), 17)], DELTA, False, computes) == 4.5 and waiter.computed == 0
        assert holder.stdout is not None and holder.stdout.readline().strip() == "4.5"
    finally:
        holder.kill()
        holder.wait(10)


def test_a_failing_database_means_computing_locally():
    dead = Database("postgresql://nobody@127.0.0.1:1/none")
    parts = [(_profile(7.5), 9)]
    shared = SharedCompositions(dead)
    assert shared.obtain(parts, DELTA, False, lambda: 2.5) == 2.5 and shared.computed == 1
    dead.dispose()


#: the debits the schedulers under test hand back (none: their executors run nothing)
_requeued: list = []


class _Recorder:
    """An executor that records what it is given and runs nothing."""

    def __init__(self) -> None:
        self.started: list[NeedsExact] = []

    def submit(self, fn, need):  # noqa: ANN001, ANN201
        self.started.append(need)

    def shutdown(self, **kwargs) -> None:  # noqa: ANN003
        pass


def test_each_tenant_has_one_fine_composition_at_a_time():
    writer = CompositionScheduler(_requeued.append)
    recorder, shared = _Recorder(), _Recorder()
    writer._exact_fine, writer._exact = recorder, shared
    try:
        def need(ledger: str, tenant: str, coarse: bool = False, near: bool = True) -> NeedsExact:
            n = NeedsExact([(_profile(3.0), 10)], DELTA, coarse, ledger, near=near)
            writer.park(n, [types.SimpleNamespace(tenant=tenant, parked=0, future=None)])
            return n

        a1, a2, b1 = need("A1", "a"), need("A2", "a", coarse=True), need("B1", "b")
        a3, bucket = need("A3", "a"), need("A4", "a", coarse=True, near=False)
        assert recorder.started == [a1, b1]  # b's is not queued behind a's second and third
        assert shared.started == [bucket]  # a bucket's composition is not a near-budget one: not in a's turn
        writer._next_fine("a")  # a1 done
        assert recorder.started == [a1, b1, a2]
        writer._next_fine("b")
        writer._next_fine("a")
        assert recorder.started == [a1, b1, a2, a3]
        writer._next_fine("a")
        assert writer._fine_backlog == {}
    finally:
        writer._warming.clear()
        writer.stop()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _share_writer():  # noqa: ANN202
    clock = _Clock()
    writer = CompositionScheduler(_requeued.append, exact_share=0.1, exact_burst_s=1.0, clock=clock)
    recorder = _Recorder()
    writer._exact_fine, writer._exact = recorder, _Recorder()

    def need(ledger: str, tenant: str) -> NeedsExact:
        n = NeedsExact([(_profile(3.0), 10)], DELTA, False, ledger, near=True)
        writer.park(n, [types.SimpleNamespace(tenant=tenant, parked=0, future=None)])
        return n

    return clock, writer, recorder, need


def test_a_tenant_near_its_budget_gets_its_share_of_the_time_while_another_is_served():
    clock, writer, recorder, need = _share_writer()
    try:
        writer.saw("b")  # tenant b's debits are coming
        a1 = need("A1", "a")
        assert recorder.started == [a1]  # within a's burst
        clock.now += 3.0  # a1 ran 3 s while b was served: 1 - 3 = -2 s of credit, 20 s at 10 %
        writer.saw("b")
        writer._charge("a", clock.now - 3.0)
        assert writer._share_wait("a") == pytest.approx(20.0)
        a2 = need("A2", "a")
        writer._next_fine("a")  # a1 done: a2's turn, but a owes its share
        assert recorder.started == [a1] and len(writer._timers) == 1
        b1 = need("B1", "b")  # b is not held back by a's debt
        assert recorder.started == [a1, b1]
        clock.now += 10.0
        writer.saw("b")
        assert writer._share_wait("a") == pytest.approx(10.0)  # 1 s of credit regained in 10 s
        clock.now += 10.0
        writer.saw("b")
        assert writer._share_wait("a") == 0.0  # paid back: a2 starts at the timer's next look (within 1 s)
        deadline = time.monotonic() + 5
        while len(recorder.started) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert recorder.started == [a1, b1, a2]
    finally:
        writer._warming.clear()
        writer.stop()


def test_a_tenant_alone_is_not_held_back():
    clock, writer, recorder, need = _share_writer()
    try:
        writer.saw("a")
        a1 = need("A1", "a")
        clock.now += 30.0  # 30 s of compositions with no other tenant: nothing charged
        writer._charge("a", clock.now - 30.0)
        assert writer._share_wait("a") == 0.0 and len(writer._shares) == 0
        writer.saw("b")
        clock.now += 0.5
        writer._charge("a", clock.now - 3.0)  # b came during this one: charged, 1 - 3 = -2 s
        assert writer._share_wait("a") == pytest.approx(20.0)
        a2 = need("A2", "a")
        writer._next_fine("a")
        assert recorder.started == [a1]  # waits for its share while b is served
        clock.now += 1.5  # b gone: a is alone, its debt no longer holds it
        assert writer._share_wait("a") == 0.0
        deadline = time.monotonic() + 5
        while len(recorder.started) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert recorder.started == [a1, a2]
    finally:
        writer._warming.clear()
        writer.stop()


def test_a_scheduler_without_a_share_never_waits():
    writer = CompositionScheduler(_requeued.append)
    recorder = _Recorder()
    writer._exact_fine = recorder
    try:
        writer.saw("b")
        for ledger in ("A1", "A2", "A3"):
            n = NeedsExact([(_profile(3.0), 10)], DELTA, False, ledger, near=True)
            writer.park(n, [types.SimpleNamespace(tenant="a", parked=0, future=None)])
            writer._next_fine("a")
        assert len(recorder.started) == 3 and writer._timers == set()
        with pytest.raises(ValueError, match="exact_share"):
            CompositionScheduler(_requeued.append, exact_share=0.0)
    finally:
        writer._warming.clear()
        writer.stop()


def _niceness() -> int:
    import os

    return os.getpriority(os.PRIO_PROCESS, 0)


def test_composition_processes_run_at_the_servers_niceness_plus_fine_nice():
    """A child started from a thread already lowered by FINE_NICE is not lowered twice."""
    import concurrent.futures
    import multiprocessing
    import os

    from darrm_opt.ledger import children, scheduler

    base = os.getpriority(os.PRIO_PROCESS, 0)
    want = min(19, base + children.FINE_NICE)
    lowered = concurrent.futures.ThreadPoolExecutor(1, initializer=scheduler._lower_priority)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=children.lower_process_priority) as child:
        got = lowered.submit(lambda: child.submit(_niceness).result()).result()
    lowered.shutdown()
    assert got == want
