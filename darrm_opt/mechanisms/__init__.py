"""Every kind of release behind one interface (:class:`~darrm_opt.mechanisms.base.Mechanism`) with one
registry (:mod:`darrm_opt.mechanisms.registry`). Front ends find a kind here and never test which kind
they hold: by name (:func:`mechanism`), by its parameters (:func:`mechanism_for`), by a request's teachers
and classes (:func:`kind_for`), from a document (:func:`table_from_document`) or a database row
(:func:`table_from_row`). A served table's wire form is its kind's ``output_model``, and the service's table
output the union of them all (:func:`table_output_union`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from darrm_opt.errors import DarrmError, InvalidParameter, TableFileError
from darrm_opt.privacy.profile import profile_from_dict
from darrm_opt.privacy.table import CertifiedTable

from .base import Example, Mechanism, Solved
from .outputs import TableOutBase
from .registry import MECHANISMS

__all__ = ["MECHANISMS", "Example", "Mechanism", "Solved", "TableOutBase", "certify_table", "kind_for",
           "mechanism", "mechanism_for", "params_key", "plan_job", "table_document", "table_from_document",
           "table_from_row", "table_output_union", "SCHEMA_VERSION"]

#: the version of the table document (``kind`` and ``schema_version`` name what a document holds)
SCHEMA_VERSION = 1
TEACHERS = ("shared", "disjoint-private", "disjoint-nonprivate")
_BY_TYPE = {m.params_type: m for m in MECHANISMS.values()}


def mechanism(kind: str) -> Mechanism:
    """The mechanism called ``kind``; InvalidParameter naming ``kind`` otherwise."""
    try:
        return MECHANISMS[kind]
    except (KeyError, TypeError):
        raise InvalidParameter("kind", f"must be one of {', '.join(MECHANISMS)}", kind) from None


def mechanism_for(params: Any) -> Mechanism:
    """The mechanism whose parameter type ``params`` has."""
    try:
        return _BY_TYPE[type(params)]
    except KeyError:
        raise InvalidParameter("params", f"{type(params).__name__} is not the parameter type of any mechanism") \
            from None


def kind_for(teachers: str | None = None, classes: int | None = None) -> Mechanism:
    """The mechanism a request asks for by its teachers' setting and whether it has ``classes`` (class-label
    votes; such tables are for disjoint-nonprivate teachers by default, 0/1 ones for shared teachers)."""
    if teachers is not None and teachers not in TEACHERS:
        raise InvalidParameter("teachers", f"must be one of {', '.join(TEACHERS)}", teachers)
    labels = classes is not None
    setting = teachers or ("disjoint-nonprivate" if labels else "shared")
    for m in MECHANISMS.values():
        if m.labels == labels and setting in m.settings:
            return m
    if labels:
        raise InvalidParameter("teachers", "a multi-class table (with classes) must be for 'disjoint-nonprivate' "
                               "teachers", teachers)
    raise InvalidParameter("teachers", f"no kind of table for {setting} teachers without classes", teachers)


def table_output_union() -> Any:
    """The wire form of a served table of any registered kind: the union of every kind's ``output_model``,
    discriminated on ``kind`` (``Annotated[Union[...], Field(discriminator="kind")]``; a registry of one kind
    gives its model alone, with no discriminator)."""
    from typing import Annotated, Union

    from pydantic import Field

    models = tuple(m.output_model for m in MECHANISMS.values())
    if len(models) == 1:
        return models[0]
    return Annotated[Union[models], Field(discriminator="kind")]  # noqa: UP007 - a Union over a tuple of types


def params_key(params: Any, teachers: str | None = None) -> str:
    """The key of a table's *parameters* in its setting (not its γ): the service's solve cache and job id.
    ``key()`` of the parameters in the kind's default setting; with another setting, the same hash over the
    parameters and the setting."""
    from darrm_opt.model.params import digest

    m = mechanism_for(params)
    teachers = m.setting(teachers)
    if teachers == m.settings[0]:
        return params.key()
    return digest({**params.canonical(), "teachers": teachers})


def certify_table(params: Any, gamma: Sequence[float] | np.ndarray, *, teachers: str | None = None,
                  profile: bool = True, name: str = "the table", progress: Any = None) -> CertifiedTable:
    """Certify ``gamma`` for ``params`` with its kind's certificate (CertificationFailed when it is not
    private) and, when ``profile``, compute its certified privacy profile."""
    return mechanism_for(params).certify_table(params, gamma, teachers=teachers, profile=profile, name=name,
                                               progress=progress)


def document_header(params: Any) -> dict[str, Any]:
    """The fields that open a table document of ``params``'s kind: ``kind`` and ``schema_version``."""
    return {"kind": mechanism_for(params).kind, "schema_version": SCHEMA_VERSION}


