"""γ tables as they leave the library: certified baselines, certified decimal rounding and table files.

A float64 table that is *provably* tight in exact arithmetic (γ_DSub, γ_Sub at m = 1) can exceed its bound
by ~1e-17 once its entries are rounded to float64; the high-precision check rejects it, rightly. Such a
table is shrunk by the smallest factor that makes its float64 values certify (relative 1e-12 at first,
then more), and the shrink is recorded. Printing rounds *down* to the shown decimals and certifies what
is printed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from darrm_opt.certify.certificate import Certificate, certify, certify_and_separate, certify_many
from darrm_opt.certify.linear import best_constant, constant_certificate, constant_certified
from darrm_opt.certify.rounded import certify_rounded
from darrm_opt.certify.sweep import SweepResult
from darrm_opt.errors import CertificationFailed, InvalidParameter, TableFileError
from darrm_opt.mechanisms import read_document, table_from_document
from darrm_opt.model.baselines import gamma_const, gamma_dsub, gamma_sub
from darrm_opt.model.params import Params


@dataclass(frozen=True)
class ShrunkTable:
    """A table whose float64 values certify: the exact table times ``shrink`` ≤ 1, with its certificate (the
    ``darrm-opt solve`` baselines and :func:`certify_or_shrink`; a release's table is a
    :class:`darrm_opt.privacy.table.CertifiedTable`)."""

    name: str
    gamma: tuple[float, ...]
    certificate: Certificate
    shrink: float = 1.0  #: factor applied to the exact table to make its float64 values certify
    #: for a constant table: the certificate of γ ≡ 1 that certifies it (and its rounded-down prints) by linearity
    unit: Certificate | None = None
    #: the sweep behind ``certificate`` when asked for with ``wide`` (certifies the rounded-down prints)
    sweep: SweepResult | None = None
    #: the certificate of the table rounded down to ``baseline_tables(decimals=...)`` decimals, if computed
    printed: Certificate | None = None


def certify_or_shrink(params: Params, gamma, *, name: str = "gamma", max_tries: int = 6,
                      first: Certificate | None = None, **kwargs) -> ShrunkTable:
    """Certify ``gamma``; if it fails by a relative excess below 1e-6 (float rounding of a tight table),
    scale it down by 1e-12, 1e-10, ... until it certifies. Raises CertificationFailed otherwise. With
    ``wide`` (see :func:`darrm_opt.certify.certificate.certify_and_separate`) the table keeps its sweep.
    ``first``: ``gamma``'s certificate if already computed (its sweep is then not kept)."""
    g = np.asarray(gamma, dtype=np.float64)
    cert, res = (first, None) if first is not None else certify_and_separate(params, g, **kwargs)
    factor = 1.0
    step = 1e-12
    tries = 0
    while not cert.certified:
        excess = (cert.max_privacy_cost - cert.bound) / cert.bound if cert.bound > 0 else math.inf
        if tries >= max_tries or not excess < 1e-6:
            raise CertificationFailed(f"{name} is not (mε, δ)-DP: {cert.reason}", cert)
        factor *= 1.0 - max(step, 2 * excess)
        g = np.asarray(gamma, dtype=np.float64) * factor
        cert, res = certify_and_separate(params, g, **kwargs)
        step *= 100
        tries += 1
    return ShrunkTable(name, tuple(float(x) for x in g), cert, factor,
                          sweep=res if kwargs.get("wide") is not None else None)


@dataclass(frozen=True)
class Unavailable:
    """A baseline that is undefined for these parameters or failed certification, and why. Falsy, so
    ``if base.get(name):`` skips it like a missing table."""

    name: str
    reason: str

    def __bool__(self) -> bool:
        return False


#: The baselines of :func:`baseline_tables`, in display order.
BASELINE_NAMES = ("sub", "dsub", "const", "const_opt")


def _sub_table(params: Params, **kwargs) -> ShrunkTable | Unavailable:
    if not params.m_is_integer:
        return Unavailable("sub", f"γ_Sub needs an integer m (m = {params.m:g})")
    return certify_or_shrink(params, gamma_sub(params.K, params.m), name="γ_Sub", **kwargs)


