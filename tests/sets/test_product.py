"""Several bounded variables in one model (a product of sets, sets/product.py): the projection is
each part's own projection, robust PCA recovers L and S on abess's own test problem, the model
file and the builder give one answer, a problem small enough to enumerate is solved exactly, the
bounds are given by name (and a single number is refused with the names), and the solvers that do
not work through the set protocol refuse the product at the second bound's line."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.datasets import low_rank_plus_sparse
from sparsemodel.errors import ConstraintError, SolverError
from sparsemodel.sets.product import Budgets, ProductSet
from sparsemodel.sets.registry import KINDS
from sparsemodel.workflows.criteria import SelectionError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def rpca(X: np.ndarray, r: int, s: int) -> tuple[sm.Problem, sm.Variable, sm.Variable]:
    L = sm.Variable(X.shape, name="L")
    S = sm.Variable(X.shape, name="S")
    return sm.Problem(sm.minimize(sm.sum_squares(X - L - S) / 2), [sm.rank(L) <= r, sm.nnz(S) <= s]), L, S


def small_rpca(seed: int = 0, n: int = 12, p: int = 8, r: int = 2, s: int = 6) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    L0 = rng.standard_normal((n, r)) @ rng.standard_normal((r, p))
    S0 = np.zeros(n * p)
    S0[rng.choice(n * p, s, replace=False)] = rng.choice([-1, 1], s) * rng.uniform(4, 8, s)
    return L0 + S0.reshape(n, p), L0, S0.reshape(n, p)


def test_the_projection_projects_each_part_with_its_own_set():
    X, _, _ = small_rpca()
    prob, L, S = rpca(X, 2, 6)
    lp = prob.lower()
    assert isinstance(lp.set, ProductSet) and lp.set.names == ["L", "S"]
    rng = np.random.default_rng(1)
    z = 3 * rng.standard_normal(lp.n)
    x, st = lp.set.project(z)
    Z = {v.name: lp.layout.get(z, v) for v in (L, S)}
    # the parts alone: the truncated SVD of L and the top 6 entries of S (computed here, independently)
    U, sv, Vt = np.linalg.svd(Z["L"], full_matrices=False)
    assert np.allclose(lp.layout.get(x, L), (U[:, :2] * sv[:2]) @ Vt[:2])
    top = np.argsort(-np.abs(Z["S"]).ravel())[:6]
    want = np.zeros(Z["S"].size)
    want[top] = Z["S"].ravel()[top]
    assert np.allclose(lp.layout.get(x, S).ravel(), want)
    # and each part is what the one-constraint models project to
    for c in prob.constraints:
        alone = sm.Problem(prob.objective, [c]).lower().set
        y, _ = alone.project(z)
        assert np.allclose(y[alone.coords], x[alone.coords])
    assert lp.set.used(st) == {"L": 2, "S": 6} and lp.set.used(st) <= lp.set.budget
    # nearest: the squared distance is the sum of the parts' (no feasible point is nearer)
    d = np.linalg.norm(x - z)
    for _ in range(50):
        y = lp.set.project(z + rng.standard_normal(lp.n) * rng.uniform(0.05, 2))[0]
        assert d <= np.linalg.norm(y - z) + 1e-9


def test_budgets_scale_and_compare_part_by_part():
    b = Budgets({"L": 2, "S": 6}, {"L": "rank", "S": "coordinates"})
    assert 2 * b == {"L": 4, "S": 12} and b + 1 == {"L": 3, "S": 7}
    assert b * 0 == 0 and not b == 2 and Budgets({"L": 2, "S": 2}) == 2
    assert b <= {"L": 2, "S": 7} and not b <= {"L": 1, "S": 7} and b >= 2 and not b >= 3
    assert str(b) == "L=2, S=6" and b.text() == "L: r = 2; S: k = 6 coordinates"
    assert hash(Budgets({"L": 2, "S": 2})) == hash(2)


def test_robust_pca_recovers_l_and_s_on_abess_test_problem():
    X, L0, S0 = low_rank_plus_sparse()  # abess python/pytest test_RPCA: n = 100, p = 20, s = 30, r = 5
    prob, _, _ = rpca(X, 5, 30)
    for solver in ("auto", "iht"):
        r = prob.solve(solver)
        assert r.variable == "S" and r.k == {"L": 5, "S": 30}
        assert set(r.support_of("S")) == set(np.flatnonzero(S0)), solver
        assert r.blocks["L"]["rank"] == 5
        assert np.linalg.norm(r.values["L"] - L0) <= 1e-4 * np.linalg.norm(L0), solver
        assert np.linalg.norm(r.values["S"] - S0) <= 1e-4 * np.linalg.norm(S0), solver
        assert r.certificate["ht_stable"]


def test_the_joint_step_adds_the_parts_curvatures():
    """Each part alone has curvature 1 (sum_squares(X - L - S) / 2), L + S moves both: GraHTP's unit
    step is 1/2, with which it recovers the outliers (with 1 it stopped at 25 of 30)."""
    X, _, S0 = low_rank_plus_sparse()
    prob, _, _ = rpca(X, 5, 30)
    lp = prob.lower()
    assert np.isclose(lp.mean_curvature(), 2.0)
    r = prob.solve("grahtp")
    assert np.isclose(r.extra["eta"], 0.5) and set(r.support_of("S")) == set(np.flatnonzero(S0))


def test_a_problem_small_enough_to_enumerate_is_solved_exactly():
    """Two nnz bounds on disjoint slices of one vector (at most 1 of w[:4] and 2 of w[4:]): auto
    and grahtp end at the best of the 4 * 6 supports (every restricted least-squares fit)."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 8))
    w0 = np.array([0, 0, 2.0, 0, 0, -1.5, 0, 1.0])
    y = X @ w0 + 0.3 * rng.standard_normal(30)
    w = sm.Variable(8, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w[:4]) <= 1, sm.nnz(w[4:]) <= 2])
    assert prob.lower().set.names == ["w[:4]", "w[4:]"]
    best = min(
        float(np.sum((X[:, list(a + b)] @ np.linalg.lstsq(X[:, list(a + b)], y, rcond=None)[0] - y) ** 2))
        for a in itertools.combinations(range(4), 1)
        for b in itertools.combinations(range(4, 8), 2)
    )
    for solver in ("auto", "grahtp", "iht"):
        r = prob.solve(solver)
        assert np.isclose(r.objective, best, rtol=1e-8), solver
        assert len(r.support_of("w[:4]")) <= 1 and len(r.support_of("w[4:]")) <= 2