def table_document(table: CertifiedTable) -> dict[str, Any]:
    """The document of a certified table of any kind (a table file that ``verify``, ``aggregate`` and the
    service read back): its header, parameters, setting, id, γ (absent for a kind without a table),
    certificate, privacy profile and expected error."""
    m = mechanism(table.kind)
    doc: dict[str, Any] = {**document_header(table.params), **table.params.canonical(), "teachers": table.teachers,
                           "id": table.id}
    if m.table_size(table.params):
        doc["gamma"] = list(table.gamma)
    doc.update(certificate=table.certificate_dict(),
               privacy_profile=None if table.profile is None else table.profile.to_dict(),
               expected_error=table.expected_error)
    return doc


def document_kind(data: Mapping[str, Any]) -> Mechanism:
    """The kind of a table document: its ``kind`` field, or for documents written before it, the kind its
    fields imply (``classes``: multi-class; ``teachers`` disjoint-nonprivate: PATE setting; else DaRRM)."""
    if data.get("kind") is not None:
        return mechanism(data["kind"])
    return kind_for(data.get("teachers") or None, data.get("classes"))


def read_document(data: Mapping[str, Any], source: str = "the table") -> tuple[Mechanism, Any, np.ndarray]:
    """(kind, parameters, γ) of a table document of any kind (:func:`document_kind`): every field its kind
    requires must be stated (null counts as missing: a table is certified for the parameters it states,
    never for assumed ones), fields its kind does not have are refused, and γ has its kind's
    ``table_size`` (K + 1 numbers for a DaRRM table)."""
    m = document_kind(data)
    missing = [k for k in m.document_fields if data.get(k) is None]
    if missing:
        raise TableFileError(f"{source} lacks field(s) {', '.join(missing)}: every privacy parameter must be "
                             "stated (no defaults are assumed)")
    extra = [k for k in m.absent_fields if data.get(k) is not None]
    if extra:
        raise TableFileError(f"{source} is a {m.kind} table but states {', '.join(extra)}: {m.absent_reason}")
    m.refuse_subsample(data)
    params = m.params_from(data)
    values = data.get("gamma")
    if values is None and m.table_size(params) == 0:
        values = []
    if not isinstance(values, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                               for x in values):
        raise InvalidParameter("gamma", "must be a list of numbers")
    return m, params, m.check_gamma(params, values)


def table_from_document(data: Mapping[str, Any], *, certify: bool = True, profile: bool = True,
                        name: str = "the table", source: str | None = None, progress: Any = None) -> CertifiedTable:
    """The table in a document (a table file, a request; read by :func:`read_document`, whose errors name
    ``source``, else ``name``): certified again when ``certify`` (its stored certificate is never trusted
    then), else read with its stored certificate."""
    m, params, gamma = read_document(data, source or name)
    teachers = data.get("teachers") or None
    if certify:
        return m.certify_table(params, gamma, teachers=teachers, profile=profile, name=name, progress=progress)
    cert = data.get("certificate")
    if not isinstance(cert, Mapping):
        raise TableFileError(f"{name} has no certificate")
    stored = data.get("privacy_profile")
    prof = profile_from_dict(stored) if isinstance(stored, Mapping) else None
    return m.table(params, gamma, cert, teachers, prof)


