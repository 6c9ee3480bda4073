"""Votes as people hold them (darrm_opt.release.votes): (N, K) labels or (N, C) counts, from .npy, .npz,
CSV/TSV or standard input, the form inferred and checked, one-line errors naming votes."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest

from darrm_opt.errors import InvalidParameter
from darrm_opt.release.votes import read_votes, votes_from_array

LABELS = np.array([[0, 2, 2, 1, 2], [1, 1, 0, 0, 1], [2, 2, 2, 2, 2]])
COUNTS = np.array([[1, 1, 3], [2, 3, 0], [0, 0, 5]])


def npy_bytes(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


@pytest.mark.parametrize("data", [
    npy_bytes(LABELS), npy_bytes(LABELS.astype(float)), npz_bytes(votes=LABELS, other=COUNTS),
    npz_bytes(anything=LABELS), b"0,2,2,1,2\n1,1,0,0,1\n2,2,2,2,2\n", b"t1\tt2\tt3\tt4\tt5\n0\t2\t2\t1\t2\n"
    b"1\t1\t0\t0\t1\n2\t2\t2\t2\t2\n",
])
def test_labels_from_every_source_give_the_same_votes(data):
    v = read_votes(io.BytesIO(data), classes=3)
    assert v.form == "labels" and (v.N, v.K, v.classes) == (3, 5, 3)
    assert v.labels.tolist() == LABELS.tolist() and v.counts.tolist() == COUNTS.tolist()


@pytest.mark.parametrize("data", [npy_bytes(COUNTS), b"c0,c1,c2\n1,1,3\n2,3,0\n0,0,5\n", npz_bytes(votes=COUNTS)])
def test_counts_are_inferred_and_expanded_to_labels(data):
    v = read_votes(io.BytesIO(data))  # every row sums to 5 > 3 columns: counts of K = 5 teachers
    assert v.form == "counts" and (v.N, v.K, v.classes) == (3, 5, 3)
    assert v.counts.tolist() == COUNTS.tolist()
    assert v.labels.tolist() == [[0, 1, 2, 2, 2], [0, 0, 1, 1, 1], [2, 2, 2, 2, 2]]


def test_a_table_s_K_and_C_decide_the_form():
    assert read_votes(COUNTS, K=5, classes=3).form == "counts"
    assert read_votes(LABELS, K=5, classes=3).form == "labels"
    binary = read_votes(np.array([[2, 3], [5, 0]]), K=5, classes=2)  # (N, 2) counts for a binary table
    assert binary.form == "counts" and binary.labels.tolist() == [[0, 0, 1, 1, 1], [0, 0, 0, 0, 0]]
    # fewer teachers than classes: counts are named explicitly
    few = votes_from_array([[1, 0, 0, 1], [0, 2, 0, 0]], form="counts")
    assert (few.K, few.classes) == (2, 4) and few.labels.tolist() == [[0, 3], [1, 1]]


@pytest.mark.parametrize(("votes", "kwargs", "message"), [
    ([[1, 1, 3], [2, 3, 1]], {"form": "counts"}, "votes[1]: a count row sums to 6; every count row must sum to K = 5"),
    ([[1, 1, 4], [2, 3, 0], [0, 0, 5]], {}, "votes[0]: a count row sums to 6; every count row must sum to K = 5"),
    ([[1, 1, 3]], {"K": 4, "classes": 3}, "votes[0]: a count row sums to 5; every count row must sum to K = 4"),
    ([[0, 3, 1, 1]], {"classes": 3}, r"votes[0]: every vote must be a class label, an integer in [0, 2]"),
    ([[0, 0.5, 1]], {}, "votes[0]: every vote must be an integer (got 0.5)"),
    ([[0, -1, 1]], {}, "votes[0]: votes cannot be negative (got -1)"),
    ([0, 1, 1], {}, "must be a 2-D array, (N, K) labels or (N, C) counts (got shape (3,))"),
    ([[0, 1, 1, 0]], {"K": 5, "classes": 3}, "has 4 columns: (N, K = 5) labels or (N, C = 3) counts were expected"),
])
def test_bad_votes_are_one_line_naming_votes_and_the_rule(votes, kwargs, message):
    with pytest.raises(InvalidParameter) as exc:
        votes_from_array(votes, **kwargs)
    assert exc.value.parameter == "votes" and message in str(exc.value) and "\n" not in str(exc.value)


def test_text_errors_name_the_line():
    with pytest.raises(InvalidParameter, match=r"row 3: a count row sums to 4; every count row must sum to K = 5"):
        read_votes(io.BytesIO(b"a,b,c\n1,1,3\n1,1,2\n"), form="counts")
    with pytest.raises(InvalidParameter, match=r"row 2 has 2 values; every row needs as many as the first \(3\)"):
        read_votes(io.BytesIO(b"1,1,3\n1,1\n"))
    with pytest.raises(InvalidParameter, match="neither .npy, .npz nor UTF-8 CSV/TSV text"):
        read_votes(io.BytesIO(b"\xff\xfe\x00junk"))
    with pytest.raises(InvalidParameter, match="holds a, b: name the votes array 'votes'"):
        read_votes(io.BytesIO(npz_bytes(a=LABELS, b=COUNTS)))
    with pytest.raises(InvalidParameter, match="cannot read the votes file 'missing.csv'"):
        read_votes("missing.csv")


@pytest.mark.slow  # a solve and CLI processes
def test_aggregate_reads_npy_labels_counts_and_standard_input(tmp_path):
    def cli(*args, stdin=None):
        return subprocess.run([sys.executable, "-m", "darrm_opt", *args], capture_output=True, timeout=120,
                              cwd=tmp_path, input=stdin)

    r = cli("solve", "--K", "5", "--m", "5", "--format", "json", "--out", "t.json", "-q")
    assert r.returncode == 0, r.stderr
    unanimous = np.array([[1, 1, 1, 1, 1], [0, 0, 0, 0, 0]] * 3)
    np.save(tmp_path / "labels.npy", unanimous)
    np.save(tmp_path / "counts.npy", np.array([[0, 5], [5, 0]] * 3))
    (tmp_path / "counts.csv").write_text("no,yes\n0,5\n5,0\n0,5\n5,0\n0,5\n5,0\n")
    answers = []
    for args, stdin in ((("--votes", "labels.npy"), None), (("--votes", "counts.npy"), None),
                        (("--votes", "counts.csv"), None), (("--votes", "-"), npy_bytes(unanimous)),
                        (("--votes", "-"), b"1 1 1 1 1\n0 0 0 0 0\n" * 3)):
        r = cli("aggregate", "--table", "t.json", *args, "--format", "json", stdin=stdin)
        assert r.returncode == 0, r.stderr
        answers.append(json.loads(r.stdout)["answers"])
        assert b"no ledger: nothing was accounted" in r.stderr
    assert all(len(a) == 6 for a in answers)
    r = cli("aggregate", "--table", "t.json", "--votes", "-", stdin=npy_bytes(np.array([[0, 4], [5, 0]])))
    assert r.returncode == 2
    assert r.stderr.decode().strip().splitlines() == [
        "error: invalid votes: votes[0]: a count row sums to 4; every count row must sum to K = 5 (the number "
        "of teachers)"]


def test_data_dependent_ledgers_take_the_votes_as_held(tmp_path):
    from test_data_dependent_ledger import gnmax_policy

    from darrm_opt import DataDependentLedger

    np.save(tmp_path / "c.npy", np.array([[12, 0, 0], [6, 6, 0]]))
    with DataDependentLedger(str(tmp_path / "dd.db"), "job", gnmax_policy(quota=10)) as led:
        assert led.record(tmp_path / "c.npy")["queries"] == 2                          # (N, C) counts, .npy
        assert led.record(np.array([[0] * 12, [1] * 6 + [2] * 6]))["queries"] == 4      # (N, K) labels
        assert led.histograms([[0] * 12, [1] * 6 + [2] * 6]).tolist() == [[12, 0, 0], [0, 6, 6]]
        with pytest.raises(InvalidParameter, match=r"votes\[0\]: a count row sums to 11; every count row must sum "
                                                   "to K = 12"):
            led.record([[11, 0, 0]])
        assert led.view()["queries"] == 4
