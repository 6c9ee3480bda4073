"""Option types and argument parsers shared by the commands (no heavy imports here)."""

from __future__ import annotations

import os
import re
import socket
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


class PlanAccounting(str, Enum):
    """What ``plan`` may choose (darrm_opt.planning.job.PLAN_ACCOUNTINGS)."""

    worst_case = "worst-case"
    data_dependent = "data-dependent"


#: a Dask scheduler address as users write it: [SCHEME://]HOST:PORT (HOST a name, an IPv4 or a [bracketed] IPv6)
_DASK_ADDRESS = re.compile(r"(?:(?P<scheme>tcp|tls|ws|wss|ucx)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s/:\[\]]+)"
                           r":(?P<port>[0-9]{1,5})/?")


def check_dask_address(address: str) -> str:
    """``address`` if it is a scheduler address whose host resolves; else InvalidParameter at once (the Dask
    client itself would retry an unusable address until its connect timeout)."""
    match = _DASK_ADDRESS.fullmatch(address.strip())
    if match is None or not 0 < int(match["port"]) < 65536:
        raise InvalidParameter("dask-scheduler", "must be a Dask scheduler address [tcp://]HOST:PORT, as "
                               "`dask scheduler` prints it (e.g. tcp://10.0.0.5:8786)", address)
    host = match["host"].strip("[]")
    try:
        socket.getaddrinfo(host, int(match["port"]))
    except (OSError, UnicodeError):
        raise InvalidParameter("dask-scheduler", f"the host {host!r} cannot be resolved", address) from None
    return address.strip()


def dask_executor(address: str | None):
    """The sweep executor for ``--dask-scheduler`` (or DARRM_DASK_SCHEDULER); None runs locally."""
    address = address or os.environ.get("DARRM_DASK_SCHEDULER") or None
    if not address:
        return None
    address = check_dask_address(address)
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
