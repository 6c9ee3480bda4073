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
