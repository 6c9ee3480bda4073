"""A labelling job in one call: plan, open (or resume) a ledger, pay, release, and state the privacy.

:func:`label` takes the teachers' votes for N queries (:mod:`darrm_opt.release.votes`: (N, K) labels or
(N, C) counts) and a total budget (ε, δ), and

1. opens the ledger called ``ledger`` (created with that budget; an existing one must have it);
2. reads the job's records from it: the queries already answered, their table and answers. With none,
   plans the job (:func:`darrm_opt.mechanisms.plan_job`, worst-case accounting: the most accurate certified
   table whose Q = N answers fit the budget over every dataset); with some, continues with their table;
3. draws the answers of the queries not answered yet and pays for them in one durable debit whose
   idempotency key names the records it answers (``label:START-STOP``, record i being the votes' row i),
   storing the drawn answers with it; nothing is released unless the debit is paid;
4. returns every query's label (the stored ones for the records answered before: nothing is paid twice)
   with the statement the ledger makes for all its answers.

A rerun with the same ledger and the same votes pays nothing and returns the same labels; with more rows
(votes of a job only grow) it answers the new rows only. Rows already answered must be the votes they were
answered for (the digest of their vote counts is stored with the record, so labels and counts of the same
votes are one job): anything else is refused.

Stored answers are shifted by one (⊥ = −1 of Confident-GNMax is stored as 0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import mechanism, plan_job, table_from_row
from darrm_opt.planning.job import GUARANTEES, Job
from darrm_opt.privacy.table import CertifiedTable
from darrm_opt.release.votes import Votes, read_votes
from darrm_opt.sampling import RandomBytes, system_random

#: idempotency keys of a labelling job's debits: KEY_PREFIX + "START-STOP" (records START to STOP − 1)
KEY_PREFIX = "label:"
DEFAULT_LEDGER = "label"

Progress = Callable[..., None]


@dataclass(frozen=True)
class LabelResult:
    """Every query's label (−1: ⊥, Confident-GNMax's abstention) and the publishable ``statement``."""

    labels: np.ndarray
    statement: dict[str, Any]

    @property
    def text(self) -> str:
        """The statement in one paragraph, as a user publishes it."""
        s = self.statement
        led = s["ledger"]
        return (f"These {s['labels']} labels are (ε = {s['epsilon']:.6g}, δ = {s['delta']:g})-differentially "
                f"private in the worst case over every dataset ({s['accounting']} accounting, {s['composition']} "
                f"composition; ledger {led['name']!r}: {led['answers']} answer(s) within its budget (ε = "
                f"{led['epsilon_budget']:g}, δ = {led['delta_budget']:g})). Mechanism {s['mechanism']}, "
                f"certified table {s['table_id']}, K = {s['K']} teachers ({s['teachers']}), "
                f"{s['classes']} classes; {s['answered_now']} answered in this run, {s['answered_before']} "
                "answered before and returned as stored.")


def _composed(job: Job, kinds: Any, progress: Callable[..., None]) -> Any:
    """The offer a ledger pays for when the plan is the plain majority, free for disjoint-private teachers
    within the budget (no table): the shared-setting plan, whose composed spend holds for them too, its
    table of their setting."""
    chosen, _, _ = plan_job(dataclasses.replace(job, teachers="shared"), progress, kinds)
    t = chosen.table
    table = mechanism(t.kind).table(t.params, t.gamma, chosen.solution.certificate, job.teachers, t.profile)
    return dataclasses.replace(chosen, table=table)


def _budget(budget: Sequence[float]) -> tuple[float, float]:
    try:
        eps, delta = (float(x) for x in budget)
    except (TypeError, ValueError):
        raise InvalidParameter("budget", "must be two numbers (EPS, DELTA)", budget) from None
    return eps, delta


def _key_range(key: str) -> tuple[int, int]:
    start, stop = key.removeprefix(KEY_PREFIX).split("-")
    return int(start), int(stop)


def _decode(text: str) -> np.ndarray:
    from darrm_opt.ledger.core import decode_answers

    return decode_answers(text).astype(np.int16) - 1


def label(votes: Any, budget: Sequence[float], *, classes: int | None = None, form: str = "auto",
          teachers: str = "disjoint-nonprivate", epsilon: float | None = None, teacher_delta: float | None = None,
          prior: str = "paper", queries: int | None = None, ledger: str = DEFAULT_LEDGER,
          ledger_db: str | None = None, solver: str = "highs", kinds: Sequence[str] | None = None,
          progress: Progress | str | None = None, random_bytes: RandomBytes = system_random) -> LabelResult:
    """Label every query of ``votes`` within ``budget`` = (ε, δ), paid from the ledger ``ledger`` on
    ``ledger_db`` (a URL or path; default ``$DARRM_DATABASE_URL``, else ``sqlite:///darrm.db``); see the
    module docstring. ``votes``: a path (.npy, .npz, CSV/TSV), ``-`` (standard input) or an array.
    ``queries``: the Q the plan covers (default N). ``progress``: a callback ``progress(stage, **info)``
    (``votes``, ``plan`` with ``step`` start, kind, offer, chosen, ``resume``, ``pay``, ``done``) or ``"tqdm"``
    for tqdm bars (:mod:`darrm_opt.progress`). Raises InvalidParameter (bad input), BudgetExceeded
    (nothing released) and the ledger's errors."""
    from darrm_opt.extras import require
    from darrm_opt.progress import reporter

    require("service", "darrm_opt.label (a ledger)")

    report, done = reporter(progress)
    try:
        return _label(votes, budget, classes, form, teachers, epsilon, teacher_delta, prior, queries, ledger,
                      ledger_db, solver, kinds, report, random_bytes)
    finally:
        done()


def _label(votes: Any, budget: Sequence[float], classes: int | None, form: str, teachers: str,
           epsilon: float | None, teacher_delta: float | None, prior: str, queries: int | None, ledger: str,
           ledger_db: str | None, solver: str, kinds: Sequence[str] | None, progress: Progress | None,
           random_bytes: RandomBytes) -> LabelResult:
    import os

    from darrm_opt.ledger.core import request_digest
    from darrm_opt.ledger.local import Ledger

    def tell(stage: str, **info: Any) -> None:
        if progress is not None:
            progress(stage, **info)

    eps, delta = _budget(budget)
    v = read_votes(votes, classes=classes, form=form)
    tell("votes", N=v.N, K=v.K, classes=v.classes, form=v.form)
    job = make_job(v.K, v.classes, (eps, delta), queries if queries is not None else max(v.N, 1),
                   teachers=teachers, epsilon=epsilon, teacher_delta=teacher_delta, prior=prior, solver=solver)
    url = ledger_db or os.environ.get("DARRM_DATABASE_URL")
    with Ledger(url, ledger, epsilon_budget=eps, delta_budget=delta) as book:
        done, stored, table = _resume(book, v)
        if table is None and done < v.N:
            table = plan_table(job, kinds, tell)
        elif table is not None:
            tell("resume", answered=done, table_id=table.id)
        fresh = np.zeros(0, dtype=np.int16)
        if done < v.N:
            assert table is not None
            check_fits(table, v)
            tell("pay", rows=v.N - done, first=done)
            drawn = draw(table, v.labels[done:], random_bytes)
            result = book.pay(table, len(drawn), idempotency_key=f"{KEY_PREFIX}{done}-{v.N}",
                              answers=(drawn + 1).astype(np.uint16),
                              request_digest=request_digest(table.id, book.id, v.counts[done:]),
                              units=mechanism(table.kind).units(table.params, len(drawn)))
            fresh = released(result, drawn)
        view = book.view()
    labels = np.concatenate([stored, fresh]) if stored.size or fresh.size else np.zeros(0, dtype=np.int16)
    assert table is not None or v.N == 0
    outcome = LabelResult(labels, statement(view, table, K=v.K, classes=v.classes, teachers=teachers,
                                            labels=int(labels.size), now=int(fresh.size), before=int(stored.size)))
    tell("done", labels=int(labels.size))
    return outcome


def make_job(K: int, classes: int, budget: tuple[float, float], queries: int, *, teachers: str = "disjoint-nonprivate",
             epsilon: float | None = None, teacher_delta: float | None = None, prior: str = "paper",
             solver: str = "highs") -> Job:
    """The job a labelling run plans: Q = ``queries`` answers of K teachers' votes over ``classes`` classes."""
    return Job(K=K, queries=queries, budget_epsilon=budget[0], budget_delta=budget[1], teachers=teachers,
               classes=None if classes == 2 else classes, prior=prior, epsilon=epsilon,
               teacher_delta=teacher_delta, solver=solver)


def plan_table(job: Job, kinds: Sequence[str] | None, tell: Progress) -> CertifiedTable:
    """The most accurate certified table whose ``job.queries`` answers fit the budget in the worst case
    (every mechanism, or ``kinds``), reporting ``plan`` steps (start, each offer, chosen) to ``tell``."""
    tell("plan", step="start", queries=job.queries)

    def progress(step: str, **info: Any) -> None:
        tell("plan", step=step, **info)

    listed = None if kinds is None else list(kinds)
    chosen, _, _ = plan_job(job, progress, listed)
    if chosen.majority_free:  # no table to pay for
        chosen = _composed(job, listed, progress)
    tell("plan", step="chosen", kind=chosen.label, expected_error=chosen.expected_error,
         epsilon_spent=chosen.epsilon_spent, table_id=chosen.table.id)
    return chosen.table


def draw(table: CertifiedTable, labels: np.ndarray, random_bytes: RandomBytes = system_random) -> np.ndarray:
    """The table's answers (int16; −1: ⊥) for rows of K class labels, drawn but not yet released: they are
    stored with the debit that pays them (shifted by one) and released only once it is paid."""
    sampler: Any = mechanism(table.kind).sampler(table, random_bytes)
    return np.asarray(sampler.draw(sampler.prepare(labels))).astype(np.int16)


def released(result: Any, drawn: np.ndarray) -> np.ndarray:
    """The answers a paid debit releases: the ``drawn`` ones, or those stored with it when it was replayed (a
    run or request beside this one paid these records first)."""
    return drawn if result.status == "paid" else np.asarray(result.answers).astype(np.int16) - 1


def statement(view: dict[str, Any], table: CertifiedTable | None, *, K: int, classes: int, teachers: str,
              labels: int, now: int, before: int) -> dict[str, Any]:
    """The publishable statement of a labelling job from its ledger's ``view``: (ε, δ) of all the ledger's
    answers, the accounting, the mechanism and table, the answered counts (the CLI, Python and REST's)."""
    return {
        "labels": labels, "epsilon": view["epsilon_spent"], "delta": view["delta_target"],
        "accounting": "worst-case", "composition": view["composition"],
        "guarantee": GUARANTEES["data-independent"],
        "mechanism": table.kind if table is not None else None, "table_id": table.id if table is not None else None,
        "K": K, "classes": classes, "teachers": table.teachers if table is not None else teachers,
        "answered_now": now, "answered_before": before,
        "ledger": {k: view[k] for k in ("id", "name", "epsilon_budget", "delta_budget", "answers")},
    }


def _resume(book: Any, v: Votes) -> tuple[int, np.ndarray, CertifiedTable | None]:
    """The records the ledger answered for this job (a prefix 0..done − 1 of the votes' rows), their stored
    labels and their table; InvalidParameter naming ``votes`` when these votes are not the ones answered."""
    from darrm_opt.ledger.core import request_digest

    done, parts, table = 0, [], None
    for rec in book.records(KEY_PREFIX):
        start, stop = _key_range(rec.idempotency_key)
        if start != done:
            raise InvalidParameter("ledger", f"ledger {book.name!r} holds label records {start}-{stop} after "
                                   f"{done}: not one job's records")
        if table is None:
            table = table_from_row(book.table_row(rec.table_id))
        elif rec.table_id != table.id:
            raise InvalidParameter("ledger", f"ledger {book.name!r} answered this job's records with two tables "
                                   f"({table.id}, {rec.table_id})")
        if stop > v.N:
            raise InvalidParameter("votes", f"ledger {book.name!r} answered records 0 to {stop - 1}; these votes "
                                   f"hold {v.N} rows (the votes of a job only grow; another job needs another "
                                   "ledger)")
        if rec.request_digest != request_digest(table.id, book.id, v.counts[start:stop]):
            raise InvalidParameter("votes", f"rows {start} to {stop - 1} differ from the votes ledger "
                                   f"{book.name!r} answered for them (another job needs another ledger)")
        parts.append(_decode(rec.answers))
        done = stop
    stored = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
    return done, stored, table


def check_fits(table: CertifiedTable, v: Votes) -> None:
    """InvalidParameter naming ``votes`` unless they have the table's K and C."""
    if table.K != v.K or (table.classes or 2) != v.classes:
        raise InvalidParameter("votes", f"hold K = {v.K} teachers and C = {v.classes} classes; this job's table "
                               f"{table.id} answers K = {table.K}, C = {table.classes or 2}")
