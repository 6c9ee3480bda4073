"""Child processes that die with the process that started them.

A server process computes exact compositions in child processes (``spawn``). When it is killed (SIGKILL,
OOM) nothing runs its shutdown, and its children would compute on, orphaned, holding their memory. So every
child of :func:`child_pool` runs :func:`_watch_parent` first: a daemon thread checks every :data:`WATCH_S`
seconds that its parent is still the process that started it (an orphan is adopted by another) and exits at
once otherwise, whatever the child is computing (numpy releases the interpreter lock; pure Python yields it
every few milliseconds). The resource tracker of ``multiprocessing`` ends when the last process holding its
pipe has.

Linux's ``PR_SET_PDEATHSIG`` is not used: it fires when the *thread* that started the child ends, and a pool
starts its processes from whichever thread submits work (a timer's, in the debit writer), which would kill
healthy children.

:func:`end_pool` is the clean shutdown: pending work cancelled, the children terminated (SIGTERM) and reaped.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

#: seconds between two checks of the watchdog
WATCH_S = 0.5


def _watch_parent(parent: int, then: Callable[..., Any] | None, args: tuple[Any, ...]) -> None:
    """The pool's initializer: die with ``parent`` (module docstring), then run the caller's initializer."""
    if os.getppid() != parent:  # the parent died before this child started
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="darrm-parent-watch", daemon=True).start()
    if then is not None:
        then(*args)


def child_pool(workers: int, initializer: Callable[..., Any] | None = None,
               initargs: tuple[Any, ...] = ()) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes that die with this one (module docstring)."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_watch_parent, initargs=(os.getpid(), initializer, initargs))


def pool_pids(pool: ProcessPoolExecutor) -> list[int]:
    """The process ids of the pool's children now."""
    procs = getattr(pool, "_processes", None) or {}
    return [p.pid for p in list(procs.values()) if p.pid is not None]


def end_pool(pool: ProcessPoolExecutor, timeout: float = 5.0) -> None:
    """Cancel the pool's pending work, end its children (SIGTERM, then SIGKILL after ``timeout``) and reap them."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    deadline = time.monotonic() + timeout
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(1.0)
