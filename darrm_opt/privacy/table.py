"""A certified table: what a ledger prices and a sampler releases.

A :class:`CertifiedTable` holds a table of any kind (:mod:`darrm_opt.mechanisms`: its ``kind`` names it),
the teachers' setting, the certificate computed for exactly these values, its per-answer cost (ε₀, δ₀) and,
when computed, its certified privacy profile (its dominating pair: exact composition). Its identity is the
hash of its whole content, :func:`table_id`: two tables with equal parameters and different γ are two
tables, priced each with its own profile. Build one with :func:`darrm_opt.mechanisms.certify_table` (or a
kind's ``table``), which checks that the certificate certifies the parameters; this layer stays generic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.params import digest
from darrm_opt.privacy.profile import Profile

#: the version of the content hash (part of the hashed text)
ID_FORMAT = "darrm-table-id-v1"


def table_id(kind: str, params: Any, teachers: str, gamma: Sequence[float] | np.ndarray) -> str:
    """The table's identity: SHA-256 (first 128 bits, hex) of the canonical JSON of its kind, its
    parameters (``canonical()``), its teachers' setting and every γ value (shortest round-trip repr, so
    distinct floats give distinct text; −0.0 is written as 0.0)."""
    doc = {
        "format": ID_FORMAT,
        "kind": kind,
        "params": params.canonical(),
        "teachers": teachers,
        "gamma": [float(g) + 0.0 for g in np.asarray(gamma, dtype=np.float64).tolist()],
    }
    return digest(doc)


@dataclass(frozen=True)
class CertifiedTable:
    """A table of kind ``kind`` (``gamma``: its release probabilities, K + 1 values for a DaRRM table, none
    for a kind whose release its parameters alone define, such as a Gaussian one) with its certificate
    (a :class:`darrm_opt.certify.verdict.Verdict` computed for these parameters and this γ), teachers'
    setting, per-answer cost, expected error and certified privacy profile (None: priced by its (ε₀, δ₀)
    alone)."""

    kind: str
    params: Any
    gamma: tuple[float, ...]
    certificate: Any
    teachers: str
    profile: Profile | None
    epsilon0: float
    delta0: float
    expected_error: float
    id: str = field(init=False)

    def __post_init__(self) -> None:
        gamma = tuple(float(g) for g in self.gamma)
        if not all(0.0 <= g <= 1.0 for g in gamma):  # how many values a kind has is its mechanism's rule
            raise InvalidParameter("gamma", "must be values in [0, 1]")
        if getattr(self.certificate, "certified", False) is not True:
            raise InvalidParameter("certificate", "a table is released only with a certificate that certifies it")
        object.__setattr__(self, "gamma", gamma)
        object.__setattr__(self, "id", table_id(self.kind, self.params, self.teachers, gamma))

    @property
    def K(self) -> int:
        return int(self.params.K)

    @property
    def classes(self) -> int | None:
        """C of a table over class labels; None for 0/1 votes."""
        return getattr(self.params, "C", None)

    def certificate_dict(self) -> dict:
        return self.certificate.to_dict()
