"""A table file is accepted only as darrm-opt writes it: its document rebuilt from the recomputed table by the
writer that wrote it (:mod:`darrm_opt.release.documents`), compared field by field.

``verify`` recomputes a file's table (:func:`darrm_opt.release.verify.verify_file`); this module then finds the
file's *form* (which writer wrote it, :data:`FORMS`), rebuilds that form's document for the recomputed table
with that writer, and compares the two documents (:func:`compare`):

- every field the writer writes must be there, and no other: a missing or unknown field, or an unknown
  ``schema_version``, is refused as a malformed table file (:class:`~darrm_opt.errors.TableFileError`, exit 2);
- every value must be the one the writer writes for the recomputed table: its certificate, expected error, id,
  kind, the ε its planned answers spend, its baselines and calibrations, ... A value that differs is refused
  (:class:`~darrm_opt.errors.TableFileMismatch`, exit 1), naming the field, the recomputed value and the value
  found;
- the values a writer records about *how* it made the file (:data:`RECORDED`: a solver's name, seconds, the
  planner's other offers) are no function of the table: verify checks their type, not their value;
- the ``privacy_profile`` a writer stores is the one it computed on its own path (the optimiser's sweeps): it
  must be present where the writer writes one, and every statement it makes is proven against the table's true
  profile without tolerance (``Mechanism.check_profile``, before this comparison); the rebuilt document holds
  that proven profile, so its structure and its use (the ε a plan spends is composed from it) are compared.

Numbers are compared exactly (``==``; an integer equals the same float): the writers write every float with
Python's shortest round-trip repr (``json.dumps``), which reads back as the very float that was computed, and
the rebuild runs the writer's own deterministic code on the same inputs, so a file darrm-opt wrote rebuilds to
equal values. There is no rounding to allow for, and any other value is a statement darrm-opt did not make.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from darrm_opt.errors import DarrmError, InvalidParameter, TableFileError, TableFileMismatch
from darrm_opt.mechanisms.registry import MECHANISMS


@dataclass(frozen=True)
class Recorded:
    """A value a writer records about how it made a file (not a function of the table): ``check`` its type,
    ``what`` the type in words."""

    what: str
    check: Callable[[Any], bool]


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


DURATION = Recorded("a number of seconds >= 0", lambda x: _number(x) and x >= 0)
COUNT = Recorded("an integer >= 0", _count)
TEXT = Recorded("a string", lambda x: isinstance(x, str))
GAP = Recorded("a number or null", lambda x: x is None or _number(x))
OBJECTS = Recorded("a list of objects", lambda x: isinstance(x, list) and all(isinstance(v, dict) for v in x))
REASONS = Recorded("an object of strings", lambda x: isinstance(x, dict) and all(isinstance(v, str)
                                                                              for v in x.values()))

#: the fields (by name, at any depth) whose value records how a file was made: the solver and its run, times,
#: LP sizes, how many scales a calibration tried, and the planner's record of the candidates it evaluated,
#: the other kinds' offers and why a kind made none (tables other than the file's, not re-planned by verify)
RECORDED: dict[str, Recorded] = {
    "seconds": DURATION, "sweeps": COUNT, "solver": TEXT, "mode": TEXT, "iterations": COUNT,
    "active_constraints": COUNT, "objective_gap": GAP, "pair_types": COUNT, "lp_rows": COUNT,
    "scales_tried": COUNT, "candidates": OBJECTS, "alternatives": OBJECTS, "refused": REASONS,
}


class Refusal:
    """Builds the one-line refusals of a file (``source`` names it, ``form`` the writer it is compared with)."""

    def __init__(self, source: str, form: str) -> None:
        self.source, self.form = source, form

    @property
    def why(self) -> str:
        return f"verify accepts a table file only as darrm-opt writes it ({self.form})"

    def missing(self, path: str) -> TableFileError:
        return TableFileError(f"{self.source} lacks field {path}, which darrm-opt writes; {self.why}")

    def unknown(self, path: str) -> TableFileError:
        return TableFileError(f"{self.source} has unknown field {path}, which darrm-opt does not write; {self.why}")

    def mistyped(self, path: str, what: str, found: Any) -> TableFileError:
        return TableFileError(f"{self.source}: {path} must be {what}, found {_shown(found)}; {self.why}")

    def differs(self, path: str, expected: Any, found: Any) -> TableFileMismatch:
        return TableFileMismatch(f"{self.source}: {path} is {_shown(found)}, but the recomputed table gives "
                                 f"{_shown(expected)}; {self.why}", path)


def _shown(value: Any, limit: int = 80) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _join(path: str, key: str) -> str:
    return key if not path else f"{path}.{key}"


def compare(expected: Any, found: Any, refuse: Refusal, path: str = "") -> None:
    """Raise the refusal of the first field where ``found`` (a document read from a file) is not ``expected``
    (the document the writer writes for the recomputed table), walking ``expected`` in its order: missing and
    unknown fields first at each level, then each value (module docstring)."""
    key = path.rsplit(".", 1)[-1]
    if path and key in RECORDED:
        rule = RECORDED[key]
        if not rule.check(found):
            raise refuse.mistyped(path, rule.what, found)
        return
    if isinstance(expected, Mapping):
        if not isinstance(found, Mapping):
            raise refuse.differs(path or "the document", expected, found)
        for k in expected:
            if k not in found:
                raise refuse.missing(_join(path, k))
        for k in found:
            if k not in expected:
                raise refuse.unknown(_join(path, k))
        for k, v in expected.items():
            compare(v, found[k], refuse, _join(path, k))
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(found, list) or len(found) != len(expected):
            raise refuse.differs(path, list(expected), found)
        for i, (e, f) in enumerate(zip(expected, found)):
            compare(e, f, refuse, f"{path}[{i}]")
        return
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        if type(found) is not type(expected) or found != expected:
            raise refuse.differs(path, expected, found)
        return
    if _number(expected):
        if not _number(found) or found != expected:
            raise refuse.differs(path, expected, found)
        return
    raise TypeError(f"{path}: a writer produced {type(expected).__name__}, which no JSON document holds")


# --------------------------------------------------------------------------------------------------------
# The forms: which writer wrote a document, and that writer's document for the recomputed table


@dataclass(frozen=True)
class DocumentRecheck:
    """What verify recomputed for a file: its kind (``mechanism``), parameters, γ, certificate, and ``table``:
    the certified table with the file's stored privacy profile (proven valid before the comparison)."""

    data: Mapping[str, Any]
    mechanism: Any
    params: Any
    gamma: Any
    certificate: Any
    table: Any
    source: str

    def get(self, path: str) -> Any:
        """The value at a dotted ``path`` of the document: an input of the rebuild (the job a plan was made
        for, the budget a calibration was made for), read as the writer wrote it; TableFileError naming the
        path when it is missing."""
        value: Any = self.data
        for part in path.split("."):
            if not isinstance(value, Mapping) or value.get(part) is None:
                raise TableFileError(f"{self.source} lacks field {path}, which darrm-opt writes (the input the "
                                     "file's values are recomputed from)")
            value = value[part]
        return value


