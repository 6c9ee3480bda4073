"""Certified tables as ``gamma_tables`` rows (reading them back is the registry's:
:func:`darrm_opt.mechanisms.table_from_row`).

A row is keyed by its table's content hash and holds its ``kind``, its parameters as the kind's canonical
JSON (``params``), its teachers' setting, γ, certificate and privacy profile as exact JSON, and its
per-answer cost. The columns K, m, epsilon, teacher_delta, delta, prior and classes predate ``params``: K,
delta, prior and classes serve the list filters; m = 1 and teacher_delta = 0 stand where a kind has no such
parameter (SQLite cannot relax their NOT NULL while other tables reference ``gamma_tables``), with
``epsilon`` the per-answer ε there. Nothing reads them to rebuild a table.
"""

from __future__ import annotations

import json
from typing import Any

from darrm_opt.errors import DarrmError
from darrm_opt.privacy.table import CertifiedTable


class TableNotServable(DarrmError):
    """A stored table failed the re-check before use (not certified, or inconsistent)."""


def table_columns(table: CertifiedTable, *, solver: str, solve_seconds: float,
                  params_key: str | None) -> dict[str, Any]:
    """The ``gamma_tables`` row of a certified table (``params_key`` only for the service's own solves)."""
    canonical = table.params.canonical()
    return {
        "id": table.id, "kind": table.kind, "params": json.dumps(canonical, sort_keys=True),
        "params_key": params_key, "K": table.K,
        "m": float(canonical.get("m", 1.0)), "epsilon": float(canonical.get("epsilon", table.epsilon0)),
        "teacher_delta": float(canonical.get("teacher_delta", 0.0)), "delta": table.delta0,
        "prior": str(canonical.get("prior", "paper")), "teachers": table.teachers, "classes": table.classes,
        "solver": solver, "gamma": json.dumps(list(table.gamma)),
        "certificate": json.dumps(table.certificate_dict()),
        "privacy_profile": None if table.profile is None else json.dumps(table.profile.to_dict()),
        "expected_error": table.expected_error, "solve_seconds": float(solve_seconds),
    }
