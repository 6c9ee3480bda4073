"""A ledger's exact composition at bucketed counts: the buckets (brute force and properties), the bound they
give (never below the composition of the actual counts), and the debit decisions that use them — the
bucketed composition while it fits the budget, the actual counts on the fine grid when it does not, and a
composition computed in advance for more answers when the bucket's is not cached."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from darrm_opt.ledger.core import Debit, LedgerRow, LedgerState, NeedsExact, decide
from darrm_opt.privacy import accounting, pld
from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.profile import PrivacyProfile

DELTA = 1e-5
E0 = 2.0  # each answer's generic (ε₀, 0) bound: loose, so the exact composition is the tightest


@given(st.integers(0, 10**7))
def test_a_bucket_is_the_count_rounded_up_to_three_significant_bits(n):
    b = pld.bucket(n)
    assert b >= n and pld.bucket(b) == b and pld.bucket(n + 1) >= b
    assert (b >> max(0, b.bit_length() - 3)) << max(0, b.bit_length() - 3) == b  # at most 3 significant bits
    assert b == n if n <= 8 else b < 1.25 * n


def test_four_buckets_per_doubling_by_brute_force():
    assert [pld.bucket(n) for n in range(1, 21)] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 10, 12, 12, 14, 14, 16, 16,
                                                     20, 20, 20, 20]
    for k in range(3, 14):
        assert len({pld.bucket(n) for n in range(2**k + 1, 2 ** (k + 1) + 1)}) == 4


def test_covers_and_the_next_bucket():
    p, q = GaussianProfile(3.0, (1, 1)), GaussianProfile(4.0, (1, 1))
    parts = pld.canonical_parts([(p, 30), (q, 5)])
    assert pld.bucketed(parts) == pld.canonical_parts([(p, 32), (q, 5)])
    assert pld.covers(pld.canonical_parts([(p, 32), (q, 5)]), parts)
    assert not pld.covers(pld.canonical_parts([(p, 32)]), parts)  # q's answers are not in it
    assert not pld.covers(pld.canonical_parts([(p, 29), (q, 9)]), parts)
    # the next composition has room for the growing table's bucket, or for `by` more answers
    assert pld.next_bucket(parts, [p]) == pld.canonical_parts([(p, 40), (q, 5)])
    assert pld.next_bucket(parts, [p], by=50) == pld.canonical_parts([(p, 80), (q, 5)])
    assert pld.next_bucket(parts, [q], by=2) == pld.canonical_parts([(p, 32), (q, 7)])
    big = pld.canonical_parts([(p, pld.EXACT_MAX_ANSWERS - 1)])  # its bucket would be over the cap: not rounded
    assert pld.bucketed(big) == big


@pytest.mark.parametrize("n", [9, 30])
def test_the_bucketed_composition_bounds_the_actual_counts(n):
    p = GaussianProfile(2.5, (1, 1))
    wide = pld.exact_epsilon([(p, pld.bucket(n))], DELTA, coarse=True)
    assert pld.bucket(n) > n
    assert wide > pld.exact_epsilon([(p, n)], DELTA, coarse=True) and wide > pld.exact_epsilon([(p, n)], DELTA)


def _state(profile: GaussianProfile | PrivacyProfile, answers: int, budget: float, spent: float) -> LedgerState:
    return LedgerState(row=LedgerRow("L", budget, DELTA), usage={"T": [E0, 0.0, answers]}, answers=answers,
                       spend=accounting.Spend(spent, DELTA, accounting.EXACT))


def _debit(profile: GaussianProfile) -> Debit:
    return Debit("L", "T", E0, 0.0, 1, "shared", profile=profile)


def _decide(state: LedgerState, profile: GaussianProfile):
    results, records = decide([_debit(profile)], {"L": state}, {}, None, lambda t: profile)
    return results[0], records


def test_far_from_the_budget_a_debit_pays_by_the_composition_of_its_bucket():
    p = GaussianProfile(3.1, (1, 1))
    state = _state(p, 30, 1e9, 1.0)
    with pytest.raises(NeedsExact) as need:  # not cached: computed outside the transaction, on the coarse grid
        _decide(state, p)
    assert (need.value.parts, need.value.coarse) == ([(p, 32)], True)
    wide = pld.exact_epsilon(need.value.parts, DELTA, coarse=True)
    result, records = _decide(_state(p, 30, 1e9, 1.0), p)
    assert (result.status, result.epsilon_spent, result.composition) == ("paid", wide, accounting.EXACT)
    assert records[0]["epsilon_spent"] == wide and records[0]["rows"] == 1
    assert wide < accounting.account([(E0, 0.0, 31)], DELTA).spend.epsilon  # tighter than the generic bounds


@pytest.mark.slow  # two fine compositions (~3 s each)
def test_near_the_budget_a_debit_is_decided_by_its_actual_count():
    """Budgets below the bucketed composition (32 answers) and above the ones of the actual count (31): the
    debit asks for the coarse composition of its actual count and is paid by it when it fits; when only the
    fine one fits, for that one too; one more answer is then refused. A randomised-response pair (ε = 0.5),
    whose coarse grid is looser than its fine one by ~3e-5 at 31 answers."""
    e = math.exp(0.5)
    p = PrivacyProfile(((0.5, 0.0),), ((0.0, 0.0), (1 / (1 + e), e / (1 + e)), (1.0, 1.0)))
    wide = pld.exact_epsilon([(p, 32)], DELTA, coarse=True)
    with pytest.raises(NeedsExact) as need:  # the bucket does not fit: the actual count, coarse grid first
        _decide(_state(p, 30, wide * 0.9999, 1.0), p)
    assert (need.value.parts, need.value.coarse, need.value.near) == ([(p, 31)], True, True)
    coarse = pld.exact_epsilon([(p, 31)], DELTA, coarse=True)
    assert coarse < wide < accounting.account([(E0, 0.0, 31)], DELTA).spend.epsilon
    result, _ = _decide(_state(p, 30, (coarse + wide) / 2, 1.0), p)
    assert (result.status, result.epsilon_spent) == ("paid", coarse)  # the coarse one fits: no fine one
    assert pld.cached_exact_epsilon([(p, 31)], DELTA) is None
    with pytest.raises(NeedsExact) as need:  # a budget below the coarse one: the fine one is asked for
        _decide(_state(p, 30, coarse * 0.999999, 1.0), p)
    assert (need.value.parts, need.value.coarse, need.value.near) == ([(p, 31)], False, True)
    fine = pld.exact_epsilon([(p, 31)], DELTA)
    assert fine < coarse
    budget = (fine + coarse) / 2
    result, _ = _decide(_state(p, 30, budget, 1.0), p)
    assert (result.status, result.epsilon_spent) == ("paid", fine)  # only the fine one fits
    result, _ = _decide(_state(p, 30, (coarse + wide) / 2, 1.0), p)
    assert (result.status, result.epsilon_spent) == ("paid", fine)  # once known, the tightest is used
    with pytest.raises(NeedsExact) as need:  # 32 answers: bucket 32 (= the actual count) does not fit: fine
        _decide(_state(p, 31, budget, fine), p)
    assert (need.value.parts, need.value.coarse, need.value.near) == ([(p, 32)], False, True)
    pld.exact_epsilon(need.value.parts, DELTA)
    result, records = _decide(_state(p, 31, budget, fine), p)
    assert result.status == "over_budget" and records == []


def test_a_composition_computed_in_advance_is_used_when_the_bucket_is_not_cached():
    p = GaussianProfile(3.3, (1, 1))
    ahead = pld.canonical_parts([(p, 40)])
    advance = pld.exact_epsilon(ahead, DELTA, coarse=True)
    state = _state(p, 30, 1e9, 1.0)
    state.covers = (pld.canonical_parts([(p, 24)]), ahead)  # 24 does not cover 31 answers; 40 does
    state.ahead_by = 100
    result, _ = _decide(state, p)
    assert (result.status, result.epsilon_spent) == ("paid", advance)
    assert pld.cached_exact_epsilon([(p, 32)], DELTA, coarse=True) is None  # the bucket was not computed
    # the next composition to compute in advance: room for at most a quarter more answers (31 + 7 -> bucket 40)
    assert state.ahead == (pld.canonical_parts([(p, 40)]), DELTA)


def test_the_writer_pays_every_debit_once_and_computes_the_next_bucket_ahead(tmp_path):
    """A real debit writer (the Python ledger's, on SQLite) and a GNMax table (a Gaussian pair): 20 one-row
    debits are each paid once (20 answers, 20 spend records), every statement is the coarse composition of a
    count at least the ledger's and never decreases, and the next bucket's composition is computed ahead."""
    pytest.importorskip("sqlalchemy")
    from sqlalchemy import func, select

    from darrm_opt.ledger.local import Ledger
    from darrm_opt.ledger.schema import SpendRecord
    from darrm_opt.mechanisms import mechanism
    from darrm_opt.model.gnmax import GnmaxParams

    table = mechanism("gnmax").solve(GnmaxParams(15, 3, 3.4), solver="highs").table
    p = table.profile
    with Ledger(f"sqlite:///{tmp_path}/l.db", "g", epsilon_budget=1e9, delta_budget=DELTA) as book:
        stated = [book.pay(table, 1).epsilon_spent for _ in range(20)]
        # the look-ahead thread is first in, first out: idle
        book._writer.compositions._ahead.submit(lambda: None).result()
        view = book.view()
        with book.db.read() as conn:
            spends = conn.execute(select(func.count()).select_from(SpendRecord)).scalar_one()
    assert view["answers"] == 20 and spends == 20 and view["epsilon_spent"] == stated[-1]
    assert stated == sorted(stated)
    for n, eps in enumerate(stated, start=1):
        covering = {pld.cached_exact_epsilon([(p, c)], DELTA, coarse=True) for c in range(n, 2 * n + 9)}
        assert eps in covering  # the composition of a count that covers the ledger's n answers
        assert eps >= pld.exact_epsilon([(p, n)], DELTA, coarse=True)
    assert pld.cached_exact_epsilon([(p, pld.bucket(21))], DELTA, coarse=True) is not None  # computed ahead
