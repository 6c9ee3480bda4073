"""Certified tables as ``gamma_tables`` rows: the columns of a table, and a table read back from its row.

A row's id is its table's content hash (:func:`darrm_opt.privacy.table.table_id`). Shared-data rows store
(K, m, ε, Δ, δ, prior); PATE-setting and multi-class rows store m = 1, teacher_delta = 0 and ``epsilon`` =
their per-answer ε (migrations 0005, 0006), multi-class rows also ``classes``. A row is read back only if
its parameters and γ hash to its id, γ has K + 1 values in [0, 1] and its stored certificate certifies
these parameters (:class:`darrm_opt.privacy.table.CertifiedTable` checks the last two).
"""

from __future__ import annotations

import json
from typing import Any

from darrm_opt.errors import DarrmError
from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior
from darrm_opt.model.neighbours import PateParams, parse_teachers
from darrm_opt.model.params import Params
from darrm_opt.privacy.profile import PrivacyProfile
from darrm_opt.privacy.table import PATE, CertifiedTable, TableParams, table_id


class TableNotServable(DarrmError):
    """A stored table failed the re-check before use (not certified, or inconsistent)."""


def row_params(row: Any) -> tuple[TableParams, str]:
    """The parameters of a stored row and its teachers' setting."""
    classes = getattr(row, "classes", None)
    if classes is not None:
        return MulticlassParams(row.K, classes, row.epsilon, row.delta, MulticlassPrior.parse(row.prior)), PATE
    teachers = parse_teachers(getattr(row, "teachers", None) or "shared")
    if teachers == PATE:
        if row.m != 1 or row.teacher_delta != 0:
            raise TableNotServable(f"table {row.id}: a disjoint-nonprivate row must store m = 1, teacher_delta = 0")
        return PateParams(row.K, row.epsilon, row.delta, row.prior), teachers
    return Params(row.K, row.m, row.epsilon, row.teacher_delta, row.delta, row.prior), teachers


def row_gamma(row: Any) -> tuple[float, ...]:
    return tuple(float(x) for x in json.loads(row.gamma))


def row_id(row: Any) -> str:
    """The content hash of a row's table (what its id must be)."""
    params, teachers = row_params(row)
    return table_id(params, teachers, row_gamma(row))


def table_from_row(row: Any, compute_profile: Any = None) -> CertifiedTable:
    """The certified table of a row, checked (TableNotServable otherwise). Its privacy profile is the
    stored one; a row without one gets ``compute_profile(params, gamma)`` when given (None: priced by its
    per-answer cost alone)."""
    try:
        params, teachers = row_params(row)
        gamma = row_gamma(row)
        cert = json.loads(row.certificate)
    except DarrmError:
        raise
    except (ValueError, TypeError) as exc:
        raise TableNotServable(f"table {row.id}: its stored parameters or γ are malformed") from exc
    if table_id(params, teachers, gamma) != row.id:
        raise TableNotServable(f"table {row.id}: stored parameters and γ do not hash to its id")
    profile = None
    text = getattr(row, "privacy_profile", None)
    if text:
        try:
            profile = PrivacyProfile.from_dict(json.loads(text))
        except (ValueError, TypeError) as exc:
            raise TableNotServable(f"table {row.id}: its stored privacy profile is malformed") from exc
    elif compute_profile is not None:
        profile = compute_profile(params, gamma)
    try:
        return CertifiedTable(params, gamma, cert, teachers, profile)
    except DarrmError as exc:
        raise TableNotServable(f"table {row.id}: {exc}") from None


def table_columns(table: CertifiedTable, *, expected_error: float, solver: str, solve_seconds: float,
                  params_key: str | None) -> dict[str, Any]:
    """The ``gamma_tables`` row of a certified table (``params_key`` only for the service's own solves)."""
    p = table.params
    if isinstance(p, Params):
        m, epsilon, teacher_delta = p.m, p.epsilon, p.teacher_delta
    else:
        m, epsilon, teacher_delta = 1.0, p.epsilon, 0.0
    return {
        "id": table.id, "params_key": params_key, "K": p.K, "m": m, "epsilon": epsilon,
        "teacher_delta": teacher_delta, "delta": p.delta, "prior": p.prior.spec, "teachers": table.teachers,
        "classes": table.classes, "solver": solver, "gamma": json.dumps(list(table.gamma)),
        "certificate": json.dumps(table.certificate_dict()),
        "privacy_profile": None if table.profile is None else json.dumps(table.profile.to_dict()),
        "expected_error": float(expected_error), "solve_seconds": float(solve_seconds),
    }


def expected_error(table: CertifiedTable) -> float:
    """The table's expected error under its parameters' prior (the objective of its LP)."""
    import numpy as np

    g = np.asarray(table.gamma, dtype=np.float64)
    if isinstance(table.params, MulticlassParams):
        from darrm_opt.model.multiclass import expected_error as mc_error

        return float(mc_error(g, table.params.K, table.params.C, table.params.prior))
    from darrm_opt.model.objective import expected_error as binary_error

    return float(binary_error(g, table.params.prior))
