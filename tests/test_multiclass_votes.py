"""Multi-class DaRRM with class-label votes: the aggregator's released law, exactly; C = 2 against the binary
PATE aggregator; table files, ``verify`` and ``aggregate`` (labels, bad rows, the ledger).

The aggregator keeps the plurality iff a uniform 64-bit U < γ(g)·2^64 (ties recurse on the exact remainder,
as the binary aggregator), then draws a uniform index (U mod n with rejection of U ≥ 2^64 − (2^64 mod n)) among
the top set T (none when |T| = 1) or, not kept, among all C classes. Every byte it reads is scripted here:
each branch of every histogram of K = 7 votes over C = 4 classes (ties of 2 and 3 included) is taken and the
answer checked, and the law implied by the aggregator's exact thresholds is compared with (MC-1) of
darrm_opt.model.multiclass in rationals.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import sys
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scripted_bytes import Script
from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.errors import InvalidParameter, TableFileError
from darrm_opt.mechanisms.vote_samplers import BinarySampler, MulticlassSampler
from darrm_opt.model.multiclass import MulticlassParams, output_distribution, top_structure
from darrm_opt.release.table_file import load_any_table, load_multiclass_table, load_table

TWO64 = 1 << 64
K, C = 7, 4
# γ by gap g = 0..7: tiny (its γ·2^64 has a fractional part: a coin tie recurses), 1 exactly, 0, fractions
GAMMA = [3e-5, 1.0, 0.0, 0.6, 0.85, 0.3, 0.9, 1.0]
HISTS = [h for h in itertools.product(range(K + 1), repeat=C) if sum(h) == K]  # all 120 histograms


def labels_of(h) -> list[int]:
    """K labels whose histogram is h (in an order that is not sorted, to exercise the counting)."""
    out = [c for c, n in enumerate(h) for _ in range(n)]
    return out[::-1]


def threshold(g: float) -> int:
    return math.floor(Fraction(g) * TWO64)


def u64(values) -> bytes:
    return b"".join(int(v).to_bytes(8, sys.byteorder) for v in values)  # numpy reads native uint64




def scenarios():
    """(histogram, keep, index) for every branch: kept → each index into the top set, not kept → each class."""
    for h in HISTS:
        g, T = top_structure(h)
        if GAMMA[g] > 0:
            for j in range(len(T)):
                yield h, True, j
        if GAMMA[g] < 1:
            for c in range(C):
                yield h, False, c


def coin(g: int, keep: bool) -> int:
    """A 64-bit U that keeps (U < ⌊γ·2^64⌋, or any U when γ = 1) or not (U > the threshold)."""
    t = threshold(GAMMA[g])
    if GAMMA[g] == 1:
        return 12345
    assert 0 < t or not keep
    return t - 1 if keep else t + 1


@pytest.mark.parametrize("offset", [0, 7], ids=["index-equals-draw", "index-plus-multiples"])
def test_every_branch_of_every_histogram_releases_the_scripted_class(offset):
    rows = list(scenarios())
    agg = MulticlassSampler(GAMMA, C)
    us, draws, expect = [], [], []
    for h, keep, j in rows:
        g, T = top_structure(h)
        us.append(coin(g, keep))
        n = len(T) if keep else C
        if n > 1:
            draws.append(j + n * offset)  # U mod n = j
        expect.append(T[j] if keep else j)
    agg.random_bytes = Script([u64(us), u64(draws)])
    out = agg([labels_of(h) for h, _, _ in rows])
    assert not agg.random_bytes.chunks
    assert out.tolist() == expect
    assert out.dtype == np.uint8
    assert len(HISTS) == 120
    assert {len(top_structure(h)[1]) for h, _, _ in rows} == {1, 2, 3}  # ties of 2 and of 3 classes
    assert {top_structure(h)[0] for h, _, _ in rows} == set(range(K + 1)) - {6}  # gap 6 is unreachable


def test_a_rejected_index_is_drawn_again_and_a_coin_tie_recurses():
    agg = MulticlassSampler(GAMMA, C)
    h2 = (3, 3, 1, 0)  # a tie of 2 (gap 0): γ(0) = 3e-5 has a remainder below 2^-64
    h3 = (2, 2, 2, 1)  # a tie of 3 (gap 0)
    t0 = threshold(GAMMA[0])
    rem = Fraction(GAMMA[0]) * TWO64 - t0
    assert 0 < rem * TWO64 and t0 > 0
    assert TWO64 - TWO64 % 3 == TWO64 - 1  # Uniform{0, 1, 2} rejects U = 2^64 − 1 only
    # coins: row 0 ties its threshold, its remainder's draw 0 keeps it; row 1 draws 0 < t0: kept.
    # indices: row 0 among 2 classes: 2^64 − 1 → 1 (class 1); row 1 among 3: 2^64 − 1 rejected, then 5 → 2
    chunks = [u64([t0, 0]), (0).to_bytes(8, "little"), u64([TWO64 - 1, TWO64 - 1]), u64([5])]
    agg.random_bytes = Script(chunks)
    out = agg.answers_from_histograms(np.array([h2, h3]))
    assert not agg.random_bytes.chunks
    assert out.tolist() == [1, 2]
    # the tie's remainder draw at 2^64 − 1 ≥ rem·2^64: not kept, index among all 4: U = 6 → class 2
    agg.random_bytes = Script([u64([t0]), (TWO64 - 1).to_bytes(8, "little"), u64([6])])
    assert agg.answers_from_histograms(np.array([h2])).tolist() == [2]


def law_from_thresholds(agg: MulticlassSampler, h) -> list[Fraction]:
    """The released law as the aggregator's integers define it: Pr[keep] = (⌊γ·2^64⌋ + remainder)/2^64 (the
    remainder's recursion keeps with probability remainder exactly), an index uniform on each accepted block."""
    g, T = top_structure(h)
    if agg._always[g]:
        keep = Fraction(1)
    else:
        keep = (Fraction(int(agg._threshold[g])) + agg._remainder[g]) / TWO64
    for n in range(1, C + 1):  # U mod n on [0, limit): every residue equally often
        limit = TWO64 if agg._all_kept[n] else int(agg._limit[n])
        assert limit % n == 0 and TWO64 - n < limit <= TWO64
    return [keep * (Fraction(1, len(T)) if c in T else 0) + (1 - keep) / C for c in range(C)]


