"""The solve cost model (api.solve_cost) and the service's admission by it: the measured points are returned as
measured, the power-law interpolation and extrapolation are checked by hand, kinds it does not cover keep the
multiset limit, and ``POST /v1/tables`` refuses a solve predicted over the limits with a 422 naming K and the
predicted cost, without starting it."""

from __future__ import annotations

import math

import pytest
from svc_helpers import in_process_client

from darrm_opt.api import solve_cost
from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import params_key
from darrm_opt.model.multiclass import MulticlassParams
from darrm_opt.model.params import Params


def _params(K: int, approximate: bool) -> Params:
    return Params(K, 3, 0.1, 1e-5 if approximate else 0.0)


@pytest.mark.parametrize("approximate", [False, True])
def test_the_measured_points_are_predicted_as_measured(approximate):
    points = solve_cost.MEASURED[("darrm", approximate)]
    assert len(points) >= 3
    for K, seconds, mb in points:
        cost = solve_cost.predict(_params(K, approximate))
        assert cost == solve_cost.Cost(pytest.approx(seconds), pytest.approx(mb))


@pytest.mark.parametrize("approximate", [False, True])
def test_between_and_beyond_the_points_the_cost_follows_each_segments_power_law(approximate):
    points = solve_cost.MEASURED[("darrm", approximate)]
    (k0, s0, m0), (k1, s1, m1) = points[-2], points[-1]
    for K in ((k0 + k1) // 2 | 1, 2 * k1 + 1):  # inside the last segment, and past the largest K
        b = math.log(s1 / s0) / math.log(k1 / k0)
        c = math.log(m1 / m0) / math.log(k1 / k0)
        cost = solve_cost.predict(_params(K, approximate))
        assert (cost.seconds, cost.memory_mb) == (pytest.approx(s0 * (K / k0) ** b), pytest.approx(m0 * (K / k0) ** c))
    smallest = points[0]
    assert solve_cost.predict(_params(3, approximate)).seconds == pytest.approx(smallest[1])
    ks = [k for k, _, _ in points] + [3 * points[-1][0]]
    costs = [solve_cost.predict(_params(K, approximate)).seconds for K in range(3, ks[-1], 8)]
    assert costs == sorted(costs)  # more teachers never predicted cheaper (the measured times grow with K)


def test_a_kind_the_model_does_not_cover_has_no_prediction():
    assert solve_cost.predict(MulticlassParams(K=11, C=3, epsilon=1.0)) is None


def test_the_service_refuses_by_predicted_cost_and_keeps_the_multiset_cap_for_other_kinds(tmp_path):
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}") as c:
        tables = c.app.state.services.tables
        # the pair: a pure K = 1001 (438 s, 2.9 GB measured) is refused, an approximate K = 101 is not
        big = solve_cost.predict(_params(1001, False))
        assert big.seconds > tables.settings.max_solve_seconds
        with pytest.raises(InvalidParameter, match="predicted") as refused:
            tables._inline(_params(1001, False))
        assert refused.value.parameter == "K" and "DARRM_MAX_SOLVE_SECONDS = 300" in str(refused.value)
        assert solve_cost.predict(_params(101, True)).seconds < tables.settings.max_solve_seconds
        assert tables._inline(_params(101, True)) is False  # admitted, as a background job
        assert tables._inline(_params(11, True)) is True  # admitted, solved while the request waits

        r = c.post("/v1/tables", json={"K": 1001, "m": 3, "teacher_delta": 0.0})
        assert r.status_code == 422
        detail = r.json()["detail"][0]
        assert detail["loc"] == ["body", "K"] and "predicted to take" in detail["msg"]
        assert f"{big.seconds:.3g} s" in detail["msg"] and "DARRM_MAX_SOLVE_SECONDS" in detail["msg"]
        assert tables.jobs.row(params_key(_params(1001, False), "shared")) is None  # no job was started


def test_the_memory_limit_refuses_too(tmp_path):
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}", max_solve_memory_mb=1.0) as c:
        tables = c.app.state.services.tables
        mb = solve_cost.predict(_params(201, False)).memory_mb
        with pytest.raises(InvalidParameter, match="DARRM_MAX_SOLVE_MEMORY_MB = 1") as refused:
            tables._inline(_params(201, False))
        assert f"{mb:.3g} MB over" in str(refused.value)


def test_an_operators_multiset_cap_still_applies_to_every_kind(tmp_path):
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}", max_multisets=2000) as c:
        with pytest.raises(InvalidParameter, match="DARRM_MAX_MULTISETS = 2000"):
            c.app.state.services.tables._inline(_params(101, True))