@dataclass(frozen=True)
class Form:
    """A writer's document: ``name`` and the command that writes it, the kinds it holds, ``marks`` (the
    fields only it writes, by which a document is matched to it) and ``rebuild`` (its document for a
    recomputed table, written by the writer itself)."""

    name: str
    command: str
    kinds: tuple[str, ...]
    marks: tuple[str, ...]
    rebuild: Callable[[DocumentRecheck], dict]


def _table_form(r: DocumentRecheck) -> dict:
    from darrm_opt.mechanisms import table_document

    return table_document(r.table)


def _solution(r: DocumentRecheck, **fields: Any) -> SimpleNamespace:
    """A stand-in for a solver's solution: the recomputed γ, certificate and expected error (the fields a
    writer records about the solve are RECORDED, so any placeholder does)."""
    return SimpleNamespace(params=r.params, gamma=tuple(r.table.gamma), certificate=r.certificate,
                           expected_error=r.table.expected_error, **fields)


def _darrm_inputs(r: DocumentRecheck) -> tuple[dict, str, SimpleNamespace]:
    """The baselines (recomputed when the file has them: ``--baselines``), the teachers' setting the file
    states, and the solution stand-in of a DaRRM ``solve`` or ``plan`` document."""
    from darrm_opt.release.table_file import baseline_tables

    stated = r.data.get("baselines")
    with_baselines = not isinstance(stated, Mapping) or any(v is not None for v in stated.values()) \
        or bool(r.data.get("baseline_unavailable"))
    base = baseline_tables(r.params) if with_baselines else {}
    teachers = r.mechanism.setting(_teachers_of(r))
    sol = _solution(r, solver=None, mode=None, iterations=None, active_constraints=None, objective_gap=None)
    return base, teachers, sol