def table_from_row(row: Any, compute_profile: Callable[[Mechanism, Any, tuple[float, ...]], Any] | None = None
                   ) -> CertifiedTable:
    """The certified table of a ``gamma_tables`` row (:mod:`darrm_opt.ledger.tables`), checked: its kind and
    parameters (the ``params`` JSON column) and γ hash to its id, and its stored certificate certifies
    these parameters. Its privacy profile is the stored one; a row without one gets
    ``compute_profile(mechanism, params, gamma)`` when given. InvalidParameter otherwise."""
    from darrm_opt.ledger.tables import TableNotServable

    try:
        m = mechanism(row.kind)
        params = m.params_from(json.loads(row.params))
        gamma = tuple(float(x) for x in json.loads(row.gamma))
        cert = json.loads(row.certificate)
        text = getattr(row, "privacy_profile", None)
        prof = profile_from_dict(json.loads(text)) if text else None
    except (ValueError, TypeError, InvalidParameter) as exc:
        raise TableNotServable(f"table {row.id}: its stored kind, parameters, γ or profile are malformed "
                               f"({exc})") from None
    if prof is None and compute_profile is not None:
        prof = compute_profile(m, params, gamma)
    try:
        table = m.table(params, gamma, cert, row.teachers, prof)
    except InvalidParameter as exc:
        raise TableNotServable(f"table {row.id}: {exc}") from None
    if table.id != row.id:
        raise TableNotServable(f"table {row.id}: its stored kind, parameters and γ do not hash to its id")
    return table


def plan_job(job: Any, progress: Any = None, kinds: Sequence[str] | None = None
             ) -> tuple[Any, list[Any], dict[str, str]]:
    """Every kind's offers for ``job`` (:class:`darrm_opt.planning.job.Job`; only ``kinds`` when given, else
    every kind ``planned_by_default``): its data-independent offer (``Mechanism.plan``) and, where it has
    one, its data-dependent offer (``Mechanism.plan_data_dependent``), and the most accurate of those the
    job's ``accounting`` allows: with ``worst-case`` (the default) only offers whose Q answers fit the budget
    over every dataset, so that a plain ledger at the budget pays them all (a data-dependent offer is listed,
    never chosen); with ``data-dependent`` every offer. Returns (chosen offer, all offers by expected error,
    why each other kind or accounting made none: a kind's DarrmError is its refusal, keyed by its kind, or
    "KIND (data-dependent)"). InvalidParameter naming ``budget_epsilon`` when no offer the accounting allows
    fits the job in its budget; when only one kind tried and refused, its own error instead (e.g. the
    shared setting's least ε reachable). ``progress``: a callback ``progress(stage, **info)`` or ``"tqdm"``
    (:mod:`darrm_opt.progress`): ``kind`` (kind, index, total) as each kind starts, each kind's own search
    steps, ``offer`` (kind, expected_error) as one makes its offer.

    The one planning entry point of every setting and front end: the shared and disjoint-private settings'
    search is the ``darrm`` kind's (:func:`darrm_opt.planning.plan.plan_shared`; for disjoint-private
    teachers within the budget, the plain majority, free: an offer without a table), PATE's per-answer
    search the ``darrm-pate`` kind's (:func:`darrm_opt.planning.pate_plan.plan_pate`)."""
    from darrm_opt.progress import reporter

    progress, done = reporter(progress)
    try:
        return _plan_job(job, progress, kinds)
    finally:
        done()


def _job_for(m: Mechanism, job: Any) -> Any:
    """The job as kind ``m`` plans it: itself where ``m`` serves its teachers; for disjoint-private teachers
    and a kind of the PATE setting, the same job with disjoint-nonprivate teachers (each record is in one
    teacher's shard, all that the PATE setting's proofs use: the teachers' own privacy is left unused, and
    the offer's table states the PATE setting); None where ``m`` does not serve it."""
    if job.teachers in m.settings:
        return job
    if job.teachers == "disjoint-private" and "disjoint-nonprivate" in m.settings:
        from dataclasses import replace

        return replace(job, teachers="disjoint-nonprivate", epsilon=None, teacher_delta=None)
    return None


