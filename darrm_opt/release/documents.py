"""The table files darrm-opt writes: one writer per form, shared by the commands that write them and by
``verify``, which rebuilds a file's form from its recomputed table with the same writer and compares
(:mod:`darrm_opt.release.document_check`).

Forms (the command that writes each, and its kinds):

- ``table``: :func:`darrm_opt.mechanisms.table_document` (the library's and any kind's plain table file);
- ``solve``: ``solve --format json`` of a DaRRM table (shared or disjoint-private teachers) with its
  baselines, :func:`darrm_solve_document`; ``plan``: ``plan --format json`` of such a job,
  :func:`plan_document` (the ``solve`` form plus ``plan``);
- ``pate-solve``: ``solve --teachers disjoint-nonprivate``, :func:`pate_solve_document`;
- ``multiclass-solve``: ``solve --classes``, :func:`multiclass_solve_document`;
- ``gaussian``: ``gaussian --format json``, :func:`gaussian_document`;
- ``job-plan``: ``plan --format json`` of a job planned over every kind (``--classes``, ``--mechanism``,
  ``--teachers disjoint-nonprivate``), :func:`job_plan_document`.
"""

from __future__ import annotations

from typing import Any

#: the baselines of a DaRRM ``solve`` document, in display order, with their labels
BASELINES = (("sub", "γ_Sub"), ("dsub", "γ_DSub"), ("const", "γ_const"), ("const_opt", "γ_const_opt"))


def solve_errors(params: Any, sol: Any, base: dict) -> dict:
    """The expected errors of γ_opt (``sol``) and of each available baseline (None for the others)."""
    from darrm_opt.model.objective import expected_error

    errors = {"opt": sol.expected_error}
    for k, _ in BASELINES:
        errors[k] = expected_error(base[k].gamma, params.prior) if base.get(k) else None
    return errors


def solve_document(params: Any, sol: Any, base: dict, seconds: float) -> dict:
    """γ_opt of a DaRRM solve (``sol``: :class:`darrm_opt.optimize.optimizer.Solution`) with its certificate,
    the certified baselines ``base`` (:func:`darrm_opt.release.table_file.baseline_tables`; {} for none) and
    how the solve went."""
    from darrm_opt.mechanisms import document_header

    return {
        **document_header(params),
        **params.canonical(),
        "solver": sol.solver,
        "mode": sol.mode,
        "gamma": list(sol.gamma),
        "certificate": sol.certificate.to_dict(),
        "baselines": {k: (list(base[k].gamma) if base.get(k) else None) for k, _ in BASELINES},
        "baseline_certificates": {k: (base[k].certificate.to_dict() if base.get(k) else None) for k, _ in BASELINES},
        "expected_error": solve_errors(params, sol, base),
        "iterations": sol.iterations,
        "active_constraints": sol.active_constraints,
        "objective_gap": sol.objective_gap,
        "seconds": seconds,
    }


def setting_document(params: Any, base: dict, teachers: str) -> dict:
    """What the teachers' setting implies (``setting``) and why a baseline is unavailable."""
    from darrm_opt.model.neighbours import setting_note

    return {"setting": setting_note(teachers, params.epsilon, params.teacher_delta).to_dict(),
            "baseline_unavailable": {k: base[k].reason for k, _ in BASELINES if k in base and not base[k]}}


def darrm_solve_document(params: Any, sol: Any, base: dict, seconds: float, profile: Any, teachers: str) -> dict:
    """The ``solve --format json`` document of a DaRRM table: :func:`solve_document`, its privacy profile and
    its setting."""
    return {**solve_document(params, sol, base, seconds), "privacy_profile": profile.to_dict(),
            **setting_document(params, base, teachers)}


def plan_document(offer: Any, base: dict, teachers: str) -> dict:
    """The ``plan --format json`` document of a DaRRM job (``offer``: the ``darrm`` kind's
    :class:`darrm_opt.planning.job.Offer`, with its solver's record ``solution`` and its search's ``plan``):
    the ``solve`` document of the chosen (m, δ) (``base``: its baselines, {} for none) plus ``plan``."""
    table = offer.table
    return {**darrm_solve_document(table.params, offer.solution, base, offer.seconds, table.profile, teachers),
            "plan": dict(offer.plan)}


