"""Answers a data-dependent ledger draws itself: GNMax, Confident-GNMax and Interactive-GNMax (PATE Alg. 2)
with exact discrete Gaussian noise, every coin from ``random_bytes`` (a CSPRNG) through the samplers of
:mod:`darrm_opt.sampling` and :mod:`darrm_opt.mechanisms.vote_samplers`.

Interactive-GNMax, per query with histogram n and the student's class probabilities p (public):

1. the check: i = :func:`~darrm_opt.privacy.interactive_gnmax.interactive_check_statistic` (the integer form of
   s = max_j (n_j − K p_j) against T), Z ~ N_ℤ(0, σ₁²): the student disagrees with the teachers iff
   i + Z ≥ ⌈T⌉ (⟺ s + Z ≥ T);
2. if so, the teachers answer by GNMax at σ₂ (N_ℤ(0, σ₂²) per class, ties broken uniformly);
3. else, if max_j p_j > γ (the policy's ``confidence``), the student's own label argmax_j p_j (the first
   on a tie), read off p alone; else ⊥ (written −1).

The order of draws: the check noise of every query, then GNMax's class noise over the queries that passed
(row-major), then its tie-breaking indices. The noise comes from pools drawn ahead
(:func:`~darrm_opt.sampling.pool.noise_pool`; issue 33). Confident-GNMax and GNMax are
:class:`~darrm_opt.mechanisms.vote_samplers.GnmaxSampler` on the histograms. Only the check's outcome
(``answered``) and the labels leave this module; the ledger charges them
(:func:`darrm_opt.ledger.dd_account.record` for discrete noise: GNMax's q̃ at
:func:`~darrm_opt.privacy.query_costs.discrete_q_sigma`, the checks for the discrete law)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.ledger.dd_account import DataDependentPolicy, histograms
from darrm_opt.privacy.interactive_gnmax import interactive_check_statistic, student_probabilities
from darrm_opt.privacy.query_costs import discrete_gnmax_shape
from darrm_opt.sampling import RandomBytes, noise_pool

from .vote_samplers import ABSTAIN, GnmaxSampler


def draw_answers(policy: DataDependentPolicy, votes: object, random_bytes: RandomBytes,
                 student: object | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(labels, −1 for ⊥; ``answered``: which the teachers answered, None for GNMax) for the histograms
    ``votes`` under ``policy`` (module docstring). ``student`` (Interactive-GNMax only, required there): one
    probability vector per query."""
    h = histograms(policy, votes)
    if policy.aggregator == "table":
        raise InvalidParameter("aggregator", "a table ledger records the answers of its table's own sampler; "
                               "the ledger draws GNMax-family answers only", policy.aggregator)
    if not discrete_gnmax_shape(policy.sigma, policy.order, policy.classes, True).conditions:  # type: ignore[arg-type]
        raise InvalidParameter("sigma", "PATE App. B's conditions C5/C6 fail for discrete noise at this σ and "
                               "order: the ledger cannot draw these answers (record them, or choose a larger σ)",
                               policy.sigma)
    if policy.aggregator != "interactive-gnmax":
        if student is not None:
            raise InvalidParameter("student", "only interactive-gnmax takes the student's probabilities", None)
        sampler = GnmaxSampler(policy.K, policy.classes, policy.sigma, random_bytes,  # type: ignore[arg-type]
                               threshold=policy.threshold, sigma1=policy.sigma1)
        labels = sampler.answers_from_histograms(h).astype(np.int64)
        return labels, (None if policy.aggregator == "gnmax" else labels != ABSTAIN)
    if student is None:
        raise InvalidParameter("student", "interactive-gnmax needs the student's class probabilities per query",
                               None)
    if policy.confidence is None:
        raise InvalidParameter("confidence", "the ledger's interactive-gnmax policy has no confidence γ: it can "
                               "record answers but not draw them", None)
    p = student_probabilities(student, h.shape[0], policy.classes)
    i = interactive_check_statistic(h, p, policy.threshold, policy.K)  # type: ignore[arg-type]
    z = noise_pool(policy.sigma1, random_bytes).sample(h.shape[0], random_bytes)  # type: ignore[arg-type]
    answered = i + z >= math.ceil(policy.threshold)  # type: ignore[arg-type]
    labels = np.full(h.shape[0], ABSTAIN, dtype=np.int64)
    teachers = GnmaxSampler(policy.K, policy.classes, policy.sigma, random_bytes)  # type: ignore[arg-type]
    labels[answered] = teachers.answers_from_histograms(h[answered])
    reinforce = ~answered & (p.max(axis=1) > policy.confidence)
    labels[reinforce] = np.argmax(p[reinforce], axis=1)
    return labels, answered


def drawer(random_bytes: RandomBytes) -> Any:
    """``draw(policy, votes, student)`` for :meth:`darrm_opt.ledger.dd_store.DataDependentStore.answer`."""
    return lambda policy, votes, student: draw_answers(policy, votes, random_bytes, student)
