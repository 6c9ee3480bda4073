"""Teachers' votes as people hold them, for every front end (``aggregate``, ``label``, data-dependent ledgers).

Two forms of one job's votes, N queries of K teachers and C classes:

* **labels**: an (N, K) array, each entry the class a teacher voted for, an integer in [0, C − 1] (0/1 for
  binary votes);
* **counts**: an (N, C) array of vote histograms, entry (i, c) the number of teachers who voted c on query
  i; every row sums to K.

Sources: ``.npy``, ``.npz`` (its array ``votes``, or its only array), CSV/TSV text
(:mod:`darrm_opt.release.votes_csv`'s rules: delimiter, header, ``#`` lines, ``1.0`` read as 1) and standard
input (``-``: the bytes decide, numpy's magic string for ``.npy``, a zip archive for ``.npz``, else text).

The form is inferred (``form="auto"``) unless given: with the table's K known (``aggregate``) an array of K
columns is labels and one of C columns whose rows sum to K is counts; with only C known, C columns whose rows
sum to one total are counts; with neither, rows that sum to one total T greater than their number of
columns are counts (K = T: more teachers than classes, as in PATE), anything else labels. "The rows sum to
one total" means at least half of them do: the others are then named by the check of counts. Every
rule broken is :class:`~darrm_opt.errors.InvalidParameter` naming ``votes`` and the rule, in one line.
"""

from __future__ import annotations

import io
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.release.votes_csv import _number, data_rows, read_vote_rows

FORMS = ("auto", "labels", "counts")
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"


@dataclass(frozen=True)
class Votes:
    """One job's votes: ``labels`` (N, K) class labels and ``counts`` (N, C) histograms of the same votes,
    ``form`` the one they were given in, ``classes`` C (given, or inferred: for labels, the largest label + 1,
    at least 2), ``source`` what they were read from (for messages)."""

    labels: np.ndarray
    counts: np.ndarray
    form: str
    classes: int
    source: str

    @property
    def N(self) -> int:  # noqa: N802 - the paper's name
        return int(self.labels.shape[0])

    @property
    def K(self) -> int:  # noqa: N802 - the paper's name
        return int(self.labels.shape[1])

    def rows(self, start: int, stop: int) -> Votes:
        """Queries ``start`` to ``stop`` − 1."""
        return Votes(self.labels[start:stop], self.counts[start:stop], self.form, self.classes, self.source)


def _fail(rule: str) -> InvalidParameter:
    return InvalidParameter("votes", rule)


def read_bytes(source: str | Path | BinaryIO) -> tuple[bytes, str]:
    """The bytes of ``source`` (a path, ``-`` for standard input, or a binary stream) and its name."""
    if not isinstance(source, (str, Path)):
        return source.read(), "the votes stream"
    if str(source) == "-":
        return sys.stdin.buffer.read(), "standard input"
    try:
        return Path(source).read_bytes(), repr(str(source))
    except OSError as exc:
        raise _fail(f"cannot read the votes file {str(source)!r}: {exc.strerror or exc}") from None


def _array(data: bytes, name: str) -> tuple[np.ndarray, list[int] | None]:
    """The array that ``data`` holds: .npy, .npz or CSV/TSV text (see the module docstring)."""
    if data.startswith(NPY_MAGIC) or data.startswith(ZIP_MAGIC):
        try:
            loaded = np.load(io.BytesIO(data), allow_pickle=False)
            if isinstance(loaded, np.lib.npyio.NpzFile):
                with loaded:
                    names = list(loaded.files)
                    if "votes" not in names and len(names) != 1:
                        raise _fail(f"the .npz {name} holds {', '.join(names) or 'no array'}: name the votes "
                                    "array 'votes'")
                    loaded = loaded["votes" if "votes" in names else names[0]]
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise _fail(f"cannot read {name} as .npy/.npz: {exc}") from None
        return np.asarray(loaded), None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(f"{name} is neither .npy, .npz nor UTF-8 CSV/TSV text") from None
    return _text_rows(text)