def majority_free_document(offer: Any, job: Any) -> dict:
    """The ``plan`` document of disjoint-private teachers whose own (ε, Δ) is within the budget (``offer``:
    the ``darrm`` kind's offer without a table): the plain majority γ ≡ 1, its expected error, the setting's
    note and ``plan`` (the cap it spends, by parallel composition)."""
    from darrm_opt.model.neighbours import SETTING_NOTES
    from darrm_opt.model.params import Prior

    return {"K": job.K, "teachers": "disjoint-private", "prior": Prior.parse(job.prior).spec,
            "gamma": [1.0] * (job.K + 1), "expected_error": offer.expected_error,
            "note": SETTING_NOTES["disjoint-private"], "plan": dict(offer.plan)}


def gnmax_dict(params: Any, cal: Any) -> dict:
    """GNMax beside a PATE-setting table: γ of the one bit it releases at its exact calibration ``cal``
    (:func:`darrm_opt.privacy.gnmax.calibrate_gnmax_one_bit` at the table's (ε, δ)) and its expected error."""
    from darrm_opt.model.objective import expected_error
    from darrm_opt.privacy.gnmax import gnmax_gamma

    g = gnmax_gamma(params.K, cal.sigma)
    return {"sigma": cal.sigma, "calibration": cal.method, "gamma": list(map(float, g)),
            "expected_error": expected_error(g, params.prior)}


def pate_solve_document(params: Any, sol: Any, profile: Any, cal: Any) -> dict:
    """The ``solve --teachers disjoint-nonprivate --format json`` document: the solution (``sol``:
    :class:`darrm_opt.optimize.pate_setting.PateSolution`), its privacy profile and GNMax beside it."""
    from darrm_opt.mechanisms import document_header

    return {**document_header(params), **sol.to_dict(), "privacy_profile": profile.to_dict(),
            "gnmax": gnmax_dict(params, cal)}


def multiclass_comparison(params: Any, darrm_error: float) -> dict:
    """Expected errors (1 − accuracy) of multi-class DaRRM and of GNMax calibrated to the same per-answer
    (ε, δ) (:mod:`darrm_opt.privacy.gnmax_continuous`)."""
    from darrm_opt.privacy.gnmax_continuous import calibrate_gaussian_sigma, gnmax_error, rdp_sigma

    sigma = calibrate_gaussian_sigma(params.epsilon, params.delta)
    return {
        "darrm_error": darrm_error,
        "gnmax_error": gnmax_error(params.K, params.C, sigma, params.prior) if sigma is not None else None,
        "gnmax_sigma": sigma,
        "gnmax_sigma_rdp": rdp_sigma(params.epsilon, params.delta),
        "gnmax_calibration": "exact Gaussian-mechanism curve (Balle & Wang 2018), sensitivity sqrt(2)"
        if sigma is not None else "none: no Gaussian mechanism is pure DP (delta = 0)",
    }


def multiclass_solve_document(params: Any, sol: Any, profile: Any, comparison: dict | None, seconds: float) -> dict:
    """The ``solve --classes --format json`` document: the solution (``sol``:
    :class:`darrm_opt.optimize.multiclass.MulticlassSolution`), its privacy profile and the comparison with
    GNMax (None with ``--no-baselines``)."""
    from darrm_opt.mechanisms import document_header

    return {**document_header(params), **sol.to_dict(), "privacy_profile": profile.to_dict(),
            "comparison": comparison, "seconds": seconds}


def gaussian_document(table: Any, cal: Any) -> dict:
    """The ``gaussian --format json`` document: the certified Gaussian mean release and its calibration
    (:class:`darrm_opt.privacy.gaussian_mean.Calibration`)."""
    from darrm_opt.mechanisms import document_header

    return {**document_header(table.params), **table.params.canonical(), "teachers": table.teachers,
            "id": table.id, "sigma": table.params.sigma, "certificate": table.certificate_dict(),
            "privacy_profile": table.profile.to_dict() if table.profile else None,
            "calibration": cal.to_dict()}


def job_plan_document(best: Any, offers: list, refused: dict, job: Any) -> dict:
    """The ``plan --format json`` document of a job planned over the kinds (``best``: the chosen
    :class:`darrm_opt.planning.job.Offer` of ``offers``; ``refused``: why each other kind made none): the
    chosen table's document, the offer's summary, its worst case (``data_independent_epsilon``) and details,
    the job and the other offers."""
    from darrm_opt.mechanisms import table_document

    return {**table_document(best.table), **best.summary(), "data_independent_epsilon": best.worst_case_epsilon,
            **best.details,
            "plan": {"job": job.canonical(), "teachers": job.teachers, "queries": job.queries,
                     "budget_epsilon": job.budget_epsilon, "budget_delta": job.budget_delta,
                     "spent_epsilon": best.epsilon_spent, "seconds": best.seconds},
            "alternatives": [o.to_dict() for o in offers if o is not best], "refused": refused}