def _plan_job(job: Any, progress: Any, kinds: Sequence[str] | None) -> tuple[Any, list[Any], dict[str, str]]:
    offers: list[Any] = []
    refused: dict[str, str] = {}
    errors: dict[str, DarrmError] = {}
    if kinds is not None and not job.thorough:  # kinds the user named: every variant of theirs is searched
        from dataclasses import replace

        job = replace(job, thorough=True)
    asked = ([mechanism(k) for k in kinds] if kinds is not None
             else [m for m in MECHANISMS.values() if m.planned_by_default])
    if kinds is not None:  # a kind the user named for teachers it does not serve: its rule, naming teachers
        for m in asked:
            if _job_for(m, job) is None:
                try:
                    m.setting(job.teachers)
                except InvalidParameter as exc:
                    refused[m.kind] = str(exc)
                    errors[m.kind] = exc
    asked = [m for m in asked if _job_for(m, job) is not None]
    if getattr(job, "subsample", None) is not None:  # a job that fixes m: only kinds that sample teachers
        for m in asked:
            if not m.subsampling and job.teachers in m.settings:
                refused[m.kind] = f"invalid subsample: a {m.kind} answer reads every teacher"
        asked = [m for m in asked if m.subsampling]
    ways = [(how, name, i if data_independent else None) for i, m in enumerate(asked)
            for how, name, data_independent in (
                (lambda j, m=m: m.plan(_job_for(m, j), progress), m.kind, True),
                (lambda j, m=m: m.plan_data_dependent(_job_for(m, j)), f"{m.kind} (data-dependent)", False))]
    from darrm_opt.privacy.pld import release_compositions

    for how, name, i in ways:
        release_compositions()  # each kind composes its own tables: the last kind's PLDs are not reused
        if progress is not None and i is not None:
            progress("kind", kind=name, index=i + 1, total=len(asked))
        try:
            offer = how(job)
        except DarrmError as exc:  # this kind cannot serve the job (its rule, its budget, its solver)
            refused[name] = str(exc)
            errors[name] = exc
            continue
        if offer is None:
            continue
        offers.append(offer)
        if progress is not None:
            progress("offer", kind=offer.label, expected_error=offer.expected_error)
        if offer.majority_free:  # the plain majority itself, at no further cost: no offer errs less
            break
    if not offers and len(errors) == 1 and isinstance(only := next(iter(errors.values())), InvalidParameter):
        raise only  # the one kind that serves the job says which parameter rules it out
    if not offers:
        why = "; ".join(f"{k}: {v}" for k, v in refused.items()) or "no kind serves this job"
        raise InvalidParameter("budget_epsilon", f"no mechanism fits the job's budget ({why})", job.budget_epsilon)
    offers.sort(key=lambda o: (o.expected_error, o.epsilon_spent))
    accounting = getattr(job, "accounting", "worst-case")
    allowed = offers if accounting == "data-dependent" else [o for o in offers if o.worst_case]
    if not allowed:
        dd = "; ".join(f"{o.label}: E[error] {o.expected_error:.4g}, sanitised ε target {o.epsilon_spent:.6g}, "
                       f"worst case ε {_shown(o.worst_case_epsilon)}" for o in offers)
        why = "; ".join(f"{k}: {v}" for k, v in refused.items() if not k.endswith("(data-dependent)"))
        raise InvalidParameter("budget_epsilon", f"no mechanism fits the job's budget in the worst case "
                               f"({why or 'no kind made a worst-case offer'}); only data-dependent offers "
                               f"fit their targets ({dd}): plan with accounting data-dependent to choose one",
                               job.budget_epsilon)
    return allowed[0], offers, refused


def _shown(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.6g}"
