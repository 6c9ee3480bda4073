"""Printing γ: decimals are rounded down, never to nearest, and what is printed is what is certified.

The two reference tables are the lazy-mode optima of the paper's setting (ε = 0.1, Δ = 1e-5,
δ = 1 − (1 − Δ)^m) at full float64 precision, so these tests do not depend on the optimiser.
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_FLOOR, Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darrm_opt.certify.certificate import certify
from darrm_opt.errors import CertificationFailed, InvalidParameter, TableFileError
from darrm_opt.model.baselines import gamma_const, gamma_dsub, gamma_sub
from darrm_opt.model.params import Params
from darrm_opt.release.table_file import (
    ShrunkTable,
    baseline_tables,
    certified_decimals,
    certify_or_shrink,
    load_table,
    round_down,
)

_H11 = [1.0, 0.9776955140495998, 1.0, 1.0, 0.5423403112364152, 0.9392407012997918]
G11 = np.array(_H11 + _H11[::-1])  # K = 11, m = 3 (README worked example)
_H13 = [1.0, 0.9677929439511481, 1.0, 1.0, 0.8394459495138967, 0.50354301086225, 0.9996863925481]
G13 = np.array(_H13 + _H13[::-1])  # K = 13, m = 3 (notes: 5 nearest decimals break the bound by 1.25e-6)


def decimal_floor(x: float, d: int) -> str:
    """The exact binary value of x rounded toward −∞ to d decimals, by the decimal module."""
    return f"{Decimal(x).quantize(Decimal(1).scaleb(-d), rounding=ROUND_FLOOR):.{d}f}"


def test_round_down_known_values():
    got = round_down([0.123456789, 0.9999999, 1.0, 0.0, 0.5, 0.96779294], 3)
    assert got.tolist() == [0.123, 0.999, 1.0, 0.0, 0.5, 0.967]
    assert round_down([0.9392407012997918], 6).tolist() == [0.93924]  # nearest would give 0.939241
    assert round_down([0.9776955140495998], 5).tolist() == [0.97769]  # nearest would give 0.97770
    assert round_down([0.99999999], 0).tolist() == [0.0]
    assert round_down(np.array([[0.25, 0.75]]), 1).shape == (1, 2)


@pytest.mark.parametrize("d", [1, 2, 3, 6])
def test_never_rounds_up_just_below_a_decimal(d):
    """The float just below k/10^d times 10^d rounds (in float64) to the integer k: a float floor would
    print k/10^d, above the value. The exact floor prints (k − 1)/10^d."""
    for k in range(1, 10**min(d, 3) + 1):
        x = math.nextafter(k / 10**d, 0.0)
        if Fraction(x) >= Fraction(k, 10**d):
            continue  # k/10^d rounded down to a float already
        r = round_down([x], d)[0]
        assert Fraction(r) <= Fraction(x), (k, d)
        assert f"{r:.{d}f}" == decimal_floor(x, d)


@settings(max_examples=300, deadline=None)
@given(x=st.floats(0.0, 1.0), d=st.integers(0, 9))
def test_round_down_is_the_exact_decimal_floor(x, d):
    r = float(round_down([x], d)[0])
    text = f"{r:.{d}f}"
    assert text == decimal_floor(x, d)
    assert float(text) == r  # the printed string parses back to the certified float
    assert Fraction(r) <= Fraction(x)
    # r is the float nearest the decimal floor (never above x); it can sit half an ulp (≤ 2^-54 on [0, 1]) below it
    assert Fraction(x) - Fraction(r) < Fraction(1, 10**d) + Fraction(1, 2**54)


def test_k11_m3_printed_to_six_decimals_as_in_the_readme():
    params = Params(11, 3)
    shown, cert = certified_decimals(params, G11, 6)
    assert shown[:6] == ["1.000000", "0.977695", "1.000000", "1.000000", "0.542340", "0.939240"]
    assert shown == shown[::-1]
    assert cert.certified and cert.bound == params.bound
    assert cert.max_privacy_cost == pytest.approx(0.3499187407, abs=1e-10)
    # what is certified is exactly what is printed: parse the strings back (as a user would) and re-certify
    parsed = [float(s) for s in json.loads(json.dumps(shown))]
    again = certify(params, parsed)
    assert again.certified and again.max_privacy_cost == cert.max_privacy_cost
    # rounding to nearest would print 0.939241 and break the bound
    nearest = certify(params, np.round(G11, 6))
    assert not nearest.certified
    assert nearest.max_privacy_cost - nearest.bound == pytest.approx(6.32e-8, rel=1e-2)


def test_k13_m3_five_decimals_nearest_breaks_the_bound_rounded_down_certifies():
    params = Params(13, 3)
    nearest = certify(params, np.round(G13, 5))
    assert not nearest.certified
    assert nearest.max_privacy_cost - nearest.bound == pytest.approx(1.25e-6, rel=3e-3)  # the notes' figure
    shown, cert = certified_decimals(params, G13, 5)
    assert shown[:7] == ["1.00000", "0.96779", "1.00000", "1.00000", "0.83944", "0.50354", "0.99968"]
    assert shown == shown[::-1]
    assert cert.certified
    assert certify(params, [float(s) for s in shown]).certified
    assert all(float(s) <= g for s, g in zip(shown, G13))
    assert any(float(s) < float(f"{g:.5f}") for s, g in zip(shown, G13))  # some value differs from nearest


def test_a_table_over_the_bound_is_scaled_by_one_unit_of_the_last_decimal_until_it_certifies():
    params = Params(11, 3)
    over = np.minimum(G11 * (1 + 2e-5), 1.0)  # round-down alone cannot repair 2e-5 relative
    assert not certify(params, round_down(over, 6)).certified
    shown, cert = certified_decimals(params, over, 6)
    assert cert.certified
    # the first of g·(1 − 1e-6)^k, k = 1, 2, ..., whose rounded-down values certify
    g, k = over, 0
    while not certify(params, round_down(g, 6)).certified:
        g, k = g * (1.0 - 1e-6), k + 1
    assert k >= 2
    assert shown == [f"{x:.6f}" for x in round_down(g, 6)]
    assert float(shown[5]) < round_down(over, 6)[5]


def test_a_table_far_over_the_bound_is_refused():
    with pytest.raises(CertificationFailed, match="6 decimals") as info:
        certified_decimals(Params(11, 3), np.ones(12), 6)
    assert info.value.certificate is not None and not info.value.certificate.certified


def test_certify_or_shrink_keeps_a_certified_table_and_refuses_a_violating_one():
    params = Params(11, 3)
    table = certify_or_shrink(params, G11, name="γ_opt")
    assert table.shrink == 1.0 and table.gamma == tuple(G11) and table.certificate.certified
    assert table.name == "γ_opt"
    with pytest.raises(CertificationFailed, match="γ_bad is not"):
        certify_or_shrink(params, np.ones(12), name="γ_bad")


def test_certify_or_shrink_repairs_a_float_rounded_tight_table():
    """γ_DSub (Thm 4.1) is exactly tight; its float64 values can exceed the bound by ~1e-17 and are
    shrunk by a tiny recorded factor, which is then certified."""
    params = Params(11, 3, teacher_delta=0.0, delta=0.0)
    exact = gamma_dsub(11, 3)
    table = certify_or_shrink(params, exact)
    assert table.certificate.certified
    assert 1 - 1e-9 < table.shrink <= 1.0
    np.testing.assert_array_equal(np.array(table.gamma), np.asarray(exact) * table.shrink)
    if table.shrink < 1.0:
        assert not certify(params, exact).certified


def test_load_table_round_trip_and_errors(tmp_path):
    f = tmp_path / "t.json"
    ref = Params(11, 3)
    f.write_text(json.dumps({"K": 11, "m": 3, "epsilon": 0.1, "teacher_delta": 1e-5, "delta": ref.delta,
                             "gamma": G11.tolist()}))
    params, gamma = load_table(f)
    assert params == ref and gamma.tolist() == G11.tolist()
    f.write_text(json.dumps({"K": 5, "m": 2, "epsilon": 0.2, "teacher_delta": 0.0, "delta": 0.01,
                             "prior": "iid-uniform:0.7,1", "gamma": [1, 1, 1, 1, 1, 1]}))
    params, _ = load_table(f)
    assert (params.epsilon, params.teacher_delta, params.delta) == (0.2, 0.0, 0.01)
    assert (params.prior.kind, params.prior.a, params.prior.b) == ("iid-uniform", 0.7, 1.0)
    for text, match in [("[1]", "JSON object"), ("{", "not valid JSON"), ('{"K": 3}', "lacks field")]:
        f.write_text(text)
        with pytest.raises(TableFileError, match=match):
            load_table(f)
    f.write_text(json.dumps({"K": 3, "m": 1, "epsilon": 0.1, "teacher_delta": 0.0, "delta": 0.0,
                             "gamma": [1, True, 1, 1]}))
    with pytest.raises(InvalidParameter, match="gamma"):
        load_table(f)
    missing = tmp_path / "missing.json"
    with pytest.raises(TableFileError) as info:
        load_table(missing)
    assert str(info.value) == f"cannot read table file {str(missing)!r}: No such file or directory"


def test_default_is_six_decimals_and_tables_are_frozen():
    shown, _ = certified_decimals(Params(11, 3), G11)
    assert shown[1] == "0.977695"
    table = ShrunkTable("t", (1.0, 1.0), certify(Params(1, 1), [1.0, 1.0]))
    assert table.shrink == 1.0
    with pytest.raises(AttributeError):
        table.shrink = 0.5  # type: ignore[misc]


def test_baseline_tables_where_defined():
    t = baseline_tables(Params(11, 3))
    assert not t["dsub"]  # Δ > 0 (None, or a falsy "unavailable" marker)
    assert t["sub"].gamma == tuple(gamma_sub(11, 3)) and t["sub"].name == "γ_Sub"
    assert t["const"].gamma == tuple(gamma_const(Params(11, 3))) and t["const"].name == "γ_const"
    pure = baseline_tables(Params(11, 3, teacher_delta=0.0, delta=0.0))
    assert pure["dsub"].name == "γ_DSub" and pure["dsub"].certificate.certified
    frac = baseline_tables(Params(11, 2.5))
    assert not frac["sub"] and not frac["dsub"] and frac["const"].certificate.certified
    pure_delta = baseline_tables(Params(11, 3, teacher_delta=0.0, delta=1e-3))
    assert not pure_delta["dsub"]  # DSub is offered for δ = 0 only
    general = baseline_tables(Params(11, 3), const="general")  # δ′ = 0.1 by default
    assert general["const"].gamma == tuple(gamma_const(Params(11, 3), "general", 0.1))
    assert general["const"].gamma[0] > t["const"].gamma[0]  # Thm 2.3 composes tighter than simple


@pytest.mark.parametrize("Delta", [1e-5, 0.01, 0.05, 0.2])
def test_simple_const_baseline_accounts_for_the_teachers_delta(Delta):
    """Simple composition makes the majority (Kε, 1 − (1 − Δ)^K)-DP, so λ = 1 − (1 − Δ)^K in eq. 16
    (with λ = 0 the table at Δ = 0.05 broke the bound by 0.047 and baseline_tables raised)."""
    params = Params(5, 3, teacher_delta=Delta, delta=Delta)
    Em, Et = math.exp(0.3), math.exp(0.5)
    lam = 1 - (1 - Delta) ** 5
    expected = (Em - 1 + 2 * Delta) / (2 * (Et - Em + (1 + Em) * lam) / (Et + 1) + Em - 1)
    assert gamma_const(params)[0] == pytest.approx(expected, rel=1e-12)
    t = baseline_tables(params)
    assert t["const"].certificate.certified and t["const"].shrink == 1.0


def test_certify_or_shrink_scales_by_twice_the_relative_excess():
    """A table over its bound by a relative excess e in (1e-12, 1e-6) is scaled once by 1 − 2e (f is linear
    in γ, so the cost drops below the bound); with max_tries = 0 it is refused instead."""
    params = Params(11, 3)
    over = np.minimum(G11 * (1 + 2e-7), 1.0)
    first = certify(params, over)
    excess = (first.max_privacy_cost - first.bound) / first.bound
    assert not first.certified and 1e-12 < excess < 1e-6
    table = certify_or_shrink(params, over)
    assert table.shrink == 1.0 - 2 * excess
    assert table.gamma == tuple(over * table.shrink) and table.certificate.certified
    assert table.certificate.max_privacy_cost == pytest.approx(first.max_privacy_cost * table.shrink, rel=1e-12)
    with pytest.raises(CertificationFailed, match="is not"):
        certify_or_shrink(params, over, max_tries=0)
    assert certify_or_shrink(params, over, max_tries=1).shrink == table.shrink  # one try is enough
    with pytest.raises(CertificationFailed):  # 2e-6 relative is a violation, not float rounding
        certify_or_shrink(params, np.minimum(G11 * (1 + 4e-6), 1.0))
