"""The multi-slope sweep behind privacy profiles: the structured and the matrix sweep agree, slope by slope,
with each other and with the certificate's single-slope sweep (both paths run whatever K selects)."""

import math

import numpy as np
import pytest

from darrm_opt.certify.problems import make_problem
from darrm_opt.certify.slopes import sweep_slopes
from darrm_opt.certify.sweep import signed_h, sweep
from darrm_opt.model.baselines import gamma_sub
from darrm_opt.model.corners import corners
from darrm_opt.model.params import Params

XS = [1.0, 1.05, math.exp(0.3), 2.0, 5.0, 40.0]


@pytest.mark.parametrize("K,asym", [(9, False), (11, True), (13, False)])
def test_structured_and_matrix_multi_slope_sweeps_agree(K, asym):
    params = Params(K, 3, 0.1, 1e-5)
    g = gamma_sub(K, 3).astype(float)
    if asym:
        g = g * np.linspace(0.7, 1.0, K + 1)  # a non-symmetric γ: both signs are swept
    h = signed_h(g)
    C = corners(params)
    res = {m: sweep_slopes(make_problem(C, h, 1.0, m), XS, workers=2, two_sided=True)
           for m in ("structured", "matrix")}
    np.testing.assert_allclose(res["structured"].best, res["matrix"].best, rtol=0, atol=1e-12)
    if asym:
        np.testing.assert_allclose(res["structured"].best_neg, res["matrix"].best_neg, rtol=0, atol=1e-12)
    else:  # the matrix sweep keeps one side for a symmetric γ: reflection maps F to −F, so max −F = max F
        np.testing.assert_allclose(res["structured"].best_neg, res["matrix"].best, rtol=0, atol=1e-12)
    for k, x in enumerate(XS):  # each slope equals the certificate's own sweep at E = x
        one = sweep(make_problem(C, h, x, "matrix"), two_sided=True)
        assert res["structured"].best[k] == pytest.approx(one.max_cost, abs=1e-12)
        assert res["structured"].best_neg[k] == pytest.approx(-one.min_cost if asym else one.max_cost, abs=1e-12)