def _dsub_table(params: Params, **kwargs) -> ShrunkTable | Unavailable:
    if not params.m_is_integer:
        return Unavailable("dsub", f"γ_DSub needs an integer m (m = {params.m:g})")
    if not (params.pure and params.delta == 0):
        return Unavailable("dsub", "γ_DSub is defined for pure DP only (Δ = δ = 0)")
    return certify_or_shrink(params, gamma_dsub(params.K, params.m), name="γ_DSub", **kwargs)


def _constant_tables(params: Params, const: str, delta_prime: float, unit: Certificate | None = None,
                     **kwargs) -> dict[str, ShrunkTable | Unavailable]:
    """γ_const (eq. 16) and γ_const_opt ≡ c* = bound / max f(γ ≡ 1), both certified by linearity from one
    sweep of γ ≡ 1 (:mod:`darrm_opt.certify.linear`); by their own sweep only where that sweep bounds nothing."""
    unit = certify(params, np.ones(params.K + 1), **kwargs) if unit is None else unit
    values: dict[str, Callable[[], float]] = {
        "const": lambda: float(gamma_const(params, const, delta_prime)[0]),
        "const_opt": lambda: best_constant(params, unit),
    }
    out: dict[str, ShrunkTable | Unavailable] = {}
    for name, value in values.items():
        label = "γ_" + name
        try:
            c = value()
            if constant_certified(params, unit, c):
                out[name] = ShrunkTable(label, (c,) * (params.K + 1), constant_certificate(params, unit, c),
                                           unit=unit)
            else:
                out[name] = certify_or_shrink(params, np.full(params.K + 1, c), name=label, **kwargs)
        except (CertificationFailed, InvalidParameter) as exc:
            out[name] = Unavailable(name, str(exc))
    return out


def baseline_tables(params: Params, *, const: str = "simple", delta_prime: float = 0.1, reduce: bool = True,
                    wide: float | None = None, decimals: int | None = None,
                    **kwargs) -> dict[str, ShrunkTable | Unavailable]:
    """Certified γ_Sub, γ_DSub, γ_const (eq. 16) and γ_const_opt (the best certified constant) for ``params``.

    γ_Sub needs an integer m; γ_DSub pure DP (Δ = δ = 0) and an integer m. A baseline that is undefined,
    invalid for these parameters or fails certification is an :class:`Unavailable` with the reason (never
    an exception: a baseline must not sink the main result). Every returned table is certified; all four
    are monotone, so with ``reduce`` their sweeps cover the corners with p ≥ p′ only
    (:mod:`darrm_opt.certify.monotone`: the same maximum, C(K + 4, 4) multisets instead of C(K + 7, 7)).
    ``wide``: γ_Sub and γ_DSub keep their sweeps with the multisets near the bound, from which
    :func:`certified_decimals` certifies their printed decimals (``source``); the constants need none.
    With ``reduce`` γ_Sub, γ_DSub, γ ≡ 1 and (``decimals``) the rounded-down γ_Sub and γ_DSub share one sweep
    (:func:`darrm_opt.certify.certificate.certify_many`); ``ShrunkTable.printed`` holds the latter.
    """
    kwargs["reduce"] = reduce
    shared = _shared_certificates(params, decimals, kwargs)
    out: dict[str, ShrunkTable | Unavailable] = {}
    for name, make in (("sub", _sub_table), ("dsub", _dsub_table)):
        try:
            table = make(params, wide=wide, first=shared.get(name), **kwargs)
            if isinstance(table, ShrunkTable) and table.shrink == 1.0:
                table = replace(table, printed=shared.get(name + "/printed"))
            out[name] = table
        except (CertificationFailed, InvalidParameter) as exc:
            out[name] = Unavailable(name, str(exc))
    out.update(_constant_tables(params, const, delta_prime, unit=shared.get("ones"), **kwargs))
    return out


def _shared_certificates(params: Params, decimals: int | None, kwargs: dict) -> dict[str, Certificate]:
    """Certificates of γ ≡ 1, γ_Sub and γ_DSub where defined, and with ``decimals`` their rounded-down
    copies ("sub/printed", ...), from one shared sweep; {} where the tables are certified one by one."""
    if not kwargs.get("reduce") or kwargs.get("executor") is not None or kwargs.get("method", "auto") != "auto":
        return {}
    tables = {"ones": np.ones(params.K + 1)}
    if params.m_is_integer:
        tables["sub"] = gamma_sub(params.K, params.m)
        if params.pure and params.delta == 0:
            tables["dsub"] = gamma_dsub(params.K, params.m)
    for name in ("sub", "dsub"):
        if decimals is not None and name in tables:
            tables[name + "/printed"] = round_down(tables[name], decimals)
    certs = certify_many(params, list(tables.values()), reduce=True, workers=kwargs.get("workers"),
                         progress=kwargs.get("progress"))
    return dict(zip(tables, certs, strict=True))


