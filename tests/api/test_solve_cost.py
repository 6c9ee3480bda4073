"""The service's admission by the solve cost model (darrm_opt.mechanisms.cost): ``POST /v1/tables`` refuses a
solve predicted over DARRM_MAX_SOLVE_SECONDS or DARRM_MAX_SOLVE_MEMORY_MB with a 422 naming the parameter its
cost grows with and the predicted cost, without starting it, for every kind solved by an LP; a cheap table of
every such kind is admitted and solved; an operator's multiset cap still applies to every kind."""

from __future__ import annotations

import pytest
from svc_helpers import in_process_client

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import cost, mechanism_for, params_key
from darrm_opt.model.multiclass import MulticlassParams
from darrm_opt.model.neighbours import PateParams
from darrm_opt.model.params import Params
from darrm_opt.model.shaped import ShapedMulticlassParams, ShapedPateParams
from darrm_opt.model.top2 import Top2Params

PATE = {"teachers": "disjoint-nonprivate", "target_epsilon": 1.0, "delta": 1e-5}

#: kind -> (a large problem, its request body where POST /v1/tables serves the kind, a cheap problem)
KINDS = {
    "darrm": (Params(1001, 3, 0.1, 0.0), {"K": 1001, "m": 3, "teacher_delta": 0.0}, Params(11, 3, 0.1, 1e-5)),
    "darrm-pate": (PateParams(1001, 1.0, 1e-5), {"K": 1001, **PATE}, PateParams(11, 1.0, 1e-5)),
    "darrm-multiclass": (MulticlassParams(2000, 12, 1.0, 1e-5), {"K": 2000, "classes": 12, **PATE},
                         MulticlassParams(7, 3, 1.0, 1e-5)),
    "darrm-pate-shaped": (ShapedPateParams(501, 3.0, 4.0, 2000, 1.2), None, ShapedPateParams(6, 3.0, 2.0, 8, 1.0)),
    "darrm-multiclass-shaped": (ShapedMulticlassParams(501, 100, 3.0, 4.0, 2000, 1.2), None,
                                ShapedMulticlassParams(5, 3, 3.0, 2.0, 8, 1.0)),
    "darrm-multiclass-top2": (Top2Params(251, 10, 1.0, 1e-5), None, Top2Params(5, 3, 1.0, 1e-5, cap=2)),
}


def _limits(big) -> dict:
    """Limits just below the large problem's predicted seconds, far above the cheap ones'."""
    return {"max_solve_seconds": cost.predict(big).seconds * 0.99}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_problem_predicted_over_the_limits_is_refused_naming_its_parameter_and_prediction(kind, tmp_path):
    big, body, _ = KINDS[kind]
    predicted = cost.predict(big)
    assert predicted.key is not None and predicted.seconds > 0.5
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}", **_limits(big)) as c:
        tables = c.app.state.services.tables
        with pytest.raises(InvalidParameter, match="is predicted to take") as refused:
            tables._inline(big)
        assert refused.value.parameter == predicted.key.parameter == "K" and refused.value.value == big.K
        assert f"{predicted.seconds:.3g} s over DARRM_MAX_SOLVE_SECONDS" in refused.value.rule
        if body is None:  # a kind the planner stores: not requested by parameters through POST /v1/tables
            return
        r = c.post("/v1/tables", json=body)
        assert r.status_code == 422
        detail = r.json()["detail"][0]
        assert detail["loc"] == ["body", "K"] and f"the {kind} solve" in detail["msg"]
        assert f"predicted to take {predicted.seconds:.3g} s and {predicted.memory_mb:.3g} MB" in detail["msg"]
        assert tables.jobs.row(params_key(big)) is None  # no job was started


def test_a_multiclass_refusal_names_the_size_its_cost_grows_with(tmp_path):
    big = MulticlassParams(2000, 12, 1.0, 1e-5)
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}", max_solve_memory_mb=100.0) as c:
        r = c.post("/v1/tables", json={"K": 2000, "classes": 12, **PATE})
        assert r.status_code == 422
        msg = r.json()["detail"][0]["msg"]
        assert "darrm-multiclass solve at K³·C = 9.6e+10" in msg
        assert f"{cost.predict(big).memory_mb:.3g} MB over DARRM_MAX_SOLVE_MEMORY_MB = 100" in msg


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_cheap_problem_of_every_kind_is_admitted_and_solved_while_the_request_waits(kind, tmp_path):
    big, _, small = KINDS[kind]
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}", **_limits(big)) as c:
        tables = c.app.state.services.tables
        assert cost.predict(small).seconds < tables.settings.max_solve_seconds
        outcome = tables.request(small, "highs", mechanism_for(small).settings[0])
        assert outcome.status == "miss" and outcome.table.table.kind == kind and outcome.table.params == small


def test_through_the_app_a_cheap_table_of_each_requested_kind_is_served(tmp_path):
    bodies = [{"K": 11, "m": 3}, {"K": 11, **PATE}, {"K": 7, "classes": 3, **PATE}]
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}", max_solve_seconds=1.0) as c:
        kinds = []
        for body in bodies:
            r = c.post("/v1/tables", json=body)
            assert r.status_code == 200, r.text
            kinds.append(r.json()["kind"])
        assert kinds == ["darrm", "darrm-pate", "darrm-multiclass"]


def test_the_default_limits_refuse_the_issues_pure_k_1001_and_admit_an_approximate_k_101(tmp_path):
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}") as c:
        tables = c.app.state.services.tables
        big = cost.predict(Params(1001, 3, 0.1, 0.0))  # 438 s and 2.9 GB measured
        assert big.seconds > tables.settings.max_solve_seconds
        with pytest.raises(InvalidParameter, match="DARRM_MAX_SOLVE_SECONDS = 300"):
            tables._inline(Params(1001, 3, 0.1, 0.0))
        assert tables._inline(Params(101, 3, 0.1, 1e-5)) is False  # admitted, as a background job
        assert tables._inline(Params(11, 3, 0.1, 1e-5)) is True  # admitted, solved while the request waits


def test_the_memory_limit_refuses_too(tmp_path):
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}", max_solve_memory_mb=1.0) as c:
        tables = c.app.state.services.tables
        mb = cost.predict(Params(201, 3, 0.1, 0.0)).memory_mb
        with pytest.raises(InvalidParameter, match="DARRM_MAX_SOLVE_MEMORY_MB = 1") as refused:
            tables._inline(Params(201, 3, 0.1, 0.0))
        assert f"{mb:.3g} MB over" in str(refused.value)


def test_an_operators_multiset_cap_still_applies_to_every_kind(tmp_path):
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}", max_multisets=2000) as c:
        with pytest.raises(InvalidParameter, match="DARRM_MAX_MULTISETS = 2000"):
            c.app.state.services.tables._inline(Params(101, 3, 0.1, 1e-5))
