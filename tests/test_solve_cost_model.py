"""The solve cost model (darrm_opt.mechanisms.cost): every kind solved by an LP says which measured curve its
solve follows and at what size, every such curve has measured solves, the kinds with no LP cost nothing; the
measured points are predicted as measured (the largest at that size or below), between and beyond them the
cost follows each segment's power law, and a larger problem is never predicted cheaper, kind by kind."""

from __future__ import annotations

import math

import pytest

from darrm_opt.mechanisms import MECHANISMS, cost, mechanism
from darrm_opt.model.gaussian_params import GaussianMeanParams
from darrm_opt.model.gnmax import ConfidentGnmaxParams, GnmaxParams
from darrm_opt.model.multiclass import MulticlassParams
from darrm_opt.model.neighbours import PateParams
from darrm_opt.model.params import Params
from darrm_opt.model.shaped import ShapedMulticlassParams, ShapedPateParams
from darrm_opt.model.top2 import Top2Params

#: for each curve, chains of parameters, each growing one driver of the cost (K, C, slopes, the gap cap G)
GROWING = {
    "darrm/pure": [[Params(K, 3, 0.1, 0.0) for K in (3, 11, 51, 75, 101, 201, 301, 401, 801, 1001)]],
    "darrm/approximate": [[Params(K, 3, 0.1, 1e-5) for K in (3, 11, 25, 51, 75, 101, 201, 301)]],
    "darrm-pate": [[PateParams(K, 1.0, 1e-5) for K in (2, 11, 101, 250, 251, 501, 1001)]],
    "darrm-multiclass": [[MulticlassParams(K, 10, 1.0, 1e-5) for K in (5, 101, 250, 1000, 2000)],
                         [MulticlassParams(464, C, 1.0, 1e-5) for C in (2, 10, 100, 1000)]],
    "darrm-pate-shaped": [[ShapedPateParams(K, 3.0, 4.0, 120, 1.2) for K in (6, 101, 251, 501)],
                          [ShapedPateParams(501, 3.0, 4.0, J, 1.2) for J in (1, 120, 500, 1000, 2000)]],
    "darrm-multiclass-shaped": [[ShapedMulticlassParams(K, 10, 3.0, 4.0, 120, 1.2) for K in (5, 51, 101, 250, 501)],
                                [ShapedMulticlassParams(101, C, 3.0, 4.0, 120, 1.2) for C in (2, 10, 100, 900)],
                                [ShapedMulticlassParams(501, 100, 3.0, 4.0, J, 1.2) for J in (1, 120, 2000)]],
    **{f"darrm-multiclass-top2/{name}": [[Top2Params(K, 10, 1.0, delta) for K in (5, 25, 51, 75, 101, 250, 501)],
                                        [Top2Params(101, C, 1.0, delta) for C in (3, 5, 10, 16)],
                                        [Top2Params(51, 10, 1.0, delta, cap=G) for G in (1, 12, 32, 64)]]
       for name, delta in (("pure", 0.0), ("approximate", 1e-5))},
}
NO_LP = {"gnmax": GnmaxParams(250, 10, 40.0), "confident-gnmax": ConfidentGnmaxParams(5, 3, 3.0, 2.5, 2.0),
         "gaussian-mean": GaussianMeanParams(8, 16, 1.0, 2.0**-9, 4397, 1.25e-5),
         "stability": mechanism("stability").examples()[0].params}


def _curve(params) -> str:
    return cost.predict(params).key.curve


def test_every_kind_is_either_on_a_measured_curve_or_has_no_lp():
    lp_kinds = {mechanism(kind).kind for kind in MECHANISMS} - set(NO_LP)
    assert lp_kinds == {"darrm", "darrm-pate", "darrm-multiclass", "darrm-pate-shaped", "darrm-multiclass-shaped",
                        "darrm-multiclass-top2"}
    on_curves = {type(chains[0][0]) for chains in GROWING.values()}
    assert {MECHANISMS[k].params_type for k in lp_kinds} == on_curves
    assert set(cost.MEASURED) == set(GROWING)  # every curve is some kind's, every kind's curve is measured
    for curve, chains in GROWING.items():
        assert {_curve(p) for chain in chains for p in chain} == {curve}
    for kind, params in NO_LP.items():
        assert MECHANISMS[kind].solve_cost_key(params) is None
        assert cost.predict(params) == cost.NO_LP == cost.Cost(0.0, 0.0, None)


