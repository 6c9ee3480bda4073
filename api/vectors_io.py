"""Reading the body of a vectors request (``POST /v1/aggregate`` with ``vectors``) in bounded memory, never
with a generic JSON parser on the array.

A generic parser makes one Python object per value and per list (``json.loads`` of a 16 MiB body of
``[[0.1], …]``: +462 MB, kept by the allocator after the request). Here the array is read by byte-level
numpy, block by block (:data:`BLOCK_BYTES`), as :mod:`darrm_opt.api.votes` reads votes:

- the top-level key ``vectors`` (:data:`VECTORS_KEY`) is followed by an array; its bytes are compacted (JSON
  whitespace dropped) up to the ``]`` that closes it, and every byte on the way must be a digit, one of
  ``+-.eE``, ``,``, ``[`` or ``]``, nested at most 3 deep (a deeper array is refused at its 4th ``[``, with no
  recursion);
- with every run of number characters replaced by one ``0``, the bytes must be N copies of the row pattern
  ``[[0,…,0],…,[0,…,0]]`` (K vectors of ``dim`` numbers, the lengths of row 0), checked block by block;
- every run must be a JSON number (read by ``float``, with what it accepts beyond JSON refused per block),
  read as float64;
- the rest of the body, with ``[]`` in place of the array, is at most :data:`REST_LIMIT` bytes and is a JSON
  object of ``table_id``, ``ledger_id``, ``vectors`` and ``idempotency_key`` only.

Memory beyond the body: one compact copy of the array, one copy of its structure (no larger), the values
(8 bytes each, at most ``MAX_VECTOR_VALUES``) and a few blocks of temporaries, all numpy buffers or bytes
freed when the request ends.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter

#: a key ``vectors``: the opening quote is not escaped, so in valid JSON it starts a string outside every other
#: string, and the ``:`` after the closing quote makes that string a key (the text ``vectors`` inside a value,
#: an idempotency key or an id, never matches)
VECTORS_KEY = re.compile(rb'(?<!\\)"vectors"[ \t\n\r]*:[ \t\n\r]*')
#: bytes allowed outside the vectors array
REST_LIMIT = 16 * 1024
BLOCK_BYTES = 1 << 20
FIELDS = ("table_id", "ledger_id", "vectors", "idempotency_key")
SHAPE = "must be an array (rows, K, dim) of numbers (every row K vectors of dim numbers)"

_SPACE = np.zeros(256, dtype=bool)
_SPACE[list(b" \t\n\r")] = True
_NUMBER = np.zeros(256, dtype=bool)
_NUMBER[list(b"0123456789+-.eE")] = True
_ALLOWED = _NUMBER.copy()
_ALLOWED[list(b",[]")] = True
_DEPTH = np.zeros(256, dtype=np.int8)
_DEPTH[ord("[")], _DEPTH[ord("]")] = 1, -1


def is_vectors_request(body: bytes | bytearray) -> bool:
    """Whether an aggregate body has a key ``vectors`` (then it is read here, not as votes)."""
    return VECTORS_KEY.search(body) is not None


def _compact(data: np.ndarray, start: int) -> tuple[int, np.ndarray]:
    """(end, compact): the array opening at ``data[start]`` without whitespace, ``end`` just after its ``]``."""
    out = np.empty(data.size - start, dtype=np.uint8)  # pages are touched only as far as written
    n = depth = 0
    for lo in range(start, data.size, BLOCK_BYTES):
        block = data[lo : lo + BLOCK_BYTES]
        keep = ~_SPACE[block]
        c = block[keep]
        level = depth + np.cumsum(_DEPTH[c], dtype=np.int32)
        closed = np.flatnonzero(level == 0)
        inside = int(closed[0]) + 1 if closed.size else c.size
        if inside and int(level[:inside].max()) > 3:
            raise InvalidParameter("vectors", "is nested too deep: an array (rows, K, dim) has 3 levels")
        if not _ALLOWED[c[:inside]].all():
            raise InvalidParameter("vectors", f"{SHAPE}; JSON numbers only")
        if closed.size:
            hit = inside - 1
            out[n : n + hit + 1] = c[: hit + 1]
            return lo + int(np.flatnonzero(keep)[hit]) + 1, out[: n + hit + 1]
        out[n : n + c.size] = c
        n += c.size
        depth = int(level[-1]) if level.size else depth
    raise InvalidParameter("vectors", f"{SHAPE}; the array is not closed")


def _tokens(compact: np.ndarray) -> np.ndarray:
    """The compact array with every run of number characters replaced by one ``0``, block by block."""
    out = np.empty(compact.size, dtype=np.uint8)
    n = 0
    for lo in range(0, compact.size, BLOCK_BYTES):
        block = compact[lo : lo + BLOCK_BYTES]
        num = _NUMBER[block]
        first = num.copy()
        first[1:] &= ~num[:-1]
        if lo and _NUMBER[compact[lo - 1]]:
            first[0] = False
        keep = ~num | first
        t = block[keep]
        t[first[keep]] = ord("0")
        out[n : n + t.size] = t
        n += t.size
    return out[:n]


def _shape(compact: np.ndarray) -> tuple[int, int, int]:
    """(rows, K, dim) of the compact array, its structure checked (module docstring)."""
    tokens = _tokens(compact)
    head = tokens[: 1 << 23].tobytes()  # row 0: at most 2²¹ values of 2 bytes each
    row_end = head.find(b"]]")
    if not head.startswith(b"[[[") or row_end < 0:
        raise InvalidParameter("vectors", SHAPE)
    row = head[1 : row_end + 2]
    del head
    dim = row[: row.find(b"]")].count(b"0")
    k = row.count(b"[") - 1
    vector = b"[" + b",".join([b"0"] * dim) + b"]"
    pattern = b"[" + b",".join([vector] * k) + b"],"
    if dim < 1 or k < 1 or row + b"," != pattern:
        raise InvalidParameter("vectors", SHAPE)
    width = len(pattern)
    if (tokens.size - 1) % width:  # the rows, with a ',' after the last in place of the closing ']'
        raise InvalidParameter("vectors", SHAPE)
    rows = (tokens.size - 1) // width
    want = np.frombuffer(pattern, dtype=np.uint8)
    body = tokens[1 : 1 + (rows - 1) * width].reshape(rows - 1, width)
    step = max(1, BLOCK_BYTES // width)
    for lo in range(0, rows - 1, step):
        bad = (body[lo : lo + step] != want).any(axis=1)
        if bad.any():
            raise InvalidParameter("vectors", f"{SHAPE}; row {lo + int(np.argmax(bad))} differs from row 0 "
                                   f"(K = {k} vectors of dim = {dim})")
    if tokens[1 + (rows - 1) * width :].tobytes() != pattern[:-1] + b"]":
        raise InvalidParameter("vectors", f"{SHAPE}; row {rows - 1} differs from row 0 (K = {k}, dim = {dim})")
    return rows, k, dim


_NOT_JSON = f"{SHAPE}; every value must be a JSON number"
_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[list(b"0123456789")] = True


def _check_numbers(arr: np.ndarray) -> None:
    """Refuse what float() reads but JSON does not: '+' outside an exponent, '.' without a digit on each side,
    a leading zero (float() refuses every other malformed number)."""
    if not arr.size:
        return
    digit = _DIGIT[arr]
    prev = np.empty_like(arr)
    prev[0], prev[1:] = ord(","), arr[:-1]
    nxt_digit = np.append(digit[1:], False)
    if np.any((arr == ord("+")) & (prev != ord("e")) & (prev != ord("E"))):
        raise InvalidParameter("vectors", _NOT_JSON)
    if np.any((arr == ord(".")) & ~(_DIGIT[prev] & nxt_digit)):
        raise InvalidParameter("vectors", _NOT_JSON)
    start = prev == ord(",")
    signed = np.append(False, (arr[:-1] == ord("-")) & start[:-1])
    if np.any((arr == ord("0")) & (start | signed) & nxt_digit):
        raise InvalidParameter("vectors", _NOT_JSON)


def _values(compact: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` numbers of the compact array as float64, block by block (a number cut by a block's end
    is carried into the next)."""
    out = np.empty(count, dtype=np.float64)
    n = 0
    carry = b""
    for lo in range(0, compact.size, BLOCK_BYTES):
        text = compact[lo : lo + BLOCK_BYTES].copy()
        text[~_NUMBER[text]] = ord(",")
        piece = carry + text.tobytes()
        del text
        cut = piece.rfind(b",")
        piece, carry = piece[: cut + 1], piece[cut + 1 :]
        _check_numbers(np.frombuffer(piece, dtype=np.uint8))
        tokens = [t for t in piece.split(b",") if t]
        if n + len(tokens) > count:
            raise InvalidParameter("vectors", SHAPE)
        try:
            out[n : n + len(tokens)] = np.fromiter(map(float, tokens), dtype=np.float64, count=len(tokens))
        except ValueError:
            raise InvalidParameter("vectors", _NOT_JSON) from None
        n += len(tokens)
    if carry or n != count:
        raise InvalidParameter("vectors", SHAPE)
    return out


