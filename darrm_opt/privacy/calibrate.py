"""Calibration searches, written once: a walk to a bracket and the bisection of a monotone predicate.

Every calibration in the library (a noise scale σ, a target m, a per-answer ε₀, a threshold T) looks for
the end of the region where a monotone predicate ``ok`` holds ("the release fits the budget"), in the
manner of dp_accounting's ``mechanism_calibration.calibrate_dp_mechanism``:

1. a bracket: either given explicitly (``ExplicitBracketInterval``) or found by :func:`walk` (or
   :func:`reach`, for one end) from a guess (``LowerEndpointAndGuess``), stepping by a caller's rule until
   the predicate changes;
2. :func:`bisect`: the bracket (good, bad), ``ok(good)`` true and ``ok(bad)`` false, is narrowed by a
   caller's midpoint rule (:func:`arithmetic`, :func:`geometric`, :func:`integer`, or a false position
   of the caller's) until the caller's stopping rule holds.

The predicate is evaluated at the points the search visits only; the good end returned has been checked,
so a calibrated value always fits (privacy never rests on the search's tolerance).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

X = TypeVar("X", int, float)

__all__ = ["arithmetic", "bisect", "geometric", "integer", "reach", "walk"]


def arithmetic(a: float, b: float) -> float:
    """The midpoint (a + b)/2."""
    return 0.5 * (a + b)


def geometric(a: float, b: float) -> float:
    """The geometric midpoint √(ab) (a relative bisection, for a and b of one sign)."""
    return math.sqrt(a * b)


def integer(a: int, b: int) -> int:
    """The integer midpoint ⌊(a + b)/2⌋."""
    return (a + b) // 2


def reach(reached: Callable[[X], bool], start: X, step: Callable[[X, int], X]) -> X:
    """The first point of start, step(start, 0), step(·, 1), … at which ``reached`` holds (a limit of the
    walk is part of ``reached``: the caller tells a limit from a found point)."""
    x, i = start, 0
    while not reached(x):
        x, i = step(x, i), i + 1
    return x


def walk(reached: Callable[[X], bool], start: X, step: Callable[[X, int], X], *,
         end: Callable[[X, int], bool] | None = None) -> tuple[X, X | None]:
    """(previous, first) from a ``start`` that is not reached: ``first`` the first point of
    step(start, 0), step(·, 1), … at which ``reached`` holds, ``previous`` the point visited before it.
    Before each step from a point x, after i steps, ``end(x, i)`` may end the walk: it then returns
    (x, None).

    With ``reached = not ok`` from a good guess this is a bracket (good, bad) for :func:`bisect`, with
    ``reached = ok`` from a bad guess a bracket (bad, good)."""
    if reached(start):
        raise ValueError("a walk starts at a point that is not reached")
    x, i = start, 0
    while True:
        if end is not None and end(x, i):
            return x, None
        y = step(x, i)
        if reached(y):
            return x, y
        x, i = y, i + 1


def bisect(ok: Callable[[X], bool], good: X, bad: X, mid: Callable[[X, X], X], *,
           done: Callable[[X, X], bool] | int, max_steps: int | None = None) -> tuple[X, X]:
    """The bracket (good, bad) narrowed: ``ok(good)`` holds and ``ok(bad)`` does not (for a monotone
    ``ok``, either end may be the larger); each step evaluates ``ok`` at ``mid(good, bad)`` and moves the end
    of the same verdict there. It stops when ``done(good, bad)`` holds, after ``done`` steps when ``done`` is
    an integer, or after ``max_steps`` steps."""
    steps = 0
    while (steps < done) if isinstance(done, int) else not done(good, bad):
        if max_steps is not None and steps >= max_steps:
            break
        m = mid(good, bad)
        if ok(m):
            good = m
        else:
            bad = m
        steps += 1
    return good, bad
