"""A certified table: what a ledger prices and a sampler releases.

A :class:`CertifiedTable` holds a γ table of any kind (binary for teachers on shared data, binary in the
PATE setting, multi-class), the teachers' setting, the certificate computed for exactly these values and,
when computed, the table's certified privacy profile (its dominating pair: exact composition). Its
identity is the hash of its whole content, :func:`table_id`: two tables with equal parameters and
different γ are two tables, priced each with its own profile.

Per-answer cost (ε₀, δ₀): (mε, δ) for a shared-data table (Lemma 3.4: γ certified (mε, δ)-DP), the stated
(ε, δ) for PATE-setting and multi-class tables.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from darrm_opt.errors import CertificationFailed, InvalidParameter
from darrm_opt.model.multiclass import MulticlassParams
from darrm_opt.model.neighbours import PateParams, parse_teachers
from darrm_opt.model.params import Params
from darrm_opt.privacy.profile import PrivacyProfile

#: the parameters of a table of any kind
TableParams = Params | PateParams | MulticlassParams

PATE = "disjoint-nonprivate"
#: the version of the content hash (part of the hashed text)
ID_FORMAT = "darrm-table-id-v1"


def table_setting(params: TableParams, teachers: str | None = None) -> str:
    """The teachers' setting of a table, checked against its parameters: PATE-setting and multi-class
    parameters are for ``disjoint-nonprivate`` teachers, shared-data ones for ``shared`` (default) or
    ``disjoint-private``."""
    pate = isinstance(params, (PateParams, MulticlassParams))
    if teachers is None:
        return PATE if pate else "shared"
    teachers = parse_teachers(teachers)
    if pate != (teachers == PATE):
        raise InvalidParameter("teachers", f"a {type(params).__name__} table is for "
                               f"{'disjoint-nonprivate' if pate else 'shared or disjoint-private'} teachers",
                               teachers)
    return teachers


def table_id(params: TableParams, teachers: str, gamma: Sequence[float] | np.ndarray) -> str:
    """The table's identity: SHA-256 (first 128 bits, hex) of the canonical JSON of its kind's parameters,
    its teachers' setting and every γ value (shortest round-trip repr, so distinct floats give distinct
    text; −0.0 is written as 0.0)."""
    doc = {
        "format": ID_FORMAT,
        "params": params.canonical(),
        "teachers": teachers,
        "gamma": [float(g) + 0.0 for g in np.asarray(gamma, dtype=np.float64).tolist()],
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def params_key(params: TableParams, teachers: str = "shared") -> str:
    """The key of a table's *parameters* in its setting (not its γ): the service's solve cache and job id.
    ``key()`` of shared-data, PATE-setting and multi-class parameters (the last two name their setting);
    a disjoint-private table hashes its parameters with the setting."""
    teachers = table_setting(params, teachers)
    if teachers in ("shared", PATE):
        return params.key()
    text = json.dumps({**params.canonical(), "teachers": teachers}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def per_answer(params: TableParams) -> tuple[float, float]:
    """(ε₀, δ₀) of one answer: (mε, δ) for a shared-data table, the stated (ε, δ) otherwise."""
    if isinstance(params, Params):
        return params.m * params.epsilon, float(params.delta or 0.0)
    return params.epsilon, params.delta


def _certificate_matches(params: TableParams, certificate: Any) -> bool:
    """Whether ``certificate`` (an object or its dict) certifies exactly these parameters: ``certified`` is
    True and its bound (binary: e^{ε₀} − 1 + 2δ or the pair bound) or δ (multi-class) is the parameters'."""
    get = certificate.get if isinstance(certificate, dict) else (lambda k, d=None: getattr(certificate, k, d))
    if get("certified") is not True:
        return False
    if isinstance(params, MulticlassParams):
        return get("delta") == params.delta
    return get("bound") == params.bound