def round_down(gamma, decimals: int) -> np.ndarray:
    """Each value rounded down to ``decimals`` decimals (never up): ⌊x·10^d⌋ / 10^d with the floor taken in
    exact rational arithmetic (the float product x·10^d can round up to the next integer, e.g. for the
    float just below 0.05), returned as the float nearest to that decimal, which is ≤ x."""
    g = np.asarray(gamma, dtype=np.float64)
    scale = 10**decimals
    out = [math.floor(Fraction(x) * scale) / scale if math.isfinite(x) else x for x in g.ravel().tolist()]
    return np.array(out, dtype=np.float64).reshape(g.shape)


def certified_decimals(params: Params, gamma, decimals: int = 6, *, unit: Certificate | None = None,
                       reduce: bool = True, source: tuple[Certificate, SweepResult | None] | None = None,
                       printed: Certificate | None = None, **kwargs) -> tuple[list[str], Certificate]:
    """The table as printed with ``decimals`` decimals (rounded down), and the certificate *of the printed
    values*; if rounding down broke a constraint, the table is first scaled down by one unit of the last
    printed decimal (repeatedly) until the printed values certify. A constant table with the certificate
    ``unit`` of γ ≡ 1 is certified by linearity (:mod:`darrm_opt.certify.linear`), without a sweep; a
    monotone one (rounding down keeps γ_Sub monotone) by the reduced sweep of ``reduce``
    (:mod:`darrm_opt.certify.monotone`); any other from ``source``, γ's certificate and the sweep behind it
    with its multisets near the bound (``Solution.sweep`` of ``solve(wide=wide_margin(params, decimals))``),
    where :func:`darrm_opt.certify.rounded.certify_rounded` can decide it. ``printed``: the certificate of
    ``round_down(gamma, decimals)`` if already computed (``ShrunkTable.printed``)."""
    g = np.asarray(gamma, dtype=np.float64)
    if printed is not None and printed.certified:
        return [f"{x:.{decimals}f}" for x in round_down(g, decimals)], printed
    if source is not None and source[1] is not None:
        shown = round_down(g, decimals)
        cert = certify_rounded(params, g, shown, source[0], source[1])
        if cert is not None and cert.certified:
            return [f"{x:.{decimals}f}" for x in shown], cert
    if unit is not None and g.size and np.all(g == g[0]):
        shown = round_down(g, decimals)
        cert = constant_certificate(params, unit, float(shown[0]))
        if cert.certified:
            return [f"{x:.{decimals}f}" for x in shown], cert
    for _ in range(20):
        shown = round_down(g, decimals)
        cert = certify(params, shown, reduce=reduce, **kwargs)
        if cert.certified:
            return [f"{x:.{decimals}f}" for x in shown], cert
        g = g * (1.0 - 10.0**-decimals)
    raise CertificationFailed(f"could not print a certified table with {decimals} decimals", cert)


# ---------------------------------------------------------------------------------------------------------
# Table files (the JSON view of `darrm-opt solve`, or a user's own table)

#: integer literals longer than this cannot be a table value (a float64 holds ~17 significant digits)
MAX_INT_DIGITS = 40


class _HugeInt:
    """An integer literal of more than MAX_INT_DIGITS digits, kept unconverted until the field holding it is
    known (:func:`_refuse_huge_ints`)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _parse_int(text: str) -> int | _HugeInt:
    digits = len(text.lstrip("-"))
    return _HugeInt(digits) if digits > MAX_INT_DIGITS else int(text)


def _huge_int_in(value: object) -> _HugeInt | None:
    """The first _HugeInt anywhere inside ``value`` (lists and objects walked without recursion)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, _HugeInt):
            return v
        if isinstance(v, list):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
    return None