def test_the_released_law_is_mc1_exactly():
    agg = MulticlassSampler(GAMMA, C)
    for h in HISTS:
        model = output_distribution(np.array(h), GAMMA)
        exact = law_from_thresholds(agg, h)
        assert exact == agg.distribution(h)
        assert sum(exact) == 1
        g, T = top_structure(h)
        gam = Fraction(GAMMA[g])
        assert exact == [(1 - gam) / C + (gam / len(T) if c in T else 0) for c in range(C)]
        assert np.allclose([float(x) for x in exact], model, rtol=0, atol=1e-15)


def test_a_seeded_sample_follows_the_law():
    rng = random.Random(15)
    agg = MulticlassSampler(GAMMA, C, random_bytes=rng.randbytes)
    n = 20_000
    for h in [(3, 3, 1, 0), (7, 0, 0, 0), (2, 2, 2, 1), (0, 4, 1, 2), (1, 1, 5, 0)]:
        out = agg.answers_from_histograms(np.tile(h, (n, 1)))
        freq = Counter(out.tolist())
        for c, p in enumerate(agg.distribution(h)):
            sd = math.sqrt(float(p) * (1 - float(p)) / n)
            assert abs(freq.get(c, 0) / n - float(p)) <= 5 * sd + 1e-12, (h, c)


def test_bad_label_rows_are_refused_naming_the_row():
    agg = MulticlassSampler(GAMMA, C)
    ok = [0, 1, 2, 3, 0, 1, 2]
    for votes, rule in (([ok[:-1] + [4]], "row 0: every label"), ([ok, ok[:-1] + [-1]], "row 1"),
                        ([ok, ok[:-1]], "row 1: every row must have K = 7"), ([[0.0] + ok[1:]], "integer")):
        with pytest.raises(InvalidParameter, match=rule) as exc:
            agg(votes)
        assert exc.value.parameter == "votes"
    with pytest.raises(InvalidParameter, match="summing to K"):
        agg.answers_from_histograms(np.array([[1, 1, 1, 1]]))
    with pytest.raises(InvalidParameter, match="classes"):
        MulticlassSampler(GAMMA, 1)


def test_os_randomness_and_more_than_256_classes():
    agg = MulticlassSampler([0.0, 0.0, 1.0], 300, random_bytes=os.urandom)
    out = agg([[299, 299], [0, 299]])
    assert out.dtype == np.uint16 and out[0] == 299 and 0 <= out[1] < 300


# ---------------------------------------------------------------------------------------------------------
# C = 2 is binary DaRRM in the PATE setting
KB = 5
GAMMA_L = [0.25, 0.5, 0.75, 0.75, 0.5, 0.25]  # binary γ(L), mirror-symmetric as PATE-setting tables are