def _text_rows(text: str) -> tuple[np.ndarray, list[int]]:
    """The rows of CSV/TSV ``text`` as a (rows, columns) array of non-negative integers, and the line number
    (1-based, as an editor shows it) of each row."""
    rows: list[list[int]] = []
    lines: list[int] = []
    for number, cells, _ in data_rows(text):
        if rows and len(cells) != len(rows[0]):
            raise _fail(f"row {number} has {len(cells)} values; every row needs as many as the first "
                        f"({len(rows[0])})")
        row = []
        for cell in cells:
            value = _number(cell)
            if value is None or value != int(value) or value < 0:
                raise _fail(f"row {number}: every value must be a non-negative integer (got {cell!r})")
            row.append(int(value))
        rows.append(row)
        lines.append(number)
    if not rows:
        return np.zeros((0, 0), dtype=np.int64), lines
    return np.array(rows, dtype=np.int64), lines


def _row(i: int, lines: list[int] | None) -> str:
    """Row ``i`` as the user finds it: the line of a text file, else the array's index (from 0)."""
    return f"row {lines[i]}" if lines is not None else f"votes[{i}]"


def _integers(arr: np.ndarray, name: str, lines: list[int] | None) -> np.ndarray:
    if arr.ndim != 2:
        raise _fail(f"{name} must be a 2-D array, (N, K) labels or (N, C) counts (got shape {arr.shape})")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise _fail(f"{name} holds no vote rows")
    if arr.dtype == bool:
        arr = arr.astype(np.int64)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise _fail(f"{name} must hold numbers (got dtype {arr.dtype})")
    if np.issubdtype(arr.dtype, np.floating):
        wrong = ~np.isfinite(arr) | (arr != np.round(arr))
        if np.any(wrong):
            bad = np.argwhere(wrong)[0]
            got = float(arr[tuple(bad)])
            raise _fail(f"{_row(int(bad[0]), lines)}: every vote must be an integer (got {got!r})")
    out = arr.astype(np.int64)
    if np.any(out < 0):
        bad = np.argwhere(out < 0)[0]
        raise _fail(f"{_row(int(bad[0]), lines)}: votes cannot be negative (got {int(out[tuple(bad)])})")
    return out


def _one_total(arr: np.ndarray) -> int | None:
    """The row total shared by at least half the rows (counts of K teachers all sum to K; a mistyped count
    row is then named by the check, not read as labels), or None."""
    sums = arr.sum(axis=1)
    totals, seen = np.unique(sums, return_counts=True)
    most = [int(t) for t, n in zip(totals, seen, strict=True) if n == seen.max()]
    best = int(sums[0]) if int(sums[0]) in most else most[0]  # a tie: the first row's total
    return best if 2 * int(seen.max()) >= arr.shape[0] else None


def _infer(arr: np.ndarray, K: int | None, classes: int | None) -> str:
    cols = arr.shape[1]
    total = _one_total(arr)
    if K is not None:
        if cols == K and not (classes == K and total == K):
            return "labels"
        if classes is not None and cols == classes:
            return "counts"
        if classes is None and cols == 2 and total == K:
            return "counts"
        raise _fail(f"has {cols} columns: (N, K = {K}) labels or (N, C = {classes or 2}) counts were expected "
                    "(the table's K and C)")
    if classes is not None:
        return "counts" if cols == classes and total is not None else "labels"
    return "counts" if total is not None and total > cols else "labels"