def _refuse_huge_ints(data: object) -> None:
    """TableFileError naming the field (top-level key) that holds an over-long integer literal, and the rule."""
    rule = f"integer literals have at most {MAX_INT_DIGITS} digits (table values are ordinary numbers)"
    if isinstance(data, dict):
        for key, value in data.items():
            huge = _huge_int_in(value)
            if huge is not None:
                raise TableFileError(f"invalid {key}: it holds an integer literal of {huge.digits} digits; {rule}")
        return
    huge = _huge_int_in(data)
    if huge is not None:
        raise TableFileError(f"an integer literal of {huge.digits} digits; {rule}")


def _parse_constant(name: str) -> float:
    raise TableFileError(f"the constant {name}, which JSON does not allow (values must be finite numbers)")


def _read_json(p: Path) -> object:
    """The file's JSON value; TableFileError (one line, naming the problem) for anything unreadable."""
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise TableFileError(f"cannot read table file {str(p)!r}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TableFileError(f"table file {str(p)!r} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset "
                             f"{exc.start} cannot be decoded") from None
    try:
        data = json.loads(text, parse_int=_parse_int, parse_constant=_parse_constant)
    except json.JSONDecodeError as exc:
        raise TableFileError(f"table file {str(p)!r} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except TableFileError as exc:
        raise TableFileError(f"table file {str(p)!r} holds {exc}") from None
    except RecursionError:
        raise TableFileError(f"table file {str(p)!r} nests arrays or objects too deeply") from None
    try:
        _refuse_huge_ints(data)
    except TableFileError as exc:
        raise TableFileError(f"table file {str(p)!r}: {exc}") from None
    return data


def read_table_document(path: str | Path) -> dict:
    """The JSON object of a table file, read as every command reads one (TableFileError, one line, for an
    unreadable file or one that is not an object)."""
    data = _read_json(Path(path))
    if not isinstance(data, dict):
        raise TableFileError(f"table file {str(path)!r} must hold a JSON object")
    return data


_read_document = read_table_document


def load_any_table(path: str | Path):
    """Read a table JSON file of any kind (its ``kind``, or the kind its fields imply): (parameters, γ).
    DaRRM: K, m, epsilon, teacher_delta, delta, gamma; PATE setting (``"teachers": "disjoint-nonprivate"``):
    K, epsilon = the per-answer ε, delta, gamma; multi-class (it states ``classes``): K, classes, teachers,
    target_epsilon, delta, gamma. ``prior`` is optional; every other field is required. Unreadable files
    raise :class:`TableFileError` with one line naming the problem."""
    _, params, gamma = read_document(_read_document(path), f"table file {str(path)!r}")
    return params, gamma


def load_table(path: str | Path) -> tuple[Params, np.ndarray]:
    """Read a DaRRM (shared-data) table file (see :func:`load_any_table`); a table of another kind is
    refused with a TableFileError saying so (the commands that take this table need m and the teachers'
    (ε, Δ))."""
    data = _read_document(path)
    m, params, gamma = read_document(data, f"table file {str(path)!r}")
    if m.kind != "darrm":
        raise TableFileError(f"table file {str(path)!r} is a {m.kind} table for {m.setting(data.get('teachers'))} "
                             f"teachers ({m.summary}); this command takes DaRRM tables of private teachers "
                             "(verify, budget and aggregate take every kind)")
    return params, gamma


def load_multiclass_table(path: str | Path):
    """(MulticlassParams, γ) of a multi-class table file (see :func:`load_any_table`)."""
    m, params, gamma = read_document(_read_document(path), f"table file {str(path)!r}")
    if not m.labels:
        raise TableFileError(f"table file {str(path)!r} is not a multi-class table (it has no 'classes')")
    return params, gamma


def load_certified(path: str | Path, *, profile: bool = True, progress=None):  # noqa: ANN001
    """A table file of any kind certified again (:func:`darrm_opt.mechanisms.table_from_document`): the
    :class:`~darrm_opt.privacy.table.CertifiedTable` with the teachers' setting the file states (its kind's
    default when it states none) and, when ``profile``, its certified privacy profile. The file is read as
    :func:`load_any_table` reads it (every required field, the 40-digit rule); CertificationFailed (exit 1)
    when the table is not private for the parameters it states."""
    return table_from_document(_read_document(path), profile=profile, name=f"table {str(path)!r}",
                               source=f"table file {str(path)!r}", progress=progress)
