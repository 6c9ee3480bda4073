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
:class:`IdlePool` starts its children on the first task and ends them after :data:`IDLE_S` seconds without one,
so a server that composes nothing holds no child process and no child's memory. :class:`MachineSlots` bounds how
many of them compute at once across every process of a server (a fine composition holds 0.5–0.7 GB while it
runs), so a server's memory does not grow with its workers.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import multiprocessing
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

log = logging.getLogger("darrm.ledger")

#: niceness added to the threads and child processes computing fine compositions (those of ledgers near their
#: budgets; darrm_opt.ledger.scheduler)
FINE_NICE = 10
#: seconds between two checks of the watchdog
WATCH_S = 0.5
#: seconds an :class:`IdlePool` keeps its children without a task
IDLE_S = 60.0


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


def lower_process_priority() -> None:
    """Set this (child) process's niceness to its parent's + FINE_NICE where the system allows it (a child
    inherits the niceness of the thread that started it, which may already be lowered)."""
    with contextlib.suppress(AttributeError, OSError):
        parent = os.getpriority(os.PRIO_PROCESS, os.getppid())
        os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), min(19, parent + FINE_NICE)))


def child_epsilon(parts: Any, delta: float, coarse: bool) -> float:
    """:func:`~darrm_opt.privacy.pld.exact_epsilon` in a composition child, which then drops its cached PLDs: the
    parent keeps the ε (and the database shares it), and the child's arrays go back to the system between tasks
    instead of staying resident until the child ends. It lives here, with the children's initializer, so that a
    child imports this light module and the accounting, not the ledger's database layer."""
    from darrm_opt.privacy.pld import exact_epsilon, release_compositions

    try:
        return exact_epsilon(parts, delta, coarse=coarse)
    finally:
        release_compositions()


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


class IdlePool:
    """A :func:`child_pool` started on the first :meth:`submit` and ended (:func:`end_pool`) once it has had no
    task for ``idle_s`` seconds; a later task starts a fresh one. :meth:`shutdown` ends it for good."""

    def __init__(self, workers: int, initializer: Callable[..., Any] | None = None,
                 initargs: tuple[Any, ...] = (), idle_s: float = IDLE_S) -> None:
        self._args = (workers, initializer, initargs)
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._running = 0
        self._last = time.monotonic()
        self._timer: threading.Timer | None = None
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Run ``fn(*args, **kwargs)`` in a child (module docstring)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is shut down")
            if self._pool is None:
                self._pool = child_pool(*self._args)
            self._running += 1
            future = self._pool.submit(fn, *args, **kwargs)
        future.add_done_callback(self._done)
        return future

    def pids(self) -> list[int]:
        """The process ids of the children now (none while idle)."""
        with self._lock:
            return [] if self._pool is None else pool_pids(self._pool)

    def _done(self, _: Future) -> None:
        with self._lock:
            self._running -= 1
            self._last = time.monotonic()
            if self._running == 0 and self._timer is None and not self._closed:
                self._arm(self.idle_s)

    def _arm(self, delay: float) -> None:
        self._timer = threading.Timer(delay, self._check)
        self._timer.daemon = True
        self._timer.start()

    def _check(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed or self._pool is None or self._running:
                return
            left = self._last + self.idle_s - time.monotonic()
            if left > 0:
                self._arm(left)
                return
            pool, self._pool = self._pool, None
        end_pool(pool)

    def shutdown(self) -> None:
        """End the children now; later submits fail."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if pool is not None:
            end_pool(pool)


class MachineSlots:
    """At most ``slots`` holders at once among all the processes of this machine that use the same ``key`` (a
    server's workers: its database URL): slot i is an exclusive ``flock`` on a lock file of its own in the
    system's temporary directory, so a slot is freed when its holder releases it or dies. A ``flock`` belongs to
    its open file, so threads of one process exclude each other as processes do. Where ``fcntl`` is missing
    (not POSIX), or where the lock files cannot be opened (the folder belongs to another user), nothing is
    bounded and a warning says so."""

    def __init__(self, key: str, slots: int, poll_s: float = 0.02) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be an integer >= 1, got {slots!r}")
        self.slots, self.poll_s = slots, poll_s
        self.folder = os.path.join(tempfile.gettempdir(),
                                   "darrm-slots-" + hashlib.sha256(key.encode()).hexdigest()[:16])

    def _try(self) -> int | None:
        import fcntl

        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        for i in range(self.slots):
            fd = os.open(os.path.join(self.folder, f"slot-{i}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return fd
        return None

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Wait for a free slot (polling every ``poll_s`` seconds), hold it for the block, then free it."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        try:
            fd = self._try()
            while fd is None:
                time.sleep(self.poll_s)
                fd = self._try()
        except OSError as exc:  # the folder is another user's, or the disk refuses it: bound nothing, say so
            log.warning("composition slots unavailable (%s): compositions are not bounded across processes", exc)
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
