"""Vote rows from CSV text as people write them, for ``darrm-opt aggregate`` and any other front end.

One row of K votes per line. Accepted: a delimiter of ``,``, ``;``, tab or runs of spaces (the first data
line decides, every line then uses it); an optional header row (a first line whose cells are all names, not
numbers); lines starting with ``#`` (numpy's ``savetxt`` header) and blank lines, skipped; cells in double
quotes; a UTF-8 byte-order mark; integral floats such as ``1.0`` or ``0e0`` (numpy's default output), read
as the integer they equal. Anything else is :class:`~darrm_opt.errors.InvalidParameter` naming ``votes``,
the line number and the rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import numpy as np

from darrm_opt.errors import InvalidParameter

#: delimiters in the order they are looked for in the first data line; None: runs of whitespace
DELIMITERS: tuple[str | None, ...] = (",", ";", "\t", None)


def _delimiter(line: str) -> str | None:
    return next((d for d in DELIMITERS if d is None or d in line), None)


def _cells(line: str, delimiter: str | None) -> list[str]:
    cells = line.split(delimiter) if delimiter is not None else line.split()
    return [c.strip().strip('"').strip() for c in cells]


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


_NAME = re.compile(r"[^\W\d][\w .\-]*")


def _is_header(cells: list[str]) -> bool:
    return all(_NAME.fullmatch(c) is not None and _number(c) is None for c in cells)


def data_rows(text: str) -> Iterator[tuple[int, list[str], str | None]]:
    """The data rows of CSV/TSV ``text``: (line number, 1-based as an editor shows it; its cells; the delimiter
    read off the first data line, None for whitespace), past a byte-order mark, blank and ``#`` lines and a header
    row."""
    delimiter: str | None = ""
    first = True
    for number, raw in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if delimiter == "":
            delimiter = _delimiter(line)
        cells = _cells(line, delimiter)
        if first:
            first = False
            if _is_header(cells):
                continue
        yield number, cells, delimiter


def read_vote_rows(text: str, K: int, classes: int | None = None) -> np.ndarray:
    """The vote rows of CSV ``text`` as a (rows, K) integer array: each vote 0/1 (``classes`` None) or a
    class label in [0, classes − 1]; errors name the line (1-based, as an editor shows it) and the rule."""
    what = "values" if classes is None else "labels"
    top = 1 if classes is None else classes - 1
    rule = ("every vote must be 0 or 1" if classes is None else
            f"every vote must be a class label, an integer in [0, {top}] (C = {classes} classes)")
    rows: list[list[int]] = []
    for number, cells, delimiter in data_rows(text):
        if len(cells) != K:
            shown = "whitespace" if delimiter is None else repr(delimiter)
            raise InvalidParameter("votes", f"row {number} has {len(cells)} {what}; every row needs K = {K} "
                                   f"(the table's K; delimiter {shown})")
        row = []
        for cell in cells:
            value = _number(cell)
            if value is None or value != int(value) or not 0 <= value <= top:
                raise InvalidParameter("votes", f"row {number}: {rule}", cell)
            row.append(int(value))
        rows.append(row)
    dtype = np.uint8 if top < 256 else np.uint16
    return np.array(rows, dtype=dtype).reshape(len(rows), K)