def _teachers_of(r: DocumentRecheck) -> Any:
    setting = r.data.get("setting")
    return setting.get("teachers") if isinstance(setting, Mapping) else None


def _solve_form(r: DocumentRecheck) -> dict:
    from darrm_opt.release.documents import darrm_solve_document

    base, teachers, sol = _darrm_inputs(r)
    return darrm_solve_document(r.params, sol, base, 0.0, r.table.profile, teachers)


def _plan_form(r: DocumentRecheck) -> dict:
    from darrm_opt.planning.job import Offer
    from darrm_opt.release.documents import plan_document

    base, teachers, sol = _darrm_inputs(r)
    job = _job(r, {"K": r.params.K, "queries": r.get("plan.queries"), "budget_epsilon": r.get("plan.budget_epsilon"),
                   "budget_delta": r.get("plan.budget_delta"), "teachers": teachers})
    spent = r.mechanism.offer_spend(r.table, job.queries, job.budget_delta).epsilon
    info = {"queries": job.queries, "budget_epsilon": job.budget_epsilon, "budget_delta": job.budget_delta,
            "spent_epsilon": spent, "seconds": 0.0, "candidates": []}
    return plan_document(Offer(r.mechanism.kind, r.table, r.table.expected_error, spent, plan=info, solution=sol),
                         base, teachers)


def _job(r: DocumentRecheck, fields: Mapping[str, Any]) -> Any:
    """The job a plan document states (validated as ``plan`` validates it); TableFileError naming the field."""
    from darrm_opt.planning.job import Job

    try:
        return Job(**fields)
    except InvalidParameter as exc:
        raise TableFileError(f"{r.source}: invalid plan job: {exc}") from None
    except TypeError as exc:
        raise TableFileError(f"{r.source}: invalid plan.job: {exc}") from None


def _pate_solve_form(r: DocumentRecheck) -> dict:
    from darrm_opt.optimize.pate_setting import PateSolution
    from darrm_opt.privacy.gnmax import calibrate_gnmax_one_bit
    from darrm_opt.release.documents import pate_solve_document

    p = r.params
    sol = PateSolution(p, tuple(r.table.gamma), r.certificate, solver="", expected_error=r.table.expected_error,
                       seconds=0.0)
    return pate_solve_document(p, sol, r.table.profile, calibrate_gnmax_one_bit(p.epsilon, p.delta, p.K))


def _multiclass_solve_form(r: DocumentRecheck) -> dict:
    from darrm_opt.model.multiclass import reachable_gaps
    from darrm_opt.optimize.multiclass import MulticlassSolution
    from darrm_opt.release.documents import multiclass_comparison, multiclass_solve_document

    p, err = r.params, r.table.expected_error
    sol = MulticlassSolution(p, tuple(r.table.gamma), tuple(bool(x) for x in reachable_gaps(p.K, p.C) > 0),
                             r.certificate, expected_accuracy=1.0 - err, expected_error=err, solver="", pair_types=0,
                             rows=0, seconds=0.0, lp_seconds=0.0)
    comparison = None if r.data.get("comparison") is None else multiclass_comparison(p, err)
    return multiclass_solve_document(p, sol, r.table.profile, comparison, 0.0)


def _gaussian_form(r: DocumentRecheck) -> dict:
    """Calibrated again as ``gaussian`` calibrates (for the N answers and total (ε, δ) the calibration states,
    and the release's K, radius and dimension): the release, its σs and its spent ε must be the ones found."""
    from darrm_opt.mechanisms.gaussian_mean import gaussian_mean_table
    from darrm_opt.privacy.gaussian_mean import calibrate
    from darrm_opt.release.documents import gaussian_document

    p = r.params
    try:
        cal = calibrate(r.get("calibration.queries"), r.get("calibration.epsilon"), r.get("calibration.delta"),
                        K=p.K, radius=p.radius, dim=p.dim)
    except (InvalidParameter, TypeError, ValueError) as exc:
        raise TableFileError(f"{r.source}: its calibration cannot be made again: {exc}") from None
    return gaussian_document(gaussian_mean_table(cal.params), cal)


