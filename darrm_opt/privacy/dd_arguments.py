"""Argument checks of the data-dependent accounting (:mod:`darrm_opt.privacy.query_costs` and the modules
beside it): InvalidParameter naming the argument for anything out of range."""

from __future__ import annotations

import math

import numpy as np

from darrm_opt.errors import InvalidParameter, positive_number


def order_value(lam: object) -> float:
    """A Rényi order λ: a finite number > 1."""
    try:
        x = float(lam)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameter("order", "must be a number > 1", lam) from None
    if not (math.isfinite(x) and x > 1.0):
        raise InvalidParameter("order", "must be a finite number > 1", lam)
    return x


def positive_value(name: str, value: object) -> float:
    """A finite number > 0."""
    return positive_number(name, value)


def count_value(name: str, value: object, low: int = 1) -> int:
    """An integer ≥ ``low`` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise InvalidParameter(name, f"must be an integer >= {low}", value)
    return int(value)
