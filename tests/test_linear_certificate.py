"""Constant tables certified by linearity from one sweep of γ ≡ 1 agree with their own sweeps."""

import numpy as np
import pytest

from darrm_opt.certify.certificate import certify
from darrm_opt.certify.linear import best_constant, constant_certificate, constant_certified
from darrm_opt.model.params import Params
from darrm_opt.release.table_file import baseline_tables, certified_decimals

CASES = [Params(11, 3), Params(9, 2.5, epsilon=0.3), Params(7, 2, teacher_delta=0.0, delta=0.0),
         Params(13, 1.5, epsilon=0.05, teacher_delta=1e-3)]


@pytest.mark.parametrize("params", CASES, ids=lambda p: f"K{p.K}-m{p.m:g}-D{p.teacher_delta:g}")
def test_best_constant_is_certified_by_its_own_sweep_and_tight(params):
    unit = certify(params, np.ones(params.K + 1))
    c = best_constant(params, unit)
    assert 0 < c < 1 and constant_certified(params, unit, c)
    own = certify(params, np.full(params.K + 1, c))
    assert own.certified
    assert own.max_privacy_cost == pytest.approx(params.bound, rel=1e-9)  # c* is tight: nothing left
    above = c * (1 + 1e-9)
    assert not constant_certified(params, unit, above)
    assert not certify(params, np.full(params.K + 1, above)).certified


def test_the_reference_best_constant():
    params = Params(11, 3)
    c = best_constant(params, certify(params, np.ones(12)))
    assert c == pytest.approx(0.87202, abs=5e-6)


def test_linear_certificate_matches_the_sweep_for_smaller_constants():
    params = Params(11, 3)
    unit = certify(params, np.ones(12))
    for c in (0.0, 0.1, 0.5, 0.87):
        lin = constant_certificate(params, unit, c)
        own = certify(params, np.full(12, c))
        assert lin.certified and own.certified
        assert lin.max_privacy_cost == pytest.approx(own.max_privacy_cost, rel=1e-9, abs=1e-15)


def test_certified_gamma_one_certifies_every_constant():
    params = Params(5, 4)  # m >= (K+1)/2 with δ = 1 − (1 − Δ)^m: γ ≡ 1 certifies with room to spare
    unit = certify(params, np.ones(6))
    assert unit.certified and best_constant(params, unit) == 1.0
    assert constant_certified(params, unit, 0.3) and not constant_certified(params, unit, 1.5)


def test_printed_constants_use_the_unit_certificate_and_are_rounded_down():
    params = Params(11, 3)
    base = baseline_tables(params)
    for name in ("const", "const_opt"):
        table = base[name]
        assert table and table.unit is not None and table.certificate.certified
        shown, cert = certified_decimals(params, table.gamma, 6, unit=table.unit)
        assert cert.certified and float(shown[0]) <= table.gamma[0]
        assert certify(params, np.array([float(x) for x in shown])).certified
    assert base["const_opt"].gamma[0] == pytest.approx(0.87202, abs=5e-6)
