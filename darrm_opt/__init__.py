"""darrm-opt: certified optimal DaRRM noise functions for private majority ensembling.

The Python API (each name is imported on first use, so ``import darrm_opt`` stays light)::

    from darrm_opt import Aggregator, Ledger, Params, load_table, solve, verify

    sol = solve(Params(K=11, m=3))              # certified optimal γ (sol.gamma, sol.certificate)
    params, gamma = load_table("table.json")    # a table file (``darrm-opt solve --format json``)
    cert = verify(params, gamma)                # recompute its certificate (cert.certified)
    profile = privacy_profile(params, gamma)    # its certified privacy profile (profile.delta(eps))
    job = plan(K=11, epsilon=0.0892, teacher_delta=1e-4, queries=100, budget_epsilon=15.044, budget_delta=0.03)
    answers = Aggregator(gamma)(votes)          # DaRRM Algorithm 1 on a (rows, K) 0/1 array
    with Ledger("ledger.db", "labels", epsilon_budget=10, delta_budget=1e-3) as ledger:
        ledger.pay(params, gamma, cert, answers)  # durable debit; raises BudgetExceeded, writing nothing

``Ledger`` is the service's own ledger code (``api.ledger``) and needs the ``service`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors only
    from api.local_ledger import Ledger
    from darrm_opt.certify.certificate import Certificate, certify
    from darrm_opt.errors import BudgetExceeded, DarrmError, InvalidParameter
    from darrm_opt.extras import MissingExtra
    from darrm_opt.model.params import Params
    from darrm_opt.optimize.optimizer import Solution, solve
    from darrm_opt.optimize.plan import Plan, plan
    from darrm_opt.privacy.profile import PrivacyProfile, privacy_profile
    from darrm_opt.release.aggregator import Aggregator
    from darrm_opt.release.table_file import load_table
    from darrm_opt.release.verify import verify

#: public name → module that defines it (imported lazily by ``__getattr__``)
_EXPORTS = {
    "solve": "darrm_opt.optimize.optimizer",
    "Solution": "darrm_opt.optimize.optimizer",
    "plan": "darrm_opt.optimize.plan",
    "Plan": "darrm_opt.optimize.plan",
    "privacy_profile": "darrm_opt.privacy.profile",
    "PrivacyProfile": "darrm_opt.privacy.profile",
    "verify": "darrm_opt.release.verify",
    "certify": "darrm_opt.certify.certificate",
    "Certificate": "darrm_opt.certify.certificate",
    "load_table": "darrm_opt.release.table_file",
    "Params": "darrm_opt.model.params",
    "Aggregator": "darrm_opt.release.aggregator",
    "Ledger": "api.local_ledger",
    "DarrmError": "darrm_opt.errors",
    "InvalidParameter": "darrm_opt.errors",
    "BudgetExceeded": "darrm_opt.errors",
    "MissingExtra": "darrm_opt.extras",
}

__all__ = [
    "Aggregator", "BudgetExceeded", "Certificate", "DarrmError", "InvalidParameter", "Ledger", "MissingExtra", "Params",
    "Plan", "PrivacyProfile", "Solution", "__version__", "certify", "load_table", "plan", "privacy_profile", "solve",
    "verify",
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
