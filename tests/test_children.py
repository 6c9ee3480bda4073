"""darrm_opt.ledger.children.IdlePool: children started by the first task, ended when idle, started again."""

from __future__ import annotations

import os
import time

import pytest

from darrm_opt.ledger.children import IdlePool


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _until(check, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def test_an_idle_pool_holds_no_child_until_a_task_ends_them_when_idle_and_starts_again():
    pool = IdlePool(1, idle_s=0.5)
    try:
        assert pool.pids() == []
        first = pool.submit(os.getpid).result(timeout=60)
        assert first != os.getpid() and pool.pids() == [first]
        assert _until(lambda: pool.pids() == [] and not _alive(first))
        second = pool.submit(os.getpid).result(timeout=60)
        assert second not in (first, os.getpid()) and pool.pids() == [second]
    finally:
        pool.shutdown()
    assert _until(lambda: not _alive(second))
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(os.getpid)


def test_a_busy_pool_is_not_ended_while_a_task_runs():
    pool = IdlePool(1, idle_s=0.2)
    try:
        running = pool.submit(time.sleep, 2.5)
        assert _until(lambda: len(pool.pids()) == 1)
        pid = pool.pids()[0]
        time.sleep(1.0)  # five idle periods while the task runs
        assert pool.pids() == [pid] and _alive(pid) and not running.done()
        assert running.result(timeout=60) is None
        assert _until(lambda: pool.pids() == [] and not _alive(pid))
    finally:
        pool.shutdown()


def _hold_and_count(folder_key: str, slots: int, inside: str, seconds: float) -> None:
    """In a child process: hold a slot for ``seconds``, appending "+" then "-" to the file ``inside``."""
    from darrm_opt.ledger.children import MachineSlots

    with MachineSlots(folder_key, slots).hold():
        with open(inside, "a") as f:
            f.write("+")
        time.sleep(seconds)
        with open(inside, "a") as f:
            f.write("-")


def _most_at_once(events: str) -> int:
    now = most = 0
    for e in events:
        now += 1 if e == "+" else -1
        most = max(most, now)
    return most


@pytest.mark.parametrize("slots", [1, 2])
def test_machine_slots_bound_the_holders_across_processes(tmp_path, slots):
    """Four processes asking for ``slots`` slots of one key: never more than ``slots`` hold one at once, and
    every one gets its turn (how many overlap depends on when each starts: the bound is what is asserted)."""
    import multiprocessing

    key, inside = f"test-{tmp_path}", str(tmp_path / "events")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hold_and_count, args=(key, slots, inside, 1.0)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    events = open(inside).read()
    assert sorted(events) == ["+"] * 4 + ["-"] * 4
    assert 1 <= _most_at_once(events) <= slots


def test_machine_slots_exclude_threads_and_free_a_dead_holders_slot(tmp_path):
    """Threads of one process exclude each other (a flock belongs to its open file), and a slot whose holder
    died (its file closed by the system) is free."""
    import threading

    from darrm_opt.ledger.children import MachineSlots

    slots = MachineSlots(f"test-{tmp_path}", 1)
    taken = slots._try()
    assert taken is not None
    got = []
    t = threading.Thread(target=lambda: got.append(slots._try()))
    t.start()
    t.join()
    assert got == [None]  # the one slot is held
    os.close(taken)  # what the system does when the holder dies
    again = slots._try()
    assert again is not None
    os.close(again)
    two = MachineSlots(f"test-{tmp_path}-two", 2)
    held = [two._try(), two._try(), two._try()]  # two slots: the third asker waits
    assert held[0] is not None and held[1] is not None and held[2] is None
    for fd in held[:2]:
        os.close(fd)
    with pytest.raises(ValueError, match="slots"):
        MachineSlots("k", 0)


def test_a_composition_child_drops_its_cached_plds():
    """The task a composition child runs returns the ε exact_epsilon gives and leaves no PLD cached behind."""
    from darrm_opt.ledger.children import child_epsilon
    from darrm_opt.privacy import pld
    from darrm_opt.privacy.stability import dp_pair_profile

    profile = dp_pair_profile(0.5, 1e-7)
    want = pld.exact_epsilon([(profile, 20)], 1e-5, coarse=True)
    pld.release_compositions()
    assert child_epsilon([(profile, 20)], 1e-5, True) == want
    assert not pld._ONE.items and not pld._COMPOSED.items


def test_machine_slots_that_cannot_be_opened_bound_nothing_and_say_so(tmp_path, caplog):
    """A slot folder this process may not write (another user's) does not stop compositions: nothing is
    bounded and a warning names the reason."""
    from darrm_opt.ledger.children import MachineSlots

    slots = MachineSlots("unwritable", 1)
    slots.folder = str(tmp_path / "a-file" / "slots")  # a folder under a plain file cannot be made
    (tmp_path / "a-file").write_text("")
    ran = []
    with caplog.at_level("WARNING", logger="darrm.ledger"), slots.hold():
        ran.append(True)
    assert ran == [True]
    assert "not bounded" in caplog.text
