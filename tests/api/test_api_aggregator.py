"""DaRRM answers: their distribution through the service, and the aggregator's exact coins."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from svc_helpers import make_ledger, make_table

from darrm_opt.api import votes as votes_io
from darrm_opt.mechanisms.vote_samplers import BinarySampler
from darrm_opt.sampling import exact_bernoulli

N_ANSWERS = 20_000


@pytest.mark.slow  # 60 000 answers through the service
def test_answer_distribution_matches_gamma(client):
    """For fixed votes, 20 000 answers from the server match γ(L) + (1 − γ(L))/2 within 4 standard errors."""
    table = make_table(client, K=11, m=3)
    gamma = table["gamma"]
    ledger = make_ledger(client, epsilon_budget=1e9, delta_budget=0.9)
    for L in (4, 6, 8):  # γ(4) = γ(7) ≈ 0.542, γ(6) = γ(5) ≈ 0.939, γ(8) = γ(3) = 1
        row = [1] * L + [0] * (11 - L)
        r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"],
                                               "votes": [row] * N_ANSWERS})
        assert r.status_code == 200, r.text
        answers = np.array(r.json()["answers"])
        assert answers.shape == (N_ANSWERS,)
        g = gamma[L]
        p = g + (1 - g) / 2 if L >= 6 else (1 - g) / 2
        se = math.sqrt(max(p * (1 - p), 1e-12) / N_ANSWERS)
        assert abs(answers.mean() - p) <= 4 * se + 1e-12, (L, answers.mean(), p)
    assert client.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 3 * N_ANSWERS


# --- in process ----------------------------------------------------------------------------------------------
def seeded(seed: int):
    rng = np.random.default_rng(seed)
    return rng.bytes


def test_aggregator_distribution_with_injected_rng():
    gamma = [1.0, 0.25, 0.6, 0.6, 0.25, 1.0]
    agg = BinarySampler(gamma, seeded(7))
    n = 200_000
    for L in range(6):
        votes = np.zeros((n, 5), dtype=np.uint8)
        votes[:, :L] = 1
        ans = agg(votes)
        p = agg.probability_of_one(L)
        assert abs(ans.mean() - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_small_batches_answer_in_python_with_the_same_distribution():
    gamma = [1.0, 0.25, 0.6, 0.6, 0.25, 1.0]
    agg = BinarySampler(gamma, seeded(11))
    calls = 4000
    for L in range(6):
        row = [1] * L + [0] * (5 - L)
        ones = sum(int(agg([row] * 8).sum()) for _ in range(calls))  # 8 rows: the plain-Python path
        n = 8 * calls
        p = agg.probability_of_one(L)
        assert abs(ones / n - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12, (L, ones / n, p)
    assert agg(np.array([[1, 1, 1, 0, 0]] * 3, dtype=np.uint8)).dtype == np.uint8


@pytest.mark.slow  # 150 requests, each a durable debit
def test_server_answers_small_batches_with_the_right_distribution(client):
    table = make_table(client, K=5, m=2)
    ledger = make_ledger(client, epsilon_budget=1e9, delta_budget=0.9)
    g = table["gamma"][2]  # L = 2 of 5: majority 0
    p = (1 - g) / 2
    ones = n = 0
    for _ in range(150):
        r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"],
                                               "votes": [[1, 1, 0, 0, 0]] * 32})
        assert r.status_code == 200
        ones += sum(r.json()["answers"])
        n += 32
    assert abs(ones / n - p) <= 4 * math.sqrt(max(p * (1 - p), 1e-12) / n) + 1e-12, (ones / n, p)


def test_gamma_one_always_answers_the_majority_and_zero_is_a_fair_coin():
    votes = np.array([[1, 1, 0], [0, 0, 1], [1, 1, 1], [0, 0, 0]] * 5000, dtype=np.uint8)
    ones = BinarySampler([1.0] * 4)(votes)
    assert np.array_equal(ones, (votes.sum(axis=1) >= 2).astype(np.uint8))
    coin = BinarySampler([0.0] * 4, seeded(3))(votes)
    assert abs(coin.mean() - 0.5) < 4 * math.sqrt(0.25 / coin.size)


def _stream(chunks):
    it = iter(chunks)
    return lambda n: next(it)


def test_coin_is_exact_past_64_bits():
    """γ·2^64 has a fractional part: the coin reads W = 128 bits for every row (issue 33: a fixed width, no
    recursion) and keeps iff U < γ·2^128 exactly, decided in the low limb when the high limbs agree."""
    from fractions import Fraction

    gamma = 0.3 / 2**20  # γ·2^64 has a fractional part
    f = Fraction(gamma) * 2**64
    t = f.numerator // f.denominator
    rem = f - t
    assert 0 < rem < 1
    r = rem * 2**64
    t2 = r.numerator // r.denominator
    assert exact_bernoulli(rem, _stream([(t2 - 1).to_bytes(8, "little")])) is True  # still serves top-2 / CKS
    assert exact_bernoulli(rem, _stream([(t2 + 1).to_bytes(8, "little")])) is False
    T = Fraction(gamma) * 2**128
    assert T.denominator == 1 and T == t * 2**64 + t2  # two limbs hold γ exactly
    T = int(T)
    one = np.array([1], dtype=np.uint16)  # K = 1, L = 1: the majority is 1

    def u(x: int) -> bytes:
        return x.to_bytes(16, "big")

    for x, kept in ((T - 1, True), (T, False), (T + 1, False), (t * 2**64, True), ((t + 1) * 2**64 - 1, False)):
        agg = BinarySampler([gamma, gamma], _stream([u(x), b"\x00"]))
        assert agg.coin_bytes == 16
        assert agg.answers_from_counts(one).tolist() == [int(kept)]  # not kept: the fair coin's 0
        # the plain-Python path for small batches draws the same coins (one read: 16 bytes per row + fair bits)
        agg = BinarySampler([gamma, gamma], _stream([u(x) + b"\x00"]))
        assert agg([[1]]).tolist() == [int(kept)]
    above = BinarySampler([gamma, gamma], _stream([u(T + 1) + b"\x01"]))
    assert above([[1]]).tolist() == [1]  # not kept: the fair coin's bit, 1 here


def test_bad_votes_are_refused_in_process():
    agg = BinarySampler([1.0, 0.5, 0.5, 1.0])
    from darrm_opt.errors import InvalidParameter

    for rows in (1, 100):  # the plain-Python and the numpy paths
        with pytest.raises(InvalidParameter):
            agg(np.array([[0, 1, 2]] * rows))
        with pytest.raises(InvalidParameter):
            agg(np.array([[0, 1]] * rows))
        with pytest.raises(InvalidParameter):
            agg([[0, 1, -1]] * rows)


# --- the fast body reader agrees with pydantic -----------------------------------------------------------------
rows_st = st.integers(1, 6).flatmap(
    lambda k: st.lists(st.lists(st.integers(0, 1), min_size=k, max_size=k), min_size=1, max_size=20)
)


@settings(max_examples=200, deadline=None)
@given(rows=rows_st, spaces=st.booleans(), key=st.one_of(st.none(), st.text(min_size=1, max_size=5)))
def test_fast_votes_reader_agrees_with_the_model(rows, spaces, key):
    import json

    doc = {"table_id": "t1", "ledger_id": "l1", "votes": rows}
    if key is not None:
        doc["idempotency_key"] = key
    body = json.dumps(doc, separators=None if spaces else (",", ":")).encode()
    try:
        slow = votes_io.AggregateRequest.model_validate_json(body)
    except Exception:  # noqa: BLE001 - e.g. a control character in the key
        assert votes_io.parse_fast(body) is None
        return
    fast = votes_io.parse_fast(body)
    assert fast is not None
    rest, votes = fast
    assert votes.tolist() == slow.votes and rest.idempotency_key == slow.idempotency_key


@pytest.mark.parametrize(
    "body",
    [
        b'{"table_id":"t","ledger_id":"l","votes":[[0,1],[1]]}',
        b'{"table_id":"t","ledger_id":"l","votes":[[0,true]]}',
        b'{"table_id":"t","ledger_id":"l","votes":[[0,1]],"votes":[[1,1,1]]}',
        b'{"table_id":"t","ledger_id":"l","votes":[[0,1] [1,0]]}',
        b'{"table_id":"t","ledger_id":"l","votes":[[0 1],[1,0]]}',
        b'{"table_id":"t","ledger_id":"l","votes":[[1,[0]]]}',
        b'{"table_id":"t","ledger_id":"l","votes":[[0,1]],"x":{"votes":[[1,1]]}}',
        b'{"\\"votes":[[1]],"table_id":"t","ledger_id":"l","votes":[[0]]}',
        b'{"table_id":"t","ledger_id":"l","votes":[[01]]}',
        b'{"table_id":"t","ledger_id":"l","votes":[[0,1,]]}',
    ],
)
def test_fast_reader_never_accepts_what_the_model_would_not_read_the_same(body):
    fast = votes_io.parse_fast(body)
    try:
        slow = votes_io.AggregateRequest.model_validate_json(body)
    except Exception:  # noqa: BLE001
        assert fast is None
        return
    assert fast is None or fast[1].tolist() == slow.votes
