"""Exact privacy profiles of PATE-setting tables (multi-class and binary): brute force over every histogram
and neighbour, C = 2 against the binary PATE-setting profile, monotonicity, the certified (ε, δ) statement,
and composition through the PLD path."""

import itertools
import math

import numpy as np
import pytest

from darrm_opt.model.multiclass import MulticlassParams, hockey_stick, output_distribution
from darrm_opt.model.neighbours import PateParams, pate_delta
from darrm_opt.optimize.multiclass import solve_multiclass
from darrm_opt.optimize.pate_setting import solve_pate
from darrm_opt.privacy.pair_profile import multiclass_profile, pate_profile
from darrm_opt.privacy.pld import INTERVAL, exact_delta, exact_epsilon
from darrm_opt.privacy.profile import MARGIN, PrivacyProfile

EPS_GRID = [0.0, 0.05, 0.2, 0.4, 0.5, 0.8, 1.3, 2.5, 6.0, 50.0]


def histograms(K, C):
    for combo in itertools.combinations_with_replacement(range(C), K):
        yield [combo.count(c) for c in range(C)]


def brute_delta(K, C, gamma, eps):
    """max over every histogram h and every neighbour h′ (one vote moved) of Σ_c (P(c) − e^ε′ P′(c))⁺."""
    E = math.exp(eps)
    best = 0.0
    for h in histograms(K, C):
        P = output_distribution(h, gamma)
        for a, b in itertools.permutations(range(C), 2):
            if h[a]:
                h2 = list(h)
                h2[a] -= 1
                h2[b] += 1
                best = max(best, hockey_stick(P, output_distribution(h2, gamma), E))
    return best