def votes_from_array(arr: Any, *, K: int | None = None, classes: int | None = None, form: str = "auto",
                     name: str = "the votes", lines: list[int] | None = None) -> Votes:
    """:class:`Votes` of an array (labels or counts, see the module docstring), checked: labels in
    [0, C − 1], every count row summing to K, K and C matching those given."""
    if form not in FORMS:
        raise InvalidParameter("votes-form", f"must be one of {', '.join(FORMS)}", form)
    try:
        raw = np.asarray(arr)
    except (ValueError, TypeError) as exc:
        raise _fail(f"{name} must be a 2-D array of numbers ({exc})") from None
    if raw.size == 0 and K is not None:  # no rows for a table's known K: nothing to answer (a ledger still opens)
        C = classes or 2
        return Votes(np.zeros((0, K), dtype=np.uint8), np.zeros((0, C), dtype=np.int64), "labels", C, name)
    values = _integers(raw, name, lines)
    if form == "auto":
        form = _infer(values, K, classes)
    if form == "counts":
        C = values.shape[1]
        if classes is not None and C != classes:
            raise _fail(f"counts have {C} columns; every row needs C = {classes} (one count per class)")
        if C < 2:
            raise _fail(f"counts have {C} column; C >= 2 classes are needed")
        sums = values.sum(axis=1)
        common = _one_total(values)
        want = K if K is not None else (common if common is not None else int(sums[0]))
        bad = np.flatnonzero(sums != want)
        if bad.size:
            raise _fail(f"{_row(int(bad[0]), lines)}: a count row sums to {int(sums[bad[0]])}; every count row "
                        f"must sum to K = {want} (the number of teachers)")
        if want < 1:
            raise _fail("count rows sum to 0; every query needs K >= 1 teachers' votes")
        labels = np.repeat(np.tile(np.arange(C), (values.shape[0], 1)).ravel(), values.ravel()).reshape(-1, want)
        return Votes(_narrow(labels), values, "counts", C, name)
    if K is not None and values.shape[1] != K:
        raise _fail(f"labels have {values.shape[1]} columns; every row needs K = {K} (the table's K)")
    top = int(values.max())
    C = classes if classes is not None else max(2, top + 1)
    if top > C - 1:
        bad = np.argwhere(values > C - 1)[0]
        raise _fail(f"{_row(int(bad[0]), lines)}: every vote must be a class label, an integer in [0, {C - 1}] "
                    f"(C = {C} classes; got {int(values[tuple(bad)])})")
    counts = np.stack([(values == c).sum(axis=1) for c in range(C)], axis=1)
    return Votes(_narrow(values), counts, "labels", C, name)


def _narrow(labels: np.ndarray) -> np.ndarray:
    return labels.astype(np.uint8 if int(labels.max(initial=0)) < 256 else np.uint16)


def _table_labels(data: bytes, K: int | None, classes: int | None, form: str) -> np.ndarray | None:
    """Text rows of K labels for a table's known K, read by :func:`read_vote_rows` (its messages name the
    line and the table's rule: 0/1 votes, or labels in [0, C − 1]); None for anything else."""
    if K is None or form == "counts" or data.startswith(NPY_MAGIC) or data.startswith(ZIP_MAGIC):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    first = next(data_rows(text), None)
    if first is None:
        return None
    cells = first[1]
    if len(cells) != K or (classes == K and form == "auto"):
        return None
    return read_vote_rows(text, K, None if classes in (None, 2) else classes)


def read_votes(source: str | Path | BinaryIO | Any, *, K: int | None = None, classes: int | None = None,
               form: str = "auto") -> Votes:
    """The votes in ``source``: a path (.npy, .npz, CSV/TSV), ``-`` (standard input), a binary stream, or an
    array (labels or counts); see the module docstring. InvalidParameter naming ``votes`` on any bad input."""
    if isinstance(source, (str, Path)) or hasattr(source, "read"):
        data, name = read_bytes(source)
        labels = _table_labels(data, K, classes, form)
        if labels is not None:
            return votes_from_array(labels, K=K, classes=classes, form="labels", name=name)
        arr, lines = _array(data, name)
        return votes_from_array(arr, K=K, classes=classes, form=form, name=name, lines=lines)
    return votes_from_array(source, K=K, classes=classes, form=form)
