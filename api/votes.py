"""Reading the body of ``POST /v1/aggregate`` fast and in bounded memory, never with a generic parser on
a large body.

A generic JSON parser holds every value of the body at once (pydantic: ~16 bytes per vote; with an error
per invalid vote, ~1.7 kB each: 10⁵ invalid rows took 35 s and 1.9 GB). So:

- bodies up to :data:`SMALL_BODY` bytes are validated by pydantic (the error names field and row; the
  vote lists stop at their first error, ``fail_fast``);
- larger bodies are read by byte-level numpy: the ``votes`` key must come within the first
  :data:`REST_LIMIT` bytes; the array after it is compacted (JSON whitespace dropped) block by block up to
  its end (the first ``]`` followed, after whitespace, by ``]``), its rows counted on the way (more than
  ``max_rows`` → 422 at once); the compact bytes must be n copies of the pattern ``[d,d,…,d],``
  (d ∈ {0, 1}, one length), checked block by block; or else (class labels of a multi-class table) the
  same pattern once every run of digits (1 to 3, no leading zero) is replaced by one ``0``, the values read
  off the runs, and no whitespace between two digits in the body (compaction would join them); the rest of
  the body, with ``[]`` in place of the array, must be at most :data:`REST_LIMIT` bytes and validate as the
  request model with ``votes == []``.

A body is accepted only through pydantic or through both checks of the numpy path, so the array was the
top-level ``votes`` value and nothing else is wrong or extra. A large body in another layout (an escaped
key, ``-0``) is refused with a message saying which layout is read. Memory beyond the body: one compact
copy of the array, one byte per vote and one block of temporaries. Callers run :func:`parse` on a worker
thread, and every step over the whole body is numpy work on blocks of :data:`BLOCK_BYTES`, so the event
loop's thread gets the GIL back within milliseconds. Votes are never logged.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .schemas import Id, PlainText, RecordId

_HEAD = re.compile(rb'"votes"\s{0,1024}:\s{0,1024}\[')
#: bodies up to this size are validated by pydantic; larger ones only by the numpy path
SMALL_BODY = 16 * 1024
#: bytes allowed outside the votes array in a large body (ids, key, punctuation, indentation: < 2 kB)
REST_LIMIT = 16 * 1024
#: rows checked per numpy block (bounds the temporaries)
BLOCK_BYTES = 1 << 20
_SPACES = tuple(b" \t\n\r")  # JSON whitespace, exactly (a control character is not dropped: invalid)
_OPEN, _CLOSE = ord("["), ord("]")
LAYOUT = ('a body over 16 KiB is read only in the plain layout: a top-level "votes" key followed by '
          'an array of rows of 0/1 numbers or class labels ([[0,1,...],...]; JSON whitespace allowed)')

#: a vote: 0/1 for a binary table, a class label 0..C−1 for a multi-class one (checked against the table's
#: C once it is known; C ≤ 1000)
Vote = Annotated[int, Field(strict=True, ge=0, le=999)]
#: the most digits of a label (C ≤ 1000)
LABEL_DIGITS = 3


class InvalidBody(ValueError):
    """A 422 with ``detail`` in FastAPI's validation shape (locations start with "body")."""

    def __init__(self, detail: list[dict[str, Any]]) -> None:
        super().__init__(detail[0]["msg"] if detail else "invalid body")
        self.detail = detail


def _invalid(*loc: str | int, msg: str, type_: str = "value_error") -> InvalidBody:
    return InvalidBody([{"loc": ["body", *loc], "msg": msg, "type": type_}])


class AggregateRequest(BaseModel):
    """One batch of vote rows to answer and pay for."""

    model_config = ConfigDict(extra="forbid", strict=True)

    table_id: Id = Field(..., description="id of a certified table")
    ledger_id: Id = Field(..., description="id of the ledger that pays")
    votes: list[Annotated[list[Vote], Field(fail_fast=True)]] = Field(
        ..., min_length=1, fail_fast=True,
        description="rows of K teacher votes (K of the table): each 0 or 1 for a binary table, a class label "
                    "0..C-1 for a multi-class one"
    )
    idempotency_key: PlainText | None = Field(
        None, min_length=1, max_length=200,
        description="repeating a key on the same ledger returns the stored answers and spends nothing",
    )
    records: list[RecordId] | None = Field(
        None, min_length=1, description="the client's record id of each row (1 to 200 printable characters, or "
        "an integer): a row whose record the ledger answered before gets that answer again at no cost; a record "
        "named twice is answered and paid once",
    )