def test_two_classes_release_the_binary_pate_law_and_the_same_answers():
    """With γ_mc(g) = γ(L) for g = |2L − K|, a two-class table releases class 1 with the binary aggregator's
    Pr[1 | L] for every L (exactly), and with the same coin U both keep or both do not."""
    gamma_mc = [0.0] * (KB + 1)
    for L in range(KB + 1):
        gamma_mc[abs(2 * L - KB)] = GAMMA_L[L]
    mc, binary = MulticlassSampler(gamma_mc, 2), BinarySampler(GAMMA_L)
    for L in range(KB + 1):
        law = mc.distribution((KB - L, L))
        g = Fraction(GAMMA_L[L])
        majority = L >= (KB + 1) // 2
        assert law[1] == (g if majority else 0) + (1 - g) / 2
        assert float(law[1]) == binary.probability_of_one(L)
    votes = np.array([[1] * L + [0] * (KB - L) for L in range(KB + 1)] * 6, dtype=np.uint8)
    L = votes.sum(axis=1)
    for keep in (True, False):
        us = [threshold(GAMMA_L[x]) - 1 if keep else threshold(GAMMA_L[x]) + 1 for x in L]
        fair = [int(x < (KB + 1) // 2) for x in L]  # the fallback disagrees with the majority
        assert binary.coin_bytes == 8  # the binary coin reads U as 8 big-endian bytes, the multi-class one native
        coins = b"".join(int(u).to_bytes(8, "big") for u in us)
        binary.random_bytes = Script([coins, np.packbits(np.array(fair, dtype=np.uint8)).tobytes()])
        chunks = [u64(us)] + ([] if keep else [u64(fair)])  # index among both classes: U mod 2
        mc.random_bytes = Script(chunks)
        assert mc(votes).tolist() == binary(votes).tolist()


# ---------------------------------------------------------------------------------------------------------
# Table files, verify, aggregate
@pytest.fixture(scope="module")
def table_file(tmp_path_factory):
    """A solved, certified K = 7, C = 3 table written by ``solve --format json``."""
    d = tmp_path_factory.mktemp("mc")
    r = CliRunner().invoke(app, ["solve", "--K", "7", "--classes", "3", "--teachers", "disjoint-nonprivate",
                                 "--target-epsilon", "1", "--delta", "1e-5", "--format", "json", "--no-baselines",
                                 "--out", str(d / "t.json")])
    assert r.exit_code == 0, r.output
    return d / "t.json"


def test_table_files_load_and_save(table_file, tmp_path):
    params, gamma = load_multiclass_table(table_file)
    assert (params.K, params.C, params.epsilon, params.delta) == (7, 3, 1.0, 1e-5)
    assert load_any_table(table_file)[0] == params and gamma.size == 8
    with pytest.raises(TableFileError, match="darrm-multiclass table"):
        load_table(table_file)
    from darrm_opt.certify.multiclass import certify_multiclass

    cert = certify_multiclass(params, gamma)
    assert cert.certified
    doc = {**params.canonical(), "gamma": gamma.tolist(), "certificate": cert.to_dict()}
    (tmp_path / "copy.json").write_text(json.dumps(doc))
    again, g2 = load_multiclass_table(tmp_path / "copy.json")
    assert again == params and g2.tolist() == gamma.tolist() and again.key() == params.key()
    assert MulticlassParams(7, 4, 1.0, 1e-5).key() != params.key()  # C is part of the id
    for field, value, msg in (("classes", None, "lacks field"), ("teachers", "shared", "teachers"),
                              ("delta", None, "delta"), ("gamma", [0.5] * 7, "K \\+ 1 = 8")):
        bad = dict(doc, **{field: value})
        if field == "classes":
            bad.pop("classes")
            bad["classes"] = 3
            bad.pop("teachers")
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises((TableFileError, InvalidParameter), match=msg if field != "classes" else "teachers"):
            load_multiclass_table(tmp_path / "bad.json")


def test_verify_recertifies_and_rejects(table_file, tmp_path):
    r = CliRunner().invoke(app, ["verify", str(table_file), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["certificate"]["certified"] is True and doc["classes"] == 3
    assert doc["certificate"]["types_checked"] > 0
    data = json.loads(table_file.read_text())
    data["gamma"] = [1.0] * 8  # always the plurality: not (1, 1e-5)-DP
    (tmp_path / "loud.json").write_text(json.dumps(data))
    r = CliRunner().invoke(app, ["verify", str(tmp_path / "loud.json")])
    assert r.exit_code == 1 and "NOT CERTIFIED" in r.output


def test_aggregate_labels_happy_path_and_ledger(table_file, tmp_path):
    votes = tmp_path / "v.csv"
    votes.write_text("0,0,0,0,0,0,0\n\n2,2,2,2,2,2,2\n1,1,1,1,1,1,1\n")
    r = CliRunner().invoke(app, ["aggregate", "--table", str(table_file), "--votes", str(votes)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.split()
    assert lines[0] == "answer" and len(lines) == 4 and all(0 <= int(a) < 3 for a in lines[1:])
    db = tmp_path / "l.db"
    args = ["aggregate", "--table", str(table_file), "--votes", str(votes), "--format", "json",
            "--ledger", "mc", "--ledger-db", str(db), "--epsilon-budget", "7", "--delta-budget", "1e-3"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    from darrm_opt.privacy.table import table_id

    params, gamma = load_multiclass_table(table_file)
    assert doc["table_id"] == table_id("darrm-multiclass", params, "disjoint-nonprivate", gamma)
    assert doc["classes"] == 3 and len(doc["answers"]) == 3
    from darrm_opt.privacy import accounting
    from darrm_opt.privacy.pair_profile import multiclass_profile

    led = doc["ledger"]
    # the table's exact profile composes exactly (generic bounds of its per-answer (1, 1e-5): 2.99 < ε < 3)
    prof = multiclass_profile(params, json.loads(table_file.read_text())["gamma"])
    three = accounting.account([(1.0, 1e-5, 3)], 1e-3, profiles=[(prof, 3)], coarse=True).spend
    assert (led["answers"], led["epsilon_spent"], led["composition"]) == (3, three.epsilon, "exact")
    assert three.epsilon < accounting.account([(1.0, 1e-5, 3)], 1e-3).spend.epsilon  # 2.99667 < 2.99751
    r = CliRunner().invoke(app, args[:-4])  # the same ledger pays again
    assert r.exit_code == 0, r.output
    six = accounting.account([(1.0, 1e-5, 6)], 1e-3, profiles=[(prof, 6)], coarse=True).spend
    assert json.loads(r.stdout)["ledger"]["epsilon_spent"] == six.epsilon < 7
    votes.write_text("0,0,0,0,0,0,0\n" * 3)  # 3 more answers at ε = 1 do not fit in ε = 7
    r = CliRunner().invoke(app, args[:-4])
    assert r.exit_code == 1 and "nothing was released" in r.output and "epsilon" in r.output


@pytest.mark.parametrize("row, rule", [
    ("0,0,0,0,0,0,3", "row 2: every vote must be a class label, an integer in \\[0, 2\\]"),
    ("0,0,0,0,0,0,-1", "row 2: every vote must be a class label"),
    ("0,0,0,0,0,0,1.5", "row 2: every vote must be a class label"),
    ("0,0,0,0,0,0,x", "row 2: every vote must be a class label"),
    ("0,0,0,0,0,0", "row 2 has 6 labels; every row needs K = 7"),
])
def test_aggregate_bad_label_rows_exit_2_naming_row_and_rule(table_file, tmp_path, row, rule):
    votes = tmp_path / "v.csv"
    votes.write_text("1,1,1,1,1,1,1\n" + row + "\n")
    r = CliRunner().invoke(app, ["aggregate", "--table", str(table_file), "--votes", str(votes)])
    assert r.exit_code == 2, r.output
    assert "invalid votes" in r.output
    import re

    assert re.search(rule, r.output.replace("\n", " ")), r.output


@pytest.mark.slow  # 20 000 rows over 1000 classes, traced twice
def test_many_classes_answer_in_bounded_memory_with_the_same_answers(monkeypatch):
    """K = 1 vote over C = 1000 classes, 20 000 rows (a 120 kB body): the (rows, C) histograms and their
    temporaries are formed in chunks (peak traced memory under 24 MB; whole, they took ~0.6 GB: a 100 000-row
    request took 3.3 GB RSS), and a seeded source gives the same answers whatever the chunk size (the
    random bytes are read in the documented order)."""
    import tracemalloc

    from darrm_opt.mechanisms import vote_samplers as mod

    rng = np.random.default_rng(3)
    votes = rng.integers(0, 1000, size=(20_000, 1)).astype(np.uint16)
    gamma = [0.37, 0.81]
    tracemalloc.start()
    big = MulticlassSampler(gamma, 1000, random_bytes=random.Random(5).randbytes)(votes)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 24e6, peak
    monkeypatch.setattr(mod, "CHUNK_CELLS", 3000)  # 3 rows per chunk
    small = MulticlassSampler(gamma, 1000, random_bytes=random.Random(5).randbytes)(votes)
    assert np.array_equal(big, small) and big.dtype == np.uint16
    kept = big == votes[:, 0]  # K = 1: gap 1, kept w.p. γ(1), else uniform over 1000
    assert abs(kept.mean() - (0.81 + 0.19 / 1000)) < 5 * math.sqrt(0.81 * 0.19 / 20_000)