@dataclass(frozen=True)
class CertifiedTable:
    """A γ table with its certificate (computed for these parameters and this γ), its teachers' setting and
    its certified privacy profile (None: priced by its (ε₀, δ₀) alone). Build one with :func:`certify_table`;
    a table whose certificate does not certify its parameters cannot be constructed."""

    params: TableParams
    gamma: tuple[float, ...]
    certificate: Any
    teachers: str = ""
    profile: PrivacyProfile | None = None
    id: str = field(init=False)

    def __post_init__(self) -> None:
        gamma = tuple(float(g) for g in self.gamma)
        if len(gamma) != self.params.K + 1 or not all(0.0 <= g <= 1.0 for g in gamma):
            raise InvalidParameter("gamma", f"must be K + 1 = {self.params.K + 1} values in [0, 1]")
        if not _certificate_matches(self.params, self.certificate):
            raise InvalidParameter("certificate", "does not certify this table's parameters; build the table "
                                   "with certify_table")
        object.__setattr__(self, "gamma", gamma)
        object.__setattr__(self, "teachers", table_setting(self.params, self.teachers or None))
        object.__setattr__(self, "id", table_id(self.params, self.teachers, gamma))

    @property
    def K(self) -> int:
        return self.params.K

    @property
    def classes(self) -> int | None:
        """C of a multi-class table (votes are class labels 0..C−1); None for a binary one (0/1 votes)."""
        return self.params.C if isinstance(self.params, MulticlassParams) else None

    @property
    def epsilon0(self) -> float:
        """Per-answer ε (:func:`per_answer`)."""
        return per_answer(self.params)[0]

    @property
    def delta0(self) -> float:
        """Per-answer δ (:func:`per_answer`)."""
        return per_answer(self.params)[1]

    def certificate_dict(self) -> dict:
        c = self.certificate
        return dict(c) if isinstance(c, dict) else c.to_dict()


def certify_table(params: TableParams, gamma: Sequence[float] | np.ndarray, *, teachers: str | None = None,
                  profile: bool = True, name: str = "the table") -> CertifiedTable:
    """Certify ``gamma`` for ``params`` (raises :class:`CertificationFailed` when it is not private) and, when
    ``profile``, compute its certified privacy profile (exact composition in a ledger):

    - shared-data binary tables: the corner-multiset sweep (Lemma 3.4, Lemma 5.1) and the profile from the
      same pass (:func:`darrm_opt.privacy.profile.profile_and_certificate`);
    - PATE-setting binary tables: every (l, l ± 1) pair (:func:`darrm_opt.certify.pairs.certify_pairs`);
    - multi-class tables: every neighbouring histogram type (:func:`darrm_opt.certify.multiclass`)."""
    teachers = table_setting(params, teachers)
    g = np.asarray(gamma, dtype=np.float64)
    prof: PrivacyProfile | None = None
    cert: Any
    if isinstance(params, MulticlassParams):
        from darrm_opt.certify.multiclass import certify_multiclass
        from darrm_opt.privacy.pair_profile import multiclass_profile

        cert = certify_multiclass(params, g)
        if cert.certified and profile:
            prof = multiclass_profile(params, g)
    elif isinstance(params, PateParams):
        from darrm_opt.certify.pairs import certify_pairs
        from darrm_opt.privacy.pair_profile import pate_profile

        cert = certify_pairs(params, g)
        if cert.certified and profile:
            prof = pate_profile(params, g)
    elif profile:
        from darrm_opt.privacy.profile import profile_and_certificate

        prof, cert = profile_and_certificate(params, g)
    else:
        from darrm_opt.certify.certificate import certify

        cert = certify(params, g)
    if not cert.certified:
        what = "(mε, δ)-DP" if isinstance(params, Params) else "(ε, δ)-DP per answer"
        raise CertificationFailed(f"{name} is not {what}: {cert.reason}", cert)
    return CertifiedTable(params, tuple(g.tolist()), cert, teachers, prof)