def parse(body: bytes | bytearray, max_values: int) -> tuple[str, str, str | None, np.ndarray]:
    """(table_id, ledger_id, idempotency_key, vectors (rows, K, dim) float64) of a vectors body; raises
    InvalidParameter naming the field. More than ``max_values`` values are refused before they are read."""
    head = VECTORS_KEY.search(body)
    if head is None:
        raise InvalidParameter("vectors", "missing")
    start = head.end()
    if start >= len(body) or body[start] != ord("["):
        raise InvalidParameter("vectors", SHAPE)
    data = np.frombuffer(body, dtype=np.uint8)
    end, compact = _compact(data, start)
    doc = _rest(body, start, end)
    rows, k, dim = _shape(compact)
    if rows * k * dim > max_values:
        raise InvalidParameter("vectors", f"at most {max_values} values (rows × K × dim) per request")
    values = _values(compact, rows * k * dim)
    return doc["table_id"], doc["ledger_id"], doc.get("idempotency_key"), values.reshape(rows, k, dim)


def _rest(body: bytes | bytearray, start: int, end: int) -> dict[str, Any]:
    if start + len(body) - end > REST_LIMIT:
        raise InvalidParameter("body", f"the fields other than vectors take at most {REST_LIMIT} bytes")
    try:
        doc = json.loads(bytes(body[:start]) + b"[]" + bytes(body[end:]))
    except (ValueError, UnicodeDecodeError):
        raise InvalidParameter("body", "is not valid JSON text") from None
    except RecursionError:
        raise InvalidParameter("body", "is nested too deep") from None
    if not isinstance(doc, dict) or doc.get("vectors") != []:
        raise InvalidParameter("body", "must be a JSON object with the key vectors once")
    extra = set(doc) - set(FIELDS)
    if extra:
        raise InvalidParameter(sorted(extra)[0], f"is not a field of a vectors request ({', '.join(FIELDS)})")
    for name in ("table_id", "ledger_id"):
        if not isinstance(doc.get(name), str) or not doc[name]:
            raise InvalidParameter(name, "must be a non-empty string")
    key = doc.get("idempotency_key")
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= 200 or not key.isprintable()):
        raise InvalidParameter("idempotency_key", "must be a string of 1 to 200 printable characters")
    return doc
