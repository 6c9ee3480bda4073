"""darrm-opt: certified optimal DaRRM noise functions for private majority ensembling.

The Python API (each name is imported on first use, so ``import darrm_opt`` stays light)::

    from darrm_opt import Job, Ledger, Params, certify_table, load_certified, plan_job, release_answers, solve

    sol = solve(Params(K=11, m=3))              # certified optimal γ (sol.gamma, sol.certificate)
    table = certify_table(sol.params, sol.gamma)  # a CertifiedTable: certificate and privacy profile
    table = load_certified("table.json")        # or a table file (``darrm-opt solve --format json``)
    best, offers, refused = plan_job(Job(K=11, epsilon=0.0892, teacher_delta=1e-4, teachers="shared",
                                         queries=100, budget_epsilon=15.044, budget_delta=0.03))
    with Ledger("ledger.db", "labels", epsilon_budget=10, delta_budget=1e-3) as ledger:
        answers = release_answers(table, votes, ledger)  # pays durably first, then draws
    answers = Aggregator(table)(votes)          # no ledger: the caller accounts for the answers
    job = label("votes.npy", budget=(2, 1e-5))  # the whole job: plan, pay, release (job.labels, job.text)

Every kind of release (``MECHANISMS``: DaRRM tables of each setting, shaped tables, GNMax, Confident-GNMax,
Gaussian mean release) goes through one interface: ``mechanism(kind).solve(params, solver="highs")``. Every
job, of every teachers' setting, is planned over every kind by ``plan_job(Job(...))`` (one entry point, one
result: the chosen ``Offer``, every offer, and why the other kinds made none); the PATE-setting and
multi-class solvers are ``solve_pate`` and ``solve_multiclass``; vectors are released by ``release_means``.

Only certified tables are released. ``Ledger`` (:mod:`darrm_opt.ledger`) needs the ``service`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors only
    from darrm_opt.certify.certificate import Certificate, certify
    from darrm_opt.errors import BudgetExceeded, CertificationFailed, DarrmError, InvalidParameter
    from darrm_opt.extras import MissingExtra
    from darrm_opt.ledger.local import Ledger
    from darrm_opt.mechanisms import MECHANISMS, certify_table, mechanism, plan_job
    from darrm_opt.model.gaussian_params import GaussianMeanParams
    from darrm_opt.model.gnmax import ConfidentGnmaxParams, GnmaxParams
    from darrm_opt.model.multiclass import MulticlassParams
    from darrm_opt.model.neighbours import PateParams
    from darrm_opt.model.params import Params
    from darrm_opt.optimize.multiclass import solve_multiclass
    from darrm_opt.optimize.optimizer import Solution, solve
    from darrm_opt.optimize.pate_setting import solve_pate
    from darrm_opt.planning.job import Job, Offer
    from darrm_opt.privacy.profile import PrivacyProfile, privacy_profile
    from darrm_opt.privacy.table import CertifiedTable
    from darrm_opt.release.dd_ledger import DataDependentLedger
    from darrm_opt.release.label import LabelResult, label
    from darrm_opt.release.means import release_means
    from darrm_opt.release.release import Aggregator, release_answers
    from darrm_opt.release.table_file import load_certified, load_table
    from darrm_opt.release.verify import verify

#: public name → module that defines it (imported lazily by ``__getattr__``)
_EXPORTS = {
    "solve": "darrm_opt.optimize.optimizer",
    "Solution": "darrm_opt.optimize.optimizer",
    "privacy_profile": "darrm_opt.privacy.profile",
    "PrivacyProfile": "darrm_opt.privacy.profile",
    "verify": "darrm_opt.release.verify",
    "certify": "darrm_opt.certify.certificate",
    "Certificate": "darrm_opt.certify.certificate",
    "load_table": "darrm_opt.release.table_file",
    "load_certified": "darrm_opt.release.table_file",
    "Params": "darrm_opt.model.params",
    "PateParams": "darrm_opt.model.neighbours",
    "MulticlassParams": "darrm_opt.model.multiclass",
    "CertifiedTable": "darrm_opt.privacy.table",
    "certify_table": "darrm_opt.mechanisms",
    "mechanism": "darrm_opt.mechanisms",
    "MECHANISMS": "darrm_opt.mechanisms",
    "plan_job": "darrm_opt.mechanisms",
    "Job": "darrm_opt.planning.job",
    "Offer": "darrm_opt.planning.job",
    "solve_pate": "darrm_opt.optimize.pate_setting",
    "solve_multiclass": "darrm_opt.optimize.multiclass",
    "GnmaxParams": "darrm_opt.model.gnmax",
    "ConfidentGnmaxParams": "darrm_opt.model.gnmax",
    "GaussianMeanParams": "darrm_opt.model.gaussian_params",
    "release_means": "darrm_opt.release.means",
    "DataDependentLedger": "darrm_opt.release.dd_ledger",
    "label": "darrm_opt.release.label",
    "LabelResult": "darrm_opt.release.label",
    "Aggregator": "darrm_opt.release.release",
    "release_answers": "darrm_opt.release.release",
    "Ledger": "darrm_opt.ledger.local",
    "DarrmError": "darrm_opt.errors",
    "CertificationFailed": "darrm_opt.errors",
    "InvalidParameter": "darrm_opt.errors",
    "BudgetExceeded": "darrm_opt.errors",
    "MissingExtra": "darrm_opt.extras",
}

__all__ = [
    "MECHANISMS", "Aggregator", "BudgetExceeded", "Certificate", "CertificationFailed", "CertifiedTable",
    "ConfidentGnmaxParams", "DarrmError", "DataDependentLedger", "GaussianMeanParams", "GnmaxParams",
    "InvalidParameter", "Job", "LabelResult", "Ledger", "MissingExtra", "MulticlassParams", "Offer", "Params",
    "PateParams", "PrivacyProfile", "Solution", "__version__", "certify", "certify_table", "label",
    "load_certified", "load_table", "mechanism", "plan_job", "privacy_profile", "release_answers",
    "release_means", "solve", "solve_multiclass", "solve_pate", "verify",
]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("darrm-opt")
    except PackageNotFoundError:  # a source checkout that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _version()
    elif name in _EXPORTS:
        if name == "Ledger":  # the service's ledger code: say which extra is missing, not which module
            from darrm_opt.extras import require

            require("service", "darrm_opt.Ledger")
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'darrm_opt' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS, "__version__"])
