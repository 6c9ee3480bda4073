"""Sweeps and grids on a Dask cluster (optional: ``pip install 'darrm-opt[dask]'``).

The executor holds its own :class:`distributed.Client` for the scheduler address it is given (never the
process-wide default client, which the CLI does not have), and every Dask call names that client or its
event loop explicitly.

A sweep is split into groups of work items (shards of multisets, :meth:`SweepProblem.plan`); each group
runs as one task on a worker and returns a partial :class:`~darrm_opt.certify.sweep.SweepResult`, merged here
exactly as the local thread pool merges its own, so the certificate is identical to a local run.
"""

from __future__ import annotations

from darrm_opt.errors import DarrmError


class DistributedUnavailable(DarrmError):
    exit_code = 2


def _client(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise DistributedUnavailable(
            "--dask-scheduler needs the 'distributed' package: pip install 'darrm-opt[dask]'"
        ) from None
    try:
        return Client(address, timeout=10, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise DistributedUnavailable(f"cannot reach the Dask scheduler at {address!r}: {exc}") from None


def _run_group(problem, group, kwargs):
    from darrm_opt.certify.sweep import single_threaded_blas

    with single_threaded_blas():
        return problem.run(group, **kwargs)


class DaskSweepExecutor:
    """Callable used by :func:`darrm_opt.certify.sweep.sweep`: runs each group of work items as a Dask task.

    Given an address it creates and owns a client (closed by :meth:`close` or on leaving a ``with``
    block); given a client it uses it and leaves it open."""

    def __init__(self, address_or_client) -> None:
        self._owned = isinstance(address_or_client, str)
        self.client = _client(address_or_client) if self._owned else address_or_client

    def __enter__(self) -> DaskSweepExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _as_completed(self, futures):
        from distributed import as_completed

        # the loop of *our* client: without it as_completed looks up a default client and fails
        return as_completed(futures, loop=self.client.loop)

    def __call__(self, problem, groups, kwargs):
        [remote] = self.client.scatter([problem], broadcast=True, hash=False)
        futures = [self.client.submit(_run_group, remote, g, kwargs, pure=False) for g in groups]
        try:
            for fut in self._as_completed(futures):
                yield fut.result()
        finally:
            self.client.cancel(futures)

    def map_solves(self, fn, items):
        """Run ``fn(item)`` for each item as one task each; yields (index, result) as they finish."""
        futures = {self.client.submit(fn, it, pure=False): i for i, it in enumerate(items)}
        try:
            for fut in self._as_completed(list(futures)):
                yield futures[fut], fut.result()
        finally:
            self.client.cancel(list(futures))

    def close(self) -> None:
        """Close the client if this executor created it."""
        if self._owned:
            self.client.close()
