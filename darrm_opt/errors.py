"""Domain errors of darrm-opt.

Every error a user can cause is one of these classes; the CLI turns them into one-line messages and exit
codes, the API into 4xx responses. Nothing else should escape to a user.
"""

from __future__ import annotations

import math


class DarrmError(Exception):
    """Base class of every darrm-opt domain error."""

    exit_code: int = 1


class InvalidParameter(DarrmError, ValueError):
    """A parameter broke a rule; ``parameter`` names it and ``rule`` states the rule."""

    exit_code = 2

    def __init__(self, parameter: str, rule: str, value: object = None) -> None:
        self.parameter = parameter
        self.rule = rule
        self.value = value
        shown = "" if value is None else f" (got {value!r})"
        super().__init__(f"invalid {parameter}: {rule}{shown}")


def positive_number(name: str, value: object) -> float:
    """``value`` as a finite float > 0, else :class:`InvalidParameter` naming ``name``."""
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameter(name, "must be a finite number > 0", value) from None
    if not (math.isfinite(x) and x > 0.0):
        raise InvalidParameter(name, "must be a finite number > 0", value)
    return x


class SolverError(DarrmError):
    """The LP layer could not produce a solution."""


class SolverUnavailable(SolverError):
    """The requested LP backend is unknown or its package is not installed."""

    exit_code = 2


class SolverLimitExceeded(SolverError):
    """The backend refused the model (e.g. Gurobi's size-limited licence)."""

    exit_code = 3


class SolverFailed(SolverError):
    """The backend ran but did not return an optimal solution."""

    exit_code = 3


class CertificationFailed(DarrmError):
    """A γ table violates the privacy bound on at least one corner multiset."""

    exit_code = 1

    def __init__(self, message: str, certificate: object = None) -> None:
        self.certificate = certificate
        super().__init__(message)


class TableFileError(DarrmError):
    """A γ-table file could not be read or does not have the expected shape."""

    exit_code = 2


class TableFileMismatch(DarrmError):
    """A table file states a value that differs from the one recomputed for its table (``verify`` accepts a
    file only as darrm-opt writes it): ``field`` names it (dotted, e.g. ``certificate.epsilon0``)."""

    exit_code = 1

    def __init__(self, message: str, field: str = "") -> None:
        self.field = field
        super().__init__(message)


class BudgetExceeded(DarrmError):
    """A batch of answers does not fit in a ledger's budget: nothing was released.

    ``binding`` names the limit that is exceeded ("epsilon", "delta" or both, comma-separated) and
    ``largest_batch`` the most answers that would still fit."""

    exit_code = 1

    def __init__(self, message: str, binding: str = "", largest_batch: int = 0) -> None:
        self.binding = binding
        self.largest_batch = largest_batch
        super().__init__(message)
