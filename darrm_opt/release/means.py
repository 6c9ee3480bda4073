"""The Python API of a Gaussian mean release (PCA-PATE / autoencoded PATE): numpy arrays in, arrays out.

:func:`release_means` takes the teachers' outputs (N, K, d) in [0, 1] and, for PCA-PATE, a public basis A_l
(l × d) and centre c (d,): each output is encoded as z = A_l (y − c), clipped to the table's radius, and the
noisy means z̄ (N, l) are released, paid from the ledger first when one is given; their reconstructions
c + A_lᵀ z̄ (N, d) come with them. With ``latents=True`` the input is already the (N, K, l) latents of an
encoder (any finite numbers; clipped to the radius). The table is a certified ``gaussian-mean`` table
(:func:`darrm_opt.mechanisms.gaussian_mean.gaussian_mean_table` of :func:`darrm_opt.privacy.gaussian_mean.calibrate`'s
parameters).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import mechanism
from darrm_opt.privacy.table import CertifiedTable
from darrm_opt.sampling import RandomBytes, system_random

if TYPE_CHECKING:  # pragma: no cover - the ledger needs the service extra
    from darrm_opt.ledger.local import Ledger


@dataclass(frozen=True)
class Means:
    """The released noisy means (N, l) and, with a basis, their reconstructions (N, d)."""

    means: np.ndarray
    reconstructions: np.ndarray | None


def _array(name: str, value: Any, ndim: int) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameter(name, "must be an array of numbers") from None
    if a.ndim != ndim or not np.all(np.isfinite(a)):
        raise InvalidParameter(name, f"must be a {ndim}-D array of finite numbers", tuple(a.shape))
    return a


def release_means(table: CertifiedTable, outputs: Any, *, basis: Any = None, center: Any = None,
                  latents: bool = False, ledger: Ledger | None = None,
                  random_bytes: RandomBytes = system_random) -> Means:
    """The noisy means of ``outputs`` (module docstring): checked (InvalidParameter naming ``outputs``,
    ``basis`` or ``center``; nothing is spent then), paid from ``ledger`` (one answer per row), then drawn."""
    if not isinstance(table, CertifiedTable):
        raise InvalidParameter("table", "must be a certified table (gaussian_mean_table(params))")
    sampler: Any = mechanism(table.kind).sampler(table, random_bytes)
    y = np.asarray(outputs, dtype=np.float64) if not isinstance(outputs, np.ndarray) else outputs
    A = None
    if basis is not None:
        if latents:
            raise InvalidParameter("basis", "latents are encoded already: give no basis")
        A = _array("basis", basis, 2)
        if y.ndim != 3 or A.shape[1] != y.shape[2]:
            raise InvalidParameter("basis", "must have shape (dim, d) with d = the outputs' last axis",
                                   tuple(A.shape))
        bad = ~np.isfinite(y) | (y < 0) | (y > 1)
        if bad.any():
            raise InvalidParameter("outputs", f"row {int(np.flatnonzero(bad.any(axis=(1, 2)))[0])}: every value "
                                   "must be a number in [0, 1]")
        c = np.zeros(A.shape[1]) if center is None else _array("center", center, 1)
        if c.shape != (A.shape[1],):
            raise InvalidParameter("center", f"must have {A.shape[1]} values", tuple(c.shape))
        z = (y - c) @ A.T
        try:
            prepared = sampler.prepare(z, unit=False)
        except InvalidParameter as exc:
            raise InvalidParameter("basis", f"the encoded outputs do not fit the table: {exc.rule}") from None
    else:
        try:
            prepared = sampler.prepare(y, unit=not latents)
        except InvalidParameter as exc:
            raise InvalidParameter("outputs", exc.rule, exc.value) from None
    if ledger is not None:
        ledger.pay(table, sampler.rows(prepared))
    means = sampler.draw(prepared)
    return Means(means, None if A is None else c + means @ A)