def test_the_model_file_and_the_builder_give_one_answer(tmp_path):
    data = np.load(EXAMPLES / "data" / "rpca.npz")
    X = data["X"]
    assert np.array_equal(X, low_rank_plus_sparse()[0])
    built = rpca(X, 5, 30)[0].solve()
    read = sm.load(str(EXAMPLES / "robust_pca.sm"))
    got = read.solve()
    assert np.isclose(got.objective, built.objective, rtol=1e-9, atol=1e-12)
    for name in ("L", "S"):
        assert np.allclose(got.values[name], built.values[name], atol=1e-8)
    assert got.blocks["S"]["support"] == built.blocks["S"]["support"]
    # the CLI solves it with the bounds by name and writes every part to JSON
    out = tmp_path / "r.json"
    assert main(["solve", str(EXAMPLES / "robust_pca.sm"), "--k", "S=20", "--out", str(out), "--quiet"]) == 0
    d = json.loads(out.read_text())
    assert d["k"] == {"L": 5, "S": 20} and d["unit"] == "per variable" and d["variable"] == "S"
    assert len(d["blocks"]["S"]["support"]) == 20 and d["blocks"]["L"]["rank"] == 5


def test_bounds_are_given_by_name_and_a_single_number_is_refused(capsys):
    X, _, _ = small_rpca()
    prob, _, _ = rpca(X, 2, 6)
    r = prob.solve("iht", k={"S": 4})  # a name left out keeps its bound
    assert r.k == {"L": 2, "S": 4} and len(r.support) <= 4 and r.unit == "per variable"
    assert r.k_text == "L: r = 2; S: k = 4 coordinates"
    with pytest.raises(ConstraintError) as e:
        prob.solve(k=4)
    assert "2 bounds" in e.value.message and "does not say which" in e.value.message
    assert "k={'L': 2, 'S': 6}" in e.value.hint and "--k L=2,S=6" in e.value.hint
    with pytest.raises(ConstraintError) as e:
        prob.solve(k={"s": 4})
    assert "did you mean 'S'" in e.value.message
    with pytest.raises(ConstraintError) as e:
        prob.solve(k={"L": 9})
    assert "rank(L) <= 9" in e.value.message and "8" in e.value.message
    # compare and path take lists of named bounds
    comp = prob.compare(["grahtp", "iht"], k=[{"S": 3}, {"S": 6}], progress=False)
    assert [row["budget"] for row in comp.rows if row["solver"] == "iht"] == [{"L": 2, "S": 3}, {"L": 2, "S": 6}]
    path = prob.path(k=[{"S": 2}, {"S": 4}, {"S": 6}], solver="iht")
    objs = [p.result.objective for p in path.points]
    assert objs == sorted(objs, reverse=True)
    multi = sm.Problem.of(KINDS["product"].example())  # select: a list of named bounds, no default
    with pytest.raises(SelectionError) as e:
        multi.select()
    assert "several bounds" in e.value.message and "--k B=1:10" in e.value.hint
    chosen = multi.select(k=[{"B": b} for b in (3, 5, 8)], by="bic")
    assert chosen.k == {"W": 2, "B": 5}  # the truth has 5 nonzeros
    # one bound may be named too, by its variable
    w = sm.Variable(8, name="w")
    one = sm.Problem(sm.minimize(sm.sum_squares(w - np.arange(8.0))), [sm.nnz(w) <= 3])
    assert one.solve(k={"w": 2}).k == 2
    with pytest.raises(ConstraintError):
        one.solve(k={"v": 2})
    # the CLI: one number refused (exit 2, no traceback), a value without a name refused
    data = EXAMPLES / "robust_pca.sm"
    assert main(["solve", str(data), "--k", "20", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "does not say which" in err and "Traceback" not in err
    assert main(["solve", str(data), "--k", "S=20,L", "--quiet"]) == 2
    assert "by name" in capsys.readouterr().err


def test_a_bound_sweep_of_several_bounds_is_refused_at_the_sweep(tmp_path):
    (tmp_path / "X.csv").write_text("\n".join(",".join("1" for _ in range(4)) for _ in range(6)))
    text = (
        'data X : matrix from "X.csv"\nvar L[6, 4]\nvar S[6, 4]\nminimize sum_squares(X - L - S)\n'
        "subject to\n    rank(L) <= 1\n    nnz(S) <= 2\ncompare with grahtp, iht at k in 1:3\n"
    )
    with pytest.raises(ConstraintError) as e:
        sm.parse(text, base_dir=tmp_path)
    assert e.value.span.line == 8 and e.value.span.column == 26
    assert "k does not say which" in e.value.message and "param s" in e.value.hint


def test_solvers_outside_the_protocol_refuse_at_the_second_bound(tmp_path):
    np.savetxt(tmp_path / "X.csv", small_rpca()[0], delimiter=",")
    text = (
        'data X : matrix from "X.csv"\nvar L[12, 8]\nvar S[12, 8]\nminimize sum_squares(X - L - S)\n'
        "subject to\n    rank(L) <= 2\n    nnz(S) <= 6\n"
    )
    prob = sm.parse(text, base_dir=tmp_path)
    for solver in ("omp", "lasso", "nuclear", "foba"):
        with pytest.raises(SolverError) as e:
            prob.solve(solver)
        assert e.value.span is not None and e.value.span.line in (6, 7), solver
        assert "grahtp" in e.value.hint and "iht" in e.value.hint
    assert "product" in prob.check().render()
    # the protocol solvers take the product; the stochastic ones also need a finite sum over data
    # rows, and X enters only as an offset here (no sample axis): they are refused for that reason
    assert {n for n, _ in prob.check().solvers} == {"auto", "grahtp", "fgrahtp", "iht"}
    for solver in ("hsg_ht", "ahsg_ht", "sg_ht", "svrg_ht"):
        with pytest.raises(SolverError, match="finite sum"):
            prob.solve(solver)


def test_two_bounds_on_the_same_coordinates_or_with_a_box_are_refused():
    W = sm.Variable((6, 5), name="W")
    Y = np.ones((6, 5))
    both = sm.Problem(sm.minimize(sm.sum_squares(W - Y)), [sm.rank(W) <= 2, sm.nnz(W) <= 4])
    with pytest.raises(ConstraintError) as e:
        both.lower()
    assert "same coordinates" in e.value.message
    L, S = sm.Variable((6, 5), name="L"), sm.Variable((6, 5), name="S")
    boxed = sm.Problem(sm.minimize(sm.sum_squares(L + S - Y)), [sm.rank(L) <= 2, sm.nnz(S) <= 4, S >= 0])
    with pytest.raises(ConstraintError) as e:
        boxed.lower()
    assert "box" in e.value.message


def test_the_summary_and_the_coefficients_show_each_part():
    X, _, S0 = small_rpca()
    r = rpca(X, 2, 6)[0].solve()
    text = r.summary()
    assert "rank(L) <= 2: r = 2; nnz(S) <= 6: k = 6 coordinates" in text
    assert "L           rank 2 of at most 2" in text and "S           6 selected" in text
    rows = r.coefficients()
    assert {row["variable"] for row in rows} == {"S"} and len(rows) == 6  # L is dense: in blocks, not listed
    assert len(r.coefficients(all=True)) == 2 * X.size
