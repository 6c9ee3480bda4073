"""Solver-agnostic LP layer: one module per backend behind :class:`darrm_opt.solvers.base.Backend`.

>>> from darrm_opt.solvers import get_backend
>>> get_backend("highs").name
'highs'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .base import (
    LP,
    Backend,
    LPResult,
    ModelTooLargeError,
    SolverUnavailableError,
    Status,
)

BACKENDS: tuple[str, ...] = ("highs", "gurobi", "cbc")
DEFAULT_BACKEND = "highs"

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "LP",
    "Backend",
    "LPResult",
    "ModelTooLargeError",
    "SolverUnavailableError",
    "Status",
    "available_backends",
    "get_backend",
]


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def available_backends() -> list[str]:
    """Names of the backends whose packages import and run here."""
    return [b for b in BACKENDS if _module(b).available()]


def get_backend(name: str) -> Backend:
    """The backend called ``name``; a clear error listing those available otherwise."""
    key = (name or "").strip().lower()
    if key not in BACKENDS:
        raise SolverUnavailableError(
            f"unknown solver {name!r}; available: {', '.join(available_backends()) or 'none'}"
        )
    module = _module(key)
    if not module.available():
        raise SolverUnavailableError(
            f"solver {key!r} is not available here; available: {', '.join(available_backends()) or 'none'}"
        )
    return module