@pytest.mark.parametrize("K,C,eps,delta", [(5, 3, 0.5, 1e-3), (6, 4, 0.4, 1e-4), (7, 3, 1.0, 0.0), (4, 5, 0.3, 1e-2)])
def test_profile_equals_brute_force(K, C, eps, delta):
    """δ(ε′) is an upper bound at every ε′ and exact up to the envelope's MARGIN, for the optimal table,
    a random one, and a random one with γ = 1 at the upper gaps (an infinite-loss atom: output laws with
    P′(c) = 0 < P(c), so δ(50) > 0)."""
    params = MulticlassParams(K, C, eps, delta)
    rng = np.random.default_rng(K * 100 + C)
    saturated = rng.random(K + 1)
    saturated[K // 2:] = 1.0
    for gamma in (np.array(solve_multiclass(params).gamma), rng.random(K + 1), saturated):
        prof = multiclass_profile(params, gamma)
        if gamma is saturated:
            assert prof.infinite_mass > 0.01 and prof.delta(50.0) > 0.01
        for e in EPS_GRID + [eps]:
            truth = brute_delta(K, C, gamma, e)
            # the brute force's own float rounding: ~1e-16 (the profile's values are exact, rounded up)
            assert truth - 1e-14 <= prof.delta(e) <= truth + 2 * MARGIN, (e, truth, prof.delta(e))


def test_random_table_profile_is_not_trivial():
    """A random table's profile has positive δ at ε′ = 0.8 and 0 far out (its largest ratio is finite)."""
    gamma = np.random.default_rng(3).random(7)
    prof = multiclass_profile(MulticlassParams(6, 3, 0.5, 1e-3), gamma)
    assert prof.delta(0.8) > 0.1 and brute_delta(6, 3, gamma, 0.8) == pytest.approx(prof.delta(0.8), abs=1e-12)
    assert prof.infinite_mass < 1e-12


@pytest.mark.parametrize("K,C,eps,delta", [(40, 5, 0.5, 1e-5), (60, 10, 0.1, 1e-6), (30, 3, 1.0, 0.0)])
def test_profile_of_solved_table(K, C, eps, delta):
    """Monotone, meets the certified (ε, δ), and is a valid PrivacyProfile (round trip through to_dict)."""
    params = MulticlassParams(K, C, eps, delta)
    prof = multiclass_profile(params, solve_multiclass(params).gamma)
    ds = [prof.delta(e) for e in np.linspace(0.0, 4.0, 81)]
    assert all(x >= y for x, y in zip(ds, ds[1:]))
    assert ds[0] > ds[-1]
    assert prof.delta(eps) <= delta
    assert all(p >= 0 and q >= 0 for p, q in prof.atoms)
    assert sum(p for p, _ in prof.atoms) + prof.infinite_mass == pytest.approx(1.0, abs=1e-12)
    assert PrivacyProfile.from_dict(prof.to_dict()) == prof


@pytest.mark.parametrize("K,eps,delta", [(11, 0.5, 1e-4), (15, 0.2676, 3e-4), (21, 1.0, 0.0)])
def test_two_classes_equal_the_binary_pate_profile(K, eps, delta):
    """C = 2: the multi-class profile of γ_mc equals the binary PATE-setting profile of
    γ(l) = γ_mc(|2l − K|) (the same pairs l ↔ l ± 1), both ways within the margins."""
    pp = PateParams(K=K, epsilon=eps, delta=delta)
    gb = np.array(solve_pate(pp).gamma)
    gm = np.zeros(K + 1)
    for l in range(K + 1):
        gm[abs(2 * l - K)] = gb[l]
    binary = pate_profile(pp, gb)
    multi = multiclass_profile(MulticlassParams(K, 2, eps, delta), gm)
    assert binary.dominates(multi, tol=2 * MARGIN) and multi.dominates(binary, tol=2 * MARGIN)
    for e in EPS_GRID:
        assert multi.delta(e) == pytest.approx(binary.delta(e), abs=2 * MARGIN)


@pytest.mark.parametrize("K", [7, 13])
def test_binary_pate_profile_equals_the_pair_rows(K):
    """Binary PATE setting: δ(ε′) = max(0, max row cost − (e^ε′ − 1))/2 (model.neighbours.pate_delta)."""
    gamma = np.random.default_rng(K).random(K + 1)
    prof = pate_profile(PateParams(K=K, epsilon=0.5, delta=0.0), gamma)
    for e in EPS_GRID:
        truth = pate_delta(gamma, e)
        assert truth - 1e-14 <= prof.delta(e) <= truth + 2 * MARGIN


def product_delta(profile: PrivacyProfile, count: int, eps: float) -> float:
    """δ(ε) of the count-fold product of the profile's dominating pair, by enumeration."""
    atoms = [(p, q) for p, q in profile.atoms if p > 0 or q > 0] + [(profile.infinite_mass, 0.0)]
    E, total = math.exp(eps), 0.0
    for combo in itertools.product(atoms, repeat=count):
        p, q = math.prod(a for a, _ in combo), math.prod(b for _, b in combo)
        total += max(0.0, p - E * q)
    return total


def test_profile_composes_through_the_pld_path():
    """Q answers through dp_accounting equal the product of the dominating pair (pessimistic by at most the
    loss discretisation), and one answer's ε at δ is the table's per-answer ε."""
    params = MulticlassParams(6, 3, 0.5, 1e-3)
    prof = multiclass_profile(params, solve_multiclass(params).gamma)
    for eps in (0.6, 1.0, 1.5):
        exact = product_delta(prof, 3, eps)
        got = exact_delta([(prof, 3)], eps)
        assert exact - 1e-12 <= got <= product_delta(prof, 3, eps - 3 * INTERVAL) + 1e-12
    one = exact_epsilon([(prof, 1)], 1e-3)
    assert one <= 0.5 + 2 * INTERVAL
    assert product_delta(prof, 1, one) <= 1e-3  # an upper bound of the true ε at δ = 1e-3 ...
    assert product_delta(prof, 1, one - 0.1 * INTERVAL) > 1e-3  # ... and within a tenth of the grid of it


# ------------------------------------------------------------------------------------------------------
# solve --classes --format json stores the profile; verify recomputes it
# ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def solved_file(tmp_path_factory):
    from typer.testing import CliRunner

    from darrm_opt.cli import app

    out = tmp_path_factory.mktemp("mc") / "mc.json"
    r = CliRunner().invoke(app, ["solve", "--K", "20", "--classes", "4", "--teachers", "disjoint-nonprivate",
                                 "--target-epsilon", "0.5", "--delta", "1e-5", "--format", "json",
                                 "--no-baselines", "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def _verify(path, *extra):
    from typer.testing import CliRunner

    from darrm_opt.cli import app

    return CliRunner().invoke(app, ["verify", str(path), *extra])


def test_solve_json_stores_the_exact_profile(solved_file):
    import json

    doc = json.loads(solved_file.read_text())
    prof = PrivacyProfile.from_dict(doc["privacy_profile"])
    params = MulticlassParams(20, 4, 0.5, 1e-5)
    assert prof == multiclass_profile(params, doc["gamma"])
    assert prof.delta(0.5) <= 1e-5 < prof.delta(0.45)
    r = _verify(solved_file, "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["privacy_profile_valid"] is True and out["certificate"]["certified"] and out["classes"] == 4


@pytest.mark.parametrize("where", ["support", "vertex"])
def test_verify_rejects_an_optimistic_stored_profile(solved_file, tmp_path, where):
    """Lowering one support statement, or one envelope vertex by 1e-9, makes verify exit 1."""
    import json

    doc = json.loads(solved_file.read_text())
    prof = doc["privacy_profile"]
    if where == "support":
        i = max(range(len(prof["support"])), key=lambda j: prof["support"][j][1])
        prof["support"][i][1] -= 1e-9
    else:
        v = prof["vertices"]  # the interior vertex with the largest rise (it stays above its predecessor)
        i = max(range(1, len(v) - 1), key=lambda j: v[j][1] - v[j - 1][1])
        v[i][1] -= 1e-9
        prof.pop("atoms")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = _verify(bad)
    assert r.exit_code == 1 and "optimistic" in r.output, r.output
    assert _verify(solved_file).exit_code == 0


def test_binary_pate_solve_json_stores_its_profile(tmp_path):
    import json

    from typer.testing import CliRunner

    from darrm_opt.cli import app

    out = tmp_path / "pate.json"
    r = CliRunner().invoke(app, ["solve", "--K", "11", "--teachers", "disjoint-nonprivate", "--target-epsilon", "0.5",
                                 "--delta", "1e-5", "--format", "json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    prof = PrivacyProfile.from_dict(doc["privacy_profile"])
    assert prof == pate_profile(PateParams(K=11, epsilon=0.5, delta=1e-5), doc["gamma"])
    assert prof.delta(0.5) <= 1e-5 < prof.delta(0.45)


def test_ledger_accounting_uses_the_multiclass_profile():
    """accounting.account (the ledgers' composition) adds the exact bound from a multi-class profile: it is
    the PLD composition, and tighter than the optimal composition of the table's (ε, δ) statement (4.78
    against 5.03 here: the table's profile is below the generic (ε, δ) mechanism's)."""
    from darrm_opt.privacy.accounting import account

    params = MulticlassParams(12, 3, 0.3, 1e-6)
    prof = multiclass_profile(params, solve_multiclass(params).gamma)
    acc = account([(0.3, 1e-6, 20)], 1e-4, profiles=[(prof, 20)])
    exact = acc.bounds["exact"]
    assert exact.epsilon == exact_epsilon([(prof, 20)], 1e-4)
    assert exact.epsilon < acc.bounds["optimal"].epsilon - 0.2
    assert acc.spend.method == "exact" and acc.spend.epsilon == exact.epsilon


def test_verify_rejects_a_support_statement_lowered_below_the_margin(solved_file, tmp_path):
    """A stored statement (0, δ) lowered by 5e-14 (less than MARGIN, which the envelope check allows) is
    false by brute force, and verify exits 1 (it accepted it when statements were compared with MARGIN)."""
    import json

    doc = json.loads(solved_file.read_text())
    support = doc["privacy_profile"]["support"]
    i = next(j for j, (e, _) in enumerate(support) if e == 0.0)
    support[i][1] -= 5e-14
    assert brute_delta(20, 4, np.array(doc["gamma"]), 0.0) > support[i][1] + 4e-14
    bad = tmp_path / "low.json"
    bad.write_text(json.dumps(doc))
    r = _verify(bad)
    assert r.exit_code == 1 and "optimistic" in r.output, r.output


@pytest.mark.parametrize("K,C", [(5, 3), (6, 4)])
def test_statements_hold_exactly(K, C):
    """Every statement of a computed profile holds (saturated γ too: an infinite-loss atom); the tightest
    statement lowered by one ulp does not; malformed statements (ε < 0, NaN) do not."""
    from darrm_opt.privacy.pair_profile import multiclass_family, statements_hold

    rng = np.random.default_rng(K * C)
    saturated = rng.random(K + 1)
    saturated[K // 2:] = 1.0
    for gamma in (rng.random(K + 1), saturated):
        prof = multiclass_profile(MulticlassParams(K, C, 0.5, 1e-3), gamma)
        fam = multiclass_family(K, C, gamma)
        assert statements_hold(fam, prof.support)
        e0, d0 = prof.support[0]
        assert e0 == 0.0 and abs(d0 - brute_delta(K, C, gamma, 0.0)) < 1e-15
        assert not statements_hold(fam, [(0.0, math.nextafter(d0, 0.0))])
        assert not statements_hold(fam, [(-1.0, 1.0)]) and not statements_hold(fam, [(math.nan, 1.0)])
        assert statements_hold(fam, [(1e6, prof.infinite_mass)])


def test_verify_rejects_a_pate_statement_lowered_below_the_margin(tmp_path):
    """A binary PATE-setting file's stored statement (0, δ) lowered by 5e-14 (less than the MARGIN that the
    comparison with the recomputed profile allowed) is false by brute force over the pairs (l, l ± 1), and
    verify exits 1; the solved file itself passes."""
    import json

    from typer.testing import CliRunner

    from darrm_opt.cli import app
    from darrm_opt.model.neighbours import signs

    out = tmp_path / "pate.json"
    r = CliRunner().invoke(app, ["solve", "--K", "11", "--teachers", "disjoint-nonprivate", "--target-epsilon",
                                 "0.5", "--delta", "1e-5", "--format", "json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    r = _verify(out, "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["privacy_profile_valid"] is True, r.output
    doc = json.loads(out.read_text())
    support = doc["privacy_profile"]["support"]
    support[0][1] -= 5e-14  # the statement at ε′ = 0: the largest total variation ½|h_l − h_l±1|
    h = signs(11) * np.array(doc["gamma"])
    assert support[0][0] == 0.0 and max(abs(h[i] - h[i + 1]) / 2 for i in range(11)) > support[0][1] + 4e-14
    bad = tmp_path / "low.json"
    bad.write_text(json.dumps(doc))
    r = _verify(bad)
    assert r.exit_code == 1 and "optimistic" in r.output, r.output