def _job_plan_form(r: DocumentRecheck) -> dict:
    """The chosen offer for the job the file states: a data-independent one rebuilt from the table (its spend
    and details by the kind's ``offer_spend`` and ``offer_details``), a data-dependent one planned again by
    the kind's data-dependent planner (seeded: the same job gets the same plan)."""
    from darrm_opt.planning.job import Offer
    from darrm_opt.release.documents import job_plan_document

    stated = r.get("plan.job")
    job = _job(r, stated if isinstance(stated, Mapping) else {})
    m = r.mechanism
    if r.data.get("accounting") == "data-dependent":
        offer = m.plan_data_dependent(job)
        if offer is None:
            raise TableFileMismatch(f"{r.source}: accounting is \"data-dependent\", but a {m.kind} table has no "
                                    "data-dependent offer for this job", "accounting")
    else:
        spend = m.offer_spend(r.table, job.queries, job.budget_delta)
        details = {**m.offer_details(r.table, spend.method), **dict.fromkeys(m.search_details)}
        offer = Offer(m.kind, r.table, r.table.expected_error, spend.epsilon, details)
    return job_plan_document(offer, [offer], {}, job)


#: every registered kind (the plain table document and the job-plan document hold any kind)
_ALL = tuple(MECHANISMS)
_SOLVE_MARKS = ("baselines", "baseline_certificates", "baseline_unavailable", "setting", "mode", "iterations",
                "active_constraints", "objective_gap")

#: every form of table file darrm-opt writes
FORMS: tuple[Form, ...] = (
    Form("table", "a table document (darrm_opt.mechanisms.table_document)", _ALL, (), _table_form),
    Form("solve", "darrm-opt solve --format json", ("darrm",), _SOLVE_MARKS, _solve_form),
    Form("plan", "darrm-opt plan --format json", ("darrm",), (*_SOLVE_MARKS, "plan"), _plan_form),
    Form("pate-solve", "darrm-opt solve --teachers disjoint-nonprivate --format json", ("darrm-pate",),
         ("gnmax", "note"), _pate_solve_form),
    Form("multiclass-solve", "darrm-opt solve --classes --format json", ("darrm-multiclass",),
         ("comparison", "reachable_gaps", "expected_accuracy", "pair_types", "lp_rows"), _multiclass_solve_form),
    Form("gaussian", "darrm-opt gaussian --format json", ("gaussian-mean",), ("calibration", "sigma"),
         _gaussian_form),
    Form("job-plan", "darrm-opt plan --format json, a job over every kind", _ALL,
         ("plan", "mechanism", "accounting", "guarantee", "epsilon_spent", "run", "alternatives", "refused"),
         _job_plan_form),
)


def form_of(kind: str, data: Mapping[str, Any]) -> Form:
    """The form a document of ``kind`` is read as: of the forms that hold its kind, the one with the most of
    its ``marks`` among the document's fields (the plain table document when none has any)."""
    forms = [f for f in FORMS if kind in f.kinds]
    return max(forms, key=lambda f: (sum(k in data for k in f.marks), -len(f.marks)))


def check_document(recheck: DocumentRecheck) -> Form:
    """Refuse ``recheck.data`` unless it is, field for field, the document its writer writes for the recomputed
    table (module docstring): TableFileError (exit 2) for a missing or unknown field or an unknown schema
    version, TableFileMismatch (exit 1) for a value that differs. Returns the form it was read as."""
    from darrm_opt.mechanisms import SCHEMA_VERSION

    data = recheck.data
    form = form_of(recheck.mechanism.kind, data)
    refuse = Refusal(recheck.source, f"here: {form.command}")
    version = data.get("schema_version")
    if "schema_version" not in data:
        raise refuse.missing("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise TableFileError(f"{recheck.source}: schema_version {_shown(version)} is not one darrm-opt writes "
                             f"(it writes {SCHEMA_VERSION}); {refuse.why}")
    if data.get("privacy_profile") is None:  # every writer writes the table's certified profile
        raise refuse.missing("privacy_profile") if "privacy_profile" not in data else \
            refuse.mistyped("privacy_profile", "the table's certified privacy profile", None)
    try:
        expected = form.rebuild(recheck)
    except (TableFileError, TableFileMismatch):
        raise
    except DarrmError as exc:
        raise TableFileError(f"{recheck.source}: its {form.name} document cannot be rebuilt: {exc}") from None
    compare(expected, data, refuse)
    return form
