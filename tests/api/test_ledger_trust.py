"""Regressions of the trust audit: every answer paid once, at its own table's price, in every front end.

1. two certified tables with equal parameters are two tables (content-hash ids), each priced with its profile;
2. a ledger capped by private teachers on disjoint shards refuses PATE-setting tables from the CLI and Python;
4. a debit whose commit went through but whose acknowledgement was lost is not charged again on retry
   (SQLite and PostgreSQL);
5. the Python API pays before it draws, and releases certified tables only;
and the ledger's statement never decreases as answers are added, at its fixed δ target.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from darrm_opt.errors import BudgetExceeded, InvalidParameter
from darrm_opt.ledger.core import Debit
from darrm_opt.ledger.db import Database
from darrm_opt.ledger.local import Ledger
from darrm_opt.ledger.schema import SpendRecord
from darrm_opt.ledger.writer import DebitWriter
from darrm_opt.mechanisms import certify_table, mechanism_for
from darrm_opt.model.baselines import gamma_sub
from darrm_opt.model.neighbours import PateParams
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve
from darrm_opt.optimize.pate_setting import solve_pate
from darrm_opt.privacy import accounting
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.table import CertifiedTable, table_id
from darrm_opt.release.release import Aggregator, release_answers

ROOT = Path(__file__).resolve().parents[2]
OPT_ROWS, SUB_ROWS = 30, 40


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, timeout=300, module=True)


def table_file(path: Path, params: Params, gamma, teachers: str | None = None) -> Path:
    doc = {"K": params.K, "m": params.m, "epsilon": params.epsilon, "teacher_delta": params.teacher_delta,
           "delta": params.delta, "prior": params.prior.spec, "gamma": [float(g) for g in gamma]}
    if teachers is not None:
        doc["teachers"] = teachers
    path.write_text(json.dumps(doc))
    return path


def votes_file(path: Path, rows: int, K: int) -> Path:
    path.write_text("".join(",".join("1" if k % 2 else "0" for k in range(K)) + "\n" for _ in range(rows)))
    return path


@pytest.fixture(scope="module")
def k11() -> dict:
    """γ_opt and γ_Sub of K = 11, m = 3: both certified for the same parameters, with their profiles."""
    params = Params(11, 3)
    opt = certify_table(params, solve(params).gamma)
    sub = certify_table(params, gamma_sub(11, 3))
    return {"params": params, "opt": opt, "sub": sub}


def test_tables_with_equal_parameters_are_two_tables(k11):
    opt, sub = k11["opt"], k11["sub"]
    assert opt.params == sub.params and opt.gamma != sub.gamma
    assert opt.id != sub.id and opt.id == table_id("darrm", opt.params, "shared", opt.gamma)
    assert opt.profile != sub.profile
    # one bit of γ is another table
    bumped = list(opt.gamma)
    bumped[5] = float(np.nextafter(bumped[5], 0.0))
    assert table_id("darrm", opt.params, "shared", bumped) != opt.id


@pytest.mark.slow  # CLI subprocesses
def test_each_answer_is_paid_at_its_own_tables_price_from_the_cli(k11, tmp_path):
    """The audit's reproducer: a ledger that pays 30 answers of γ_opt must not pay 40 more of γ_Sub (same
    parameters): their true composition (about 6.3) is far above the budget (4.4858)."""
    params, opt, sub = k11["params"], k11["opt"], k11["sub"]
    opt_file = table_file(tmp_path / "opt.json", params, opt.gamma)
    sub_file = table_file(tmp_path / "sub.json", params, sub.gamma)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    r = cli("aggregate", "--table", str(opt_file), "--votes", str(votes_file(tmp_path / "v30.csv", OPT_ROWS, 11)),
            "--ledger", "job", "--ledger-db", db, "--epsilon-budget", "4.4858", "--delta-budget", "1e-3",
            "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    paid = json.loads(r.stdout)["ledger"]
    assert paid["answers"] == OPT_ROWS and paid["epsilon_spent"] <= 4.4858
    r = cli("aggregate", "--table", str(sub_file), "--votes", str(votes_file(tmp_path / "v40.csv", SUB_ROWS, 11)),
            "--ledger", "job", "--ledger-db", db, "--format", "json", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == "" and "nothing was released" in r.stderr, r.stderr
    truth = exact_epsilon([(opt.profile, OPT_ROWS), (sub.profile, SUB_ROWS)], 1e-3)
    assert truth > 6.0  # the composition the ledger would have had to state
    with Ledger(db, "job") as book:
        view = book.view()
    assert view["answers"] == OPT_ROWS and [g["table_id"] for g in view["groups"]] == [opt.id]


def test_a_ledger_of_two_tables_states_a_composition_valid_for_an_adaptive_mix(k11, tmp_path):
    """γ_opt dominates γ_Sub (same parameters): every answer of the mix is composed as one of γ_opt's
    (``exact-dominating``), valid whichever table a client picks after reading earlier answers. The exact
    product of the two profiles (6.29 for 30 + 40 answers, and it paid them) is no longer used: 30 + 40 answers
    as γ_opt's have infinite-loss mass 70 × 1.8e-5 > 1e-3, so the 40 are refused; 30 + 20 are paid."""
    from darrm_opt.errors import BudgetExceeded
    from darrm_opt.privacy.adaptive import dominates

    opt, sub = k11["opt"], k11["sub"]
    assert dominates(opt.profile, sub.profile) and not dominates(sub.profile, opt.profile)
    with Ledger(str(tmp_path / "l.db"), "both", epsilon_budget=8.0, delta_budget=1e-3) as book:
        book.pay(opt, OPT_ROWS)
        with pytest.raises(BudgetExceeded, match="cannot pay for 40"):
            book.pay(sub, SUB_ROWS)
        book.pay(sub, SUB_ROWS // 2)
        view = book.view()
    fine = exact_epsilon([(opt.profile, OPT_ROWS + SUB_ROWS // 2)], 1e-3)
    assert view["answers"] == OPT_ROWS + SUB_ROWS // 2 and view["composition"] == "exact-dominating"
    assert fine <= view["epsilon_spent"] <= 8.0
    assert exact_epsilon([(opt.profile, OPT_ROWS), (sub.profile, SUB_ROWS // 2)], 1e-3) < fine
    assert sorted((g["table_id"], g["answers"]) for g in view["groups"]) == sorted(
        [(opt.id, OPT_ROWS), (sub.id, SUB_ROWS // 2)])


@pytest.fixture(scope="module")
def pate_table() -> CertifiedTable:
    """A PATE-setting (non-private teachers) table, (0.5, 1e-5)-DP per answer."""
    params = PateParams(5, 0.5, 1e-5)
    return certify_table(params, solve_pate(params).gamma)


@pytest.mark.slow  # CLI subprocesses
def test_a_capped_ledger_refuses_pate_tables_from_python_and_the_cli(pate_table, k11, tmp_path):
    db = f"sqlite:///{tmp_path / 'cap.db'}"
    draws = []

    def counting(n: int) -> bytes:
        draws.append(n)
        return os.urandom(n)

    with Ledger(db, "capped", epsilon_budget=1.0, delta_budget=1e-3, teacher_cap=(0.1, 1e-5)) as book:
        assert pate_table.teachers == "disjoint-nonprivate"
        with pytest.raises(InvalidParameter, match="disjoint-nonprivate"):
            release_answers(pate_table, np.ones((600, 5), dtype=np.uint8), book, random_bytes=counting)
        assert draws == [] and book.view()["answers"] == 0
        # the cap holds for tables of private teachers: any number of their answers costs at most (0.1, 1e-5)
        release_answers(k11["opt"], np.ones((200, 11), dtype=np.uint8), book)
        view = book.view()
        assert (view["answers"], view["epsilon_spent"], view["composition"]) == (200, 0.1, "parallel-cap")
    pate_file = tmp_path / "pate.json"
    pate_file.write_text(json.dumps({"K": 5, "teachers": "disjoint-nonprivate", "epsilon": 0.5, "delta": 1e-5,
                                     "gamma": list(pate_table.gamma)}))
    r = cli("aggregate", "--table", str(pate_file), "--votes", str(votes_file(tmp_path / "v.csv", 600, 5)),
            "--ledger", "capped", "--ledger-db", db, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "" and "disjoint-nonprivate" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    with Ledger(db, "capped") as book:
        assert book.view()["answers"] == 200


def test_the_python_api_pays_before_it_draws(k11, tmp_path):
    opt = k11["opt"]
    with pytest.raises(InvalidParameter, match="table"):
        Aggregator([1.0] * 12)  # a bare γ has no certificate
    with pytest.raises(InvalidParameter, match="certificate"):  # a certificate that does not certify it
        mechanism_for(opt.params).table(opt.params, [1.0] * 12, {**opt.certificate_dict(), "certified": False})
    with pytest.raises(InvalidParameter, match="certificate"):  # one for other parameters
        mechanism_for(opt.params).table(opt.params, opt.gamma, {**opt.certificate_dict(), "bound": 0.5})
    with pytest.raises(InvalidParameter, match="certificate"):
        CertifiedTable("darrm", opt.params, (1.0,) * 12, None, "shared", None, 0.3, 3e-5, 0.0)
    order = []
    with Ledger(str(tmp_path / "order.db"), "o", epsilon_budget=1.0, delta_budget=1e-3) as book:
        def watching(n: int) -> bytes:  # the ledger has the answers committed before any coin is drawn
            order.append(book.view()["answers"])
            return os.urandom(n)

        answers = release_answers(opt, np.ones((3, 11), dtype=np.uint8), book, random_bytes=watching)
        assert len(answers) == 3 and order and set(order) == {3}
        order.clear()
        with pytest.raises(BudgetExceeded):
            release_answers(opt, np.ones((50, 11), dtype=np.uint8), book, random_bytes=watching)
        assert order == [] and book.view()["answers"] == 3
        with pytest.raises(InvalidParameter, match="votes"):  # bad votes spend nothing
            release_answers(opt, np.ones((2, 10), dtype=np.uint8), book, random_bytes=watching)
        with pytest.raises(InvalidParameter, match="votes"):
            release_answers(opt, np.ones(11, dtype=np.uint8), book, random_bytes=watching)
        assert order == [] and book.view()["answers"] == 3


@pytest.mark.slow  # 26 debits, each composed exactly
def test_the_stated_spend_never_decreases_and_delta_is_the_fixed_target(k11, tmp_path):
    opt = k11["opt"]
    stated = []
    with Ledger(str(tmp_path / "mono.db"), "m", epsilon_budget=7.5, delta_budget=1e-3) as book:
        for _ in range(26):
            try:
                book.pay(opt, 1)
            except BudgetExceeded:
                break
            view = book.view()
            assert view["delta_target"] == 1e-3 and "delta_spent" not in view
            stated.append(view["epsilon_spent"])
    assert len(stated) >= 20 and stated == sorted(stated)
    for n, eps in enumerate(stated, start=1):  # every statement is a valid bound for its answers
        assert exact_epsilon([(opt.profile, n)], 1e-3) <= eps <= 7.5
    generic = accounting.account([(opt.epsilon0, opt.delta0, 15)], 1e-3).spend.epsilon
    assert stated[14] < generic  # the exact composition, not the generic bound, while the budget is far


class LosesOneAcknowledgement(Database):
    """A database whose first debit transaction commits and then reports the connection lost, as a
    PostgreSQL connection dropped during COMMIT does: the server committed, the client saw an error."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.lost = 0

    @contextlib.contextmanager
    def write(self):
        with super().write() as conn:
            yield conn
        if self.lost == 0:
            self.lost += 1
            raise OperationalError("COMMIT", {}, ConnectionError("server closed the connection unexpectedly"))


def test_a_lost_commit_acknowledgement_charges_once(k11, database_url):
    opt = k11["opt"]
    name = f"ack-{os.getpid()}-{id(database_url)}"
    with Ledger(database_url, name, epsilon_budget=100.0, delta_budget=1e-3) as book:
        book.register(opt)
        db = LosesOneAcknowledgement(database_url)
        writer = DebitWriter(db, max_batch=1, profile_of=book.profile_of)
        try:
            result = writer.submit(Debit.of(book.id, opt, 25)).result(timeout=120)
        finally:
            writer.stop()
            db.dispose()
        assert db.lost == 1 and result.status == "paid"
        view = book.view()
        assert view["answers"] == 25 and view["groups"][0]["answers"] == 25
        with book.db.read() as conn:
            spends = conn.execute(select(func.count()).select_from(SpendRecord)
                                  .where(SpendRecord.ledger_id == book.id)).scalar_one()
        assert spends == 1
