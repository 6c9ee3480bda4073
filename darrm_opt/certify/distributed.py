"""Sweeps and grids on a Dask cluster (optional: ``pip install 'darrm-opt[dask]'``).

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
    """Callable used by :func:`darrm_opt.sweep.sweep`: runs each group of work items as a Dask task."""

    def __init__(self, address_or_client) -> None:
        self.client = _client(address_or_client) if isinstance(address_or_client, str) else address_or_client

    def __call__(self, problem, groups, kwargs):
        from distributed import as_completed

        [remote] = self.client.scatter([problem], broadcast=True, hash=False)
        futures = [self.client.submit(_run_group, remote, g, kwargs, pure=False) for g in groups]
        try:
            for fut in as_completed(futures):
                yield fut.result()
        finally:
            self.client.cancel(futures)

    def map_solves(self, fn, items):
        """Run ``fn(item)`` for each item as one task each; yields (index, result) as they finish."""
        from distributed import as_completed

        futures = {self.client.submit(fn, it, pure=False): i for i, it in enumerate(items)}
        try:
            for fut in as_completed(list(futures)):
                yield futures[fut], fut.result()
        finally:
            self.client.cancel(list(futures))

    def close(self) -> None:
        self.client.close()