class _Rest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    table_id: Id
    ledger_id: Id
    votes: list[Any] = Field(..., max_length=0)
    idempotency_key: PlainText | None = Field(None, min_length=1, max_length=200)
    records: list[RecordId] | None = Field(None, min_length=1)


#: bytes a record id may take in a large body beyond REST_LIMIT (200 characters, each at most a 6-byte
#: escape, with its quotes and comma)
RECORD_BYTES = 6 * 200 + 3


def _first_bad_row(rows: np.ndarray, pattern: np.ndarray, mask: np.ndarray) -> int | None:
    """Index of the first row of ``rows`` (n, width) that differs from ``pattern`` on ``mask``; block-wise."""
    block = max(1, BLOCK_BYTES // rows.shape[1])
    for lo in range(0, rows.shape[0], block):
        bad = ((rows[lo : lo + block] ^ pattern) & mask).any(axis=1)
        if bad.any():
            return lo + int(np.argmax(bad))
    return None


def _votes(compact: np.ndarray) -> np.ndarray:
    """The (rows, k) votes of ``compact`` = the array's inside without whitespace, plus ',': 0/1 votes
    (uint8, :func:`_binary_votes`) or else class labels (uint16, :func:`_labels`); the 0/1 reading's
    error when neither reads it."""
    try:
        return _binary_votes(compact)
    except InvalidBody:
        labels = _labels(compact)
        if labels is None:
            raise
        return labels


def _binary_votes(compact: np.ndarray) -> np.ndarray:
    """The (rows, k) uint8 0/1 votes of ``compact`` = the array's inside without whitespace, plus ','.

    n rows of k votes are exactly n copies of the (2k + 2)-byte pattern ``[d,d,…,d],``, so the grammar is a
    comparison of an (n, 2k + 2) byte matrix with that pattern. Whitespace removal cannot turn invalid JSON
    into a match: it could only join two digits, and the pattern never has two digits side by side."""
    closes = np.flatnonzero(compact[: min(compact.size, 1 << 16)] == _CLOSE)
    close = int(closes[0]) if closes.size else -1
    if close < 2 or close % 2 or compact[0] != _OPEN:
        raise _invalid("votes", 0, msg="each row must be a non-empty list of votes, each 0 or 1 (or a class "
                       "label for a multi-class table)")
    k = close // 2
    width = close + 2
    whole = compact.size // width
    rows = compact[: whole * width].reshape(whole, width)
    pattern = np.frombuffer(b"[" + b",".join([b"0"] * k) + b"],", dtype=np.uint8)
    mask = np.full(width, 0xFF, dtype=np.uint8)
    mask[1 : 2 * k : 2] = 0xFE  # digit columns: '0' or '1'
    bad = _first_bad_row(rows, pattern, mask)
    if bad is None and compact.size % width:
        bad = whole
    if bad is not None:
        raise _invalid("votes", bad, msg=f"must be a list of {k} votes (the length of row 0), each 0 or 1 (or, "
                       "for a multi-class table, a class label: an integer without leading zeros)")
    return rows[:, 1 : 2 * k : 2] & 1


def _labels(compact: np.ndarray) -> np.ndarray | None:
    """The (rows, k) uint16 class labels of ``compact`` (as :func:`_votes`), or None when it is not n rows
    of k integers of 1 to :data:`LABEL_DIGITS` digits without leading zeros.

    Each run of digits is one integer; with every run replaced by the one byte '0' the bytes must be the
    0/1 rows' pattern ``[0,0,…,0],`` (checked by :func:`_votes`); the values are read off the runs."""
    digit = (compact >= ord("0")) & (compact <= ord("9"))
    start = digit.copy()
    start[1:] &= ~digit[:-1]
    starts = np.flatnonzero(start)
    if starts.size == 0:
        return None
    ends = np.flatnonzero(digit & ~np.append(digit[1:], False))
    length = ends - starts + 1
    if length.max() > LABEL_DIGITS or np.any((length > 1) & (compact[starts] == ord("0"))):
        return None
    tokens = compact.copy()
    tokens[starts] = ord("0")
    try:
        shape = _binary_votes(tokens[~digit | start]).shape  # the structure, with every integer as 0
    except InvalidBody:
        return None
    values = np.zeros(starts.size, dtype=np.uint16)
    for d in range(LABEL_DIGITS):
        more = length > d
        values[more] = values[more] * 10 + (compact[starts[more] + d] - ord("0"))
    return values.reshape(shape)


def _compact_array(data: np.ndarray, start: int, max_rows: int) -> tuple[int, np.ndarray]:
    """(end, compact) for the array opening at ``data[start]``: ``end`` just after its closing ``]`` (the
    first ``]`` whose previous non-whitespace byte is ``]``), ``compact`` its inside without whitespace
    plus ``,``. Block by block; refuses more than ``max_rows`` rows as soon as it has seen them."""
    out = np.empty(data.size - start, dtype=np.uint8)  # pages are touched only as far as written
    n = opened = 0
    prev_close = False
    for lo in range(start + 1, data.size, BLOCK_BYTES):
        block = data[lo : lo + BLOCK_BYTES]
        keep = block != _SPACES[0]  # ufunc compares: vectorised, and numpy releases the GIL in them
        for sp in _SPACES[1:]:
            keep &= block != sp
        c = block[keep]
        closes = c == _CLOSE
        pair = closes.copy()
        pair[1:] &= closes[:-1]
        if c.size:
            pair[0] &= prev_close
            prev_close = bool(closes[-1])
        hit = int(np.argmax(pair)) if pair.any() else -1
        opened += int(np.count_nonzero(c[: hit if hit >= 0 else c.size] == _OPEN))
        if opened > max_rows:
            raise _invalid("votes", msg=f"at most {max_rows} rows per request (DARRM_MAX_ROWS)")
        if hit >= 0:
            out[n : n + hit] = c[:hit]
            out[n + hit] = ord(",")
            return lo + int(np.flatnonzero(keep)[hit]) + 1, out[: n + hit + 1]
        out[n : n + c.size] = c
        n += c.size
    raise _invalid("votes", msg=f"must be a non-empty array of rows; {LAYOUT}")


def _rest(body: bytes | bytearray, start: int, end: int, rows: int = 0) -> _Rest:
    if start + len(body) - end > REST_LIMIT + RECORD_BYTES * rows:
        raise _invalid(msg=f"the fields other than votes take at most {REST_LIMIT} bytes; {LAYOUT}")
    try:
        return _Rest.model_validate_json(body[:start] + b"[]" + body[end:])
    except ValidationError as exc:
        errors = [e for e in exc.errors() if tuple(e.get("loc", ())) != ("votes",)]
        if not errors:
            raise _invalid(msg=LAYOUT) from None
        raise InvalidBody([{"loc": ["body", *e.get("loc", ())], "msg": str(e.get("msg", "invalid")),
                            "type": str(e.get("type", "value_error"))} for e in errors[:20]]) from None


def parse_large(body: bytes | bytearray, max_rows: int) -> tuple[_Rest, np.ndarray]:
    """The numpy path (module docstring); raises :class:`InvalidBody` naming the field (and row)."""
    head = _HEAD.search(body, 0, REST_LIMIT)
    if head is None:
        raise _invalid("votes", msg=f"missing in the first {REST_LIMIT} bytes; {LAYOUT}")
    start = head.end() - 1
    data = np.frombuffer(body, dtype=np.uint8)
    end, compact = _compact_array(data, start, max_rows)
    rest = _rest(body, start, end, int(np.count_nonzero(compact == _OPEN)))
    votes = _votes(compact)
    if votes.dtype != np.uint8 and _split_number(data, start, end):
        raise _invalid("votes", msg=f"whitespace between two digits (a label must be one JSON number); {LAYOUT}")
    return rest, votes


def _split_number(data: np.ndarray, start: int, end: int) -> bool:
    """Whether JSON whitespace separates two digits anywhere in ``data[start:end]``, block by block."""
    prev_digit, prev_pos = False, -2
    for lo in range(start, end, BLOCK_BYTES):
        block = data[lo : min(lo + BLOCK_BYTES, end)]
        keep = block != _SPACES[0]
        for sp in _SPACES[1:]:
            keep &= block != sp
        idx = np.flatnonzero(keep)
        if not idx.size:
            continue
        c = block[idx]
        digit = (c >= ord("0")) & (c <= ord("9"))
        pos = idx + lo
        if digit[0] and prev_digit and pos[0] - prev_pos > 1:
            return True
        if np.any(digit[1:] & digit[:-1] & (np.diff(pos) > 1)):
            return True
        prev_digit, prev_pos = bool(digit[-1]), int(pos[-1])
    return False


def parse_fast(body: bytes | bytearray) -> tuple[_Rest, np.ndarray] | None:
    """The numpy path at any size, without a row limit: (rest, votes), or None where it refuses."""
    try:
        return parse_large(body, max_rows=len(body))
    except InvalidBody:
        return None


class Parsed(NamedTuple):
    table_id: str
    ledger_id: str
    idempotency_key: str | None
    votes: np.ndarray | list[list[int]]
    #: the client's record id of each row as text, or None; one per row (else a 422 naming records)
    records: list[str] | None


def _records(records: list[int | str] | None, rows: int) -> list[str] | None:
    if records is None:
        return None
    if len(records) != rows:
        raise _invalid("records", msg=f"one record id per row: {len(records)} ids for {rows} rows")
    return [str(r) for r in records]


def parse(body: bytes | bytearray, max_rows: int) -> Parsed:
    """(table_id, ledger_id, idempotency_key, votes, records) of an aggregate body; raises ValidationError
    (small bodies, pydantic's) or :class:`InvalidBody`. Rows beyond ``max_rows`` are refused (422 naming votes).

    ``votes`` is a (rows, K) uint8 array (large bodies) or the validated lists (small bodies)."""
    if len(body) > SMALL_BODY:
        rest, votes = parse_large(body, max_rows)
        return Parsed(rest.table_id, rest.ledger_id, rest.idempotency_key, votes,
                      _records(rest.records, votes.shape[0]))
    req = AggregateRequest.model_validate_json(body)
    if len(req.votes) > max_rows:
        raise _invalid("votes", msg=f"at most {max_rows} rows per request (DARRM_MAX_ROWS)")
    return Parsed(req.table_id, req.ledger_id, req.idempotency_key, req.votes, _records(req.records, len(req.votes)))


def check_labels(votes: np.ndarray | list[list[int]], K: int, classes: int | None) -> tuple[int, str] | None:
    """(row, message) of the first row that is not K votes of the table (0/1 for a binary table,
    ``classes`` None; class labels below C for a multi-class one), None when every row is."""
    top = 1 if classes is None else classes - 1
    rule = "every vote must be 0 or 1 (a binary table)" if classes is None else \
        f"every vote must be a class label, an integer in [0, {top}] (C = {classes} classes)"
    if isinstance(votes, list):
        for i, row in enumerate(votes):
            if len(row) != K:
                return i, f"every row must have K = {K} votes"
            if max(row) > top:
                return i, rule
        return None
    if votes.shape[1] != K:
        return 0, f"every row must have K = {K} votes"
    over = np.flatnonzero((votes > top).any(axis=1)) if votes.size else np.zeros(0, dtype=np.int64)
    return (int(over[0]), rule) if over.size else None


def render_answers(answers: np.ndarray) -> bytes:
    """``0,1,…`` for an array of answers (0/1, or class labels; the inside of a JSON list); answers of one
    digit without a Python list."""
    n = answers.shape[0]
    if n and int(answers.max()) > 9:
        return ",".join(map(str, answers.tolist())).encode()
    if n <= 64:
        return b",".join(b"%d" % a for a in answers.tolist())
    out = np.empty(2 * n - 1, dtype=np.uint8)
    out[0::2] = answers + ord("0")
    out[1::2] = ord(",")
    return out.tobytes()
