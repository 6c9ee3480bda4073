"""Progress of the Python API's long steps (``darrm_opt.label``, ``plan_job``): the caller's callback
``progress(stage, **info)``, or ``"tqdm"`` for tqdm bars when tqdm is installed.

A tqdm reporter shows one bar over the mechanisms a plan asks (``kind`` events: kind, index, total), named
by the kind being searched, and the job's other steps (votes, pay) as its description.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from darrm_opt.errors import InvalidParameter

Progress = Callable[..., None]


class TqdmProgress:
    """A ``progress`` callback that draws tqdm bars (``tqdm.auto``: notebooks and terminals); ``close()`` ends
    them."""

    def __init__(self) -> None:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            raise InvalidParameter("progress", "'tqdm' needs the tqdm package (pip install tqdm)") from None
        self._tqdm = tqdm
        self._bar: Any = None

    def __call__(self, stage: str, **info: Any) -> None:
        step = info.get("step", stage) if stage == "plan" else stage
        if step == "kind":
            if self._bar is None:
                self._bar = self._tqdm(total=info["total"], desc="plan", unit="kind")
            self._bar.n = info["index"] - 1
            self._bar.set_postfix_str(str(info["kind"]))
        elif step in ("chosen", "pay", "done"):
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.n = self._bar.total
            self._bar.close()
            self._bar = None


def reporter(progress: Progress | str | None) -> tuple[Progress | None, Callable[[], None]]:
    """(the callback for ``progress``: None, a callable as given, or a :class:`TqdmProgress` for ``"tqdm"``;
    what ends it once the step is over). InvalidParameter naming ``progress`` for anything else."""
    if progress is None or callable(progress):
        return progress, lambda: None
    if progress == "tqdm":
        bars = TqdmProgress()
        return bars, bars.close
    raise InvalidParameter("progress", "must be a callable progress(stage, **info), 'tqdm' or None", progress)
