"""Votes CSV as people write them (darrm_opt.release.votes_csv), and through `darrm-opt aggregate` as a
subprocess: header row, integral floats, `;`/tab/space delimiters, the bad line named."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

from darrm_opt.errors import InvalidParameter
from darrm_opt.release.votes_csv import read_vote_rows

ROWS = np.array([[1, 1, 0, 0, 1], [0, 0, 0, 1, 0], [1, 1, 1, 1, 1]], dtype=np.uint8)


def savetxt(**kwargs) -> str:
    buf = io.StringIO()
    np.savetxt(buf, ROWS.astype(float), **kwargs)
    return buf.getvalue()


@pytest.mark.parametrize("text", [
    "1,1,0,0,1\n0,0,0,1,0\n1,1,1,1,1\n",
    "t1,t2,t3,t4,t5\n1,1,0,0,1\n0,0,0,1,0\n1,1,1,1,1\n",               # a header row
    '"a";"b";"c";"d";"e"\r\n1;1;0;0;1\r\n0;0;0;1;0\r\n1;1;1;1;1\r\n',     # ; and quotes, CRLF
    "1\t1\t0\t0\t1\n0\t0\t0\t1\t0\n\n1\t1\t1\t1\t1\n",                    # tabs and a blank line
    "1 1 0  0 1\n 0 0 0 1 0\n1 1 1 1 1\n",                                # runs of spaces
    "\ufeff1.0,1.0,0.0,0.0,1.0\n0,0,0,1,0\n1e0,1,1,1,1\n",               # BOM, integral floats
    savetxt(),                                                           # numpy's default: 1.000000000000000000e+00
    savetxt(delimiter=",", header="votes of five teachers"),             # "# votes ..." header line
    savetxt(delimiter=";", fmt="%.1f"),
])
def test_the_layouts_people_write_read_the_same_rows(text):
    got = read_vote_rows(text, 5)
    assert got.dtype == np.uint8 and np.array_equal(got, ROWS)


@pytest.mark.parametrize(("text", "message"), [
    ("1,1,0,0,1\n1,1,0,1\n", "row 2 has 4 values; every row needs K = 5"),
    ("1,1,0,0,1\n1;1;0;0;1\n", "row 2 has 1 values"),                 # the first data line fixes the delimiter
    ("h1,h2,h3,h4,h5\n1,1,0,0,1\n1,1,0.5,0,1\n", "row 3: every vote must be 0 or 1"),
    ("1,1,0,0,1\n1,1,2,0,1\n", "row 2: every vote must be 0 or 1"),
    ("1,1,0,0,1\n1,1,nan,0,1\n", "row 2: every vote must be 0 or 1"),
    ("1,1,0,0,1\nt1,t2,t3,t4,t5\n", "row 2: every vote must be 0 or 1"),  # a header only on the first line
    ("1,1,x,0,1\n", "row 1: every vote must be 0 or 1"),                # a mixed first line is no header
])
def test_a_bad_row_is_named(text, message):
    with pytest.raises(InvalidParameter) as exc:
        read_vote_rows(text, 5)
    assert exc.value.parameter == "votes" and message in str(exc.value)


def test_class_labels_take_integral_floats_and_name_the_row():
    assert read_vote_rows("c1 c2 c3\n2.0 0 1\n1 1 1\n", 3, classes=3).tolist() == [[2, 0, 1], [1, 1, 1]]
    with pytest.raises(InvalidParameter, match=r"row 3: every vote must be a class label, an integer in \[0, 2\]"):
        read_vote_rows("c1 c2 c3\n2.0 0 1\n3 1 1\n", 3, classes=3)
    assert read_vote_rows("999,0\n", 2, classes=1000).dtype == np.uint16


@pytest.mark.slow  # two solves and two CLI processes
def test_aggregate_reads_a_header_semicolons_and_floats_and_names_the_bad_line(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "darrm_opt", *args], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)

    r = cli("solve", "--K", "5", "--m", "5", "--format", "json", "--out", "t.json", "-q")
    assert r.returncode == 0, r.stderr
    (tmp_path / "v.csv").write_text("t1;t2;t3;t4;t5\n1.0;1.0;1.0;1.0;1.0\n0;0;0;0;0\n")
    r = cli("aggregate", "--table", "t.json", "--votes", "v.csv", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert '"answers"' in r.stdout or r.stdout.strip().startswith("[")
    (tmp_path / "v.csv").write_text("t1;t2;t3;t4;t5\n1.0;1.0;1.0;1.0;1.0\n0;0;0.5;0;0\n")
    r = cli("aggregate", "--table", "t.json", "--votes", "v.csv")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == ["error: invalid votes: row 3: every vote must be 0 or 1 (got '0.5')"]