@pytest.mark.parametrize("curve", sorted(GROWING))
def test_every_curve_has_enough_measured_solves_and_they_cost_more_as_they_grow(curve):
    points = sorted(cost.MEASURED[curve])
    assert len({size for size, _, _ in points}) >= 3
    assert all(s > 0 and mb >= 0 for _, s, mb in points)
    # the largest measured solve of a curve costs more time and memory than its smallest
    assert points[-1][1] > points[0][1] and points[-1][2] > points[0][2]


@pytest.mark.parametrize("curve", sorted(GROWING))
def test_no_measured_solve_is_predicted_cheaper_than_it_was_and_the_dearest_so_far_exactly(curve):
    points = sorted(cost.MEASURED[curve])
    for size, seconds, mb in points:
        predicted = cost.predict_key(cost.SolveCostKey(curve, size))
        dearest = max(s for x, s, _ in points if x <= size), max(m for x, _, m in points if x <= size)
        assert predicted.seconds >= seconds and predicted.memory_mb >= mb
        if seconds == dearest[0]:
            assert predicted.seconds == pytest.approx(max(seconds, 1e-3))
        if mb == dearest[1]:
            assert predicted.memory_mb == pytest.approx(max(mb, 1.0))
    # a point cheaper than a smaller size's lies off the main axis: left out, so the curve rises through it
    assert cost.envelope([(1, 1.0, 5), (2, 3.0, 4), (3, 2.0, 9), (4, 10.0, 8)]) == (
        [(1, 1.0), (2, 3.0), (4, 10.0)], [(1, 5), (3, 9)])


@pytest.mark.parametrize("curve", sorted(GROWING))
def test_between_and_beyond_the_points_the_cost_follows_each_segments_power_law(curve):
    for values, field in zip(cost.envelope(cost.MEASURED[curve]), ("seconds", "memory_mb")):
        (x0, v0), (x1, v1) = values[-2:]
        b = math.log(v1 / v0) / math.log(x1 / x0)
        inside = math.sqrt(x0 * x1)  # inside the last segment
        assert getattr(cost.predict_key(cost.SolveCostKey(curve, inside)), field) == pytest.approx(
            v0 * (inside / x0) ** b)
        # past the largest size: the last segment at least SPAN long
        (xa, va) = [(x, v) for x, v in values if x <= x1 / cost.SPAN][-1]
        b = math.log(v1 / va) / math.log(x1 / xa)
        assert getattr(cost.predict_key(cost.SolveCostKey(curve, 3 * x1)), field) == pytest.approx(
            va * (3 * x1 / xa) ** b)
        smallest = values[0]
        assert getattr(cost.predict_key(cost.SolveCostKey(curve, smallest[0] / 2)), field) == smallest[1]


@pytest.mark.parametrize("curve", sorted(GROWING))
def test_a_larger_problem_is_never_predicted_cheaper(curve):
    for chain in GROWING[curve]:
        predicted = [cost.predict(p) for p in chain]
        sizes = [c.key.size for c in predicted]
        assert all(a < b for a, b in zip(sizes, sizes[1:]))  # each driver of the cost grows the size
        for a, b in zip(predicted, predicted[1:]):
            assert b.seconds >= a.seconds and b.memory_mb >= a.memory_mb
        assert predicted[-1].seconds > predicted[0].seconds  # and the largest is predicted dearer than the smallest


def test_each_kind_names_what_its_cost_grows_with():
    assert cost.predict(Params(101, 3, 0.1, 0.0)).key == cost.SolveCostKey("darrm/pure", 101.0, "K", "K", 101)
    assert cost.predict(MulticlassParams(250, 100, 1.0)).key == cost.SolveCostKey(
        "darrm-multiclass", 250.0**3 * 100, "K³·C", "K", 250)
    assert cost.predict(ShapedPateParams(101, 3.0, 4.0, 120, 1.2)).key.size == 101 * 120
