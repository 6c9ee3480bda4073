"""Optional parts of darrm-opt and the pip extras that install them.

The core install (``pip install darrm-opt``) holds the maths, HiGHS and the CLI. Everything else is an
extra: ``service`` (the REST service and the durable ledger), ``gurobi``, ``cbc``, ``plots``, ``demo``,
``dask``; ``all`` is all of them. A command that needs a missing extra stops with :class:`MissingExtra`
(exit 2) and the pip command that installs it.
"""

from __future__ import annotations

import importlib.util

from darrm_opt.errors import DarrmError

#: extra → the importable modules it provides (checked without importing them)
EXTRAS: dict[str, tuple[str, ...]] = {
    "service": ("fastapi", "uvicorn", "sqlalchemy", "alembic", "pydantic_settings"),
    "gurobi": ("gurobipy",),
    "cbc": ("pulp",),
    "plots": ("matplotlib",),
    "demo": ("sklearn",),
    "dask": ("distributed",),
}


class MissingExtra(DarrmError):
    """A feature needs an extra that is not installed."""

    exit_code = 2


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here."""
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def install_hint(extra: str) -> str:
    return f"pip install 'darrm-opt[{extra}]'"


def require(extra: str, feature: str) -> None:
    """Raise MissingExtra, naming ``feature``, the missing modules and the pip command, unless ``extra``
    is installed."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(f"{feature} needs the '{extra}' extra ({', '.join(missing)} not installed): "
                           f"{install_hint(extra)}")
