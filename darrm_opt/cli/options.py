"""Option types and argument parsers shared by the commands (no heavy imports here)."""

from __future__ import annotations

import os
from enum import Enum

from darrm_opt.errors import InvalidParameter


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


class TabularFormat(str, Enum):
    csv = "csv"
    json = "json"


class Mode(str, Enum):
    lazy = "lazy"
    full = "full"


class Teachers(str, Enum):
    """Who the teachers are (darrm_opt.model.neighbours.TEACHER_SETTINGS)."""

    shared = "shared"
    disjoint_private = "disjoint-private"
    disjoint_nonprivate = "disjoint-nonprivate"


def dask_executor(address: str | None):
    """The sweep executor for ``--dask-scheduler`` (or DARRM_DASK_SCHEDULER); None runs locally."""
    address = address or os.environ.get("DARRM_DASK_SCHEDULER") or None
    if not address:
        return None
    from darrm_opt.certify.distributed import DaskSweepExecutor

    return DaskSweepExecutor(address)


def float_list(text: str, name: str) -> list[float]:
    """A comma-separated list of finite numbers (``--m 1,3,5``)."""
    from darrm_opt.model.params import parse_float_list

    return parse_float_list(text, name)


def int_list(text: str, name: str) -> list[int]:
    """A comma-separated list of integers ≥ 1 (``--queries 20,50,100``)."""
    vals = float_list(text, name)
    if any(v != int(v) or v < 1 for v in vals):
        raise InvalidParameter(name, "must be a comma-separated list of integers >= 1", text)
    return [int(v) for v in vals]


def number_pair(text: str, name: str) -> tuple[float, float]:
    """Two numbers ``EPS,DELTA`` (``--per-query 0.2676,3e-4``)."""
    vals = float_list(text, name)
    if len(vals) != 2:
        raise InvalidParameter(name, "must be two numbers EPS,DELTA", text)
    return vals[0], vals[1]
