"""The seams of the middle layer: the oracle and its counters, the design object (values,
gradients, Hessian-vector products, columns, mini-batches), the constraint sets, and the bound
read from one place (two bugs of the old sweep)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsemodel as sm
from sparsemodel.errors import ConstraintError
from sparsemodel.objective.affine import ExprMap, linearize
from sparsemodel.objective.evaluator import Evaluator
from sparsemodel.sets.lowrank import truncated_svd
from sparsemodel.workflows.compare import compare

RNG = np.random.default_rng(7)


def objectives():
    """(name, objective, constraint) covering the composite forms the design recognizes."""
    n, p, m = 40, 8, 3
    X = RNG.standard_normal((n, p))
    Xs = sp.random(n, p, density=0.4, random_state=1, format="csr")
    y = RNG.standard_normal(n)
    v = np.sign(RNG.standard_normal(n))
    Y = np.eye(m)[RNG.integers(0, m, n)]
    out = []
    w = sm.Variable(p + 1, name="w")
    out.append(
        ("logistic+intercept+ridge", sm.mean(sm.logistic(-v * (X @ w[1:] + w[0]))) + 0.1 / 2 * sm.sum_squares(w[1:]), w)
    )
    w2 = sm.Variable(p, name="w")
    out.append(("sparse least squares", sm.sum_squares(Xs @ w2 - y) / (2 * n) + sm.quad_form(w2, np.eye(p) * 0.3), w2))
    W = sm.Variable((p, m), name="W")
    Z = X @ W
    out.append(("softmax", sm.mean(sm.logsumexp(Z, axis=1) - sm.sum(Y * Z, axis=1)) + 0.05 * sm.sum_squares(W), W))
    W2 = sm.Variable((p, m), name="W")
    out.append(("multi-task", sm.sum_squares(X @ W2 - Y) / (2 * n) + 0.01 * sm.sum_squares(W2), W2))
    w3 = sm.Variable(p, name="w")
    c = np.abs(y) + 1
    out.append(("poisson", sm.mean(sm.exp(0.1 * (X @ w3)) - c * (0.1 * (X @ w3))), w3))
    w4 = sm.Variable(p, name="w")
    out.append(("huber, weighted", sm.sum(np.abs(y) * sm.huber(X @ w4 - y, M=0.5)), w4))
    L, S = sm.Variable((6, 4), name="L"), sm.Variable((6, 4), name="S")  # views without data (robust PCA)
    out.append(("matrix views", sm.sum_squares(RNG.standard_normal((6, 4)) - L - 2 * S), S))
    return out


@pytest.mark.parametrize("case", objectives(), ids=lambda c: c[0])
def test_design_value_gradient_and_hvp(case):
    """The design gives the tree's value and gradient, and Hessian-vector products that match
    differences of gradients."""
    _, obj, var = case
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(var) <= 3]).lower()
    assert lp.design is not None
    ev = Evaluator(obj, lp.layout)
    x = 0.3 * RNG.standard_normal(lp.n)
    f, g = lp.design.value_and_grad(x)
    f_ref, g_ref = ev.value_and_grad(x)
    assert f == pytest.approx(f_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-12)
    v = RNG.standard_normal(lp.n)
    h = 1e-6
    fd = (lp.design.value_and_grad(x + h * v)[1] - lp.design.value_and_grad(x - h * v)[1]) / (2 * h)
    np.testing.assert_allclose(lp.design.hvp(x, v), fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", objectives(), ids=lambda c: c[0])
def test_columns_match_the_tree_jacobian(case):
    """Canonical block columns equal the generic forward-mode Jacobian columns of the same map."""
    _, obj, var = case
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(var) <= 3]).lower()
    cols = np.sort(RNG.choice(lp.n, 5, replace=False))
    for t in lp.design.terms:
        expr_map = ExprMap(t.map.expr, lp.layout) if hasattr(t.map, "expr") else None
        if expr_map is None:
            continue
        a = t.map.columns(cols)
        b = expr_map.columns(cols)
        a = a.toarray() if sp.issparse(a) else a
        b = b.toarray() if sp.issparse(b) else b
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("case", objectives(), ids=lambda c: c[0])
def test_dense_jacobian_equals_all_columns(case):
    """The whole Jacobian written in place (what a kept Jacobian and the lean kernels read) equals
    the columns of every coordinate, block for block: intercepts broadcast to every row, per-row
    scales, sparse data, matrix views."""
    _, obj, var = case
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(var) <= 3]).lower()
    for t in lp.design.terms:
        if not getattr(t.map, "canonical", False):
            continue
        a = t.map.columns(np.arange(lp.n))
        a = a.toarray() if sp.issparse(a) else a
        np.testing.assert_array_equal(t.map.dense_jacobian(), a)


def test_dense_jacobian_of_overlapping_strided_and_scaled_blocks():
    """Two data blocks on the same coordinates add; a strided view gathers; scalars and per-row
    scales multiply: the whole Jacobian equals the columns of every coordinate."""
    X1, X2 = RNG.standard_normal((12, 5)), RNG.standard_normal((12, 5))
    X3 = RNG.standard_normal((12, 3))
    r = RNG.standard_normal(12)
    w = sm.Variable(6, name="w")
    u = sm.Variable(6, name="u")
    z = X1 @ w[1:] + 2.5 * (X2 @ w[1:]) + w[0] + r * (X3 @ u[::2]) - 3 * u[1]
    lp = sm.Problem(sm.minimize(sm.sum_squares(z)), [sm.nnz(w) <= 2]).lower()
    m = lp.design.terms[0].map
    assert m.canonical and len(m.blocks) >= 4
    a = m.columns(np.arange(lp.n))
    a = a.toarray() if sp.issparse(a) else a
    np.testing.assert_allclose(m.dense_jacobian(), a, rtol=1e-15, atol=0)
    # written over an array holding anything (a rebinding's, or fresh memory): every entry is set
    np.testing.assert_allclose(m.dense_jacobian(np.full(a.shape, np.nan)), a, rtol=1e-15, atol=0)


def test_dense_jacobian_of_a_matrix_view_is_written_from_the_data(monkeypatch):
    """X @ W (the softmax's Z = X W + b, a matrix variable, scaled, a submatrix view, one variable
    read twice): the whole Jacobian equals the columns of every coordinate, and a dense operator
    times a matrix view with each coordinate read once is written from the data directly, without
    a block's sparse columns (the lean path's first solve and every rebinding write it)."""
    from sparsemodel.objective.affine import Block

    X, X2 = RNG.standard_normal((15, 4)), RNG.standard_normal((15, 2))
    W, b, V = sm.Variable((4, 3), name="W"), sm.Variable(3, name="b"), sm.Variable((5, 3), name="V")
    Zs = [X @ W + b, -2.5 * (X @ W) + b, X @ W + X2 @ V[1:3, :], X @ W + X @ W]
    maps = []
    for Z in Zs:
        lp = sm.Problem(sm.minimize(sm.sum(sm.logsumexp(Z, axis=1))), [sm.nnz(W) <= 2]).lower()
        m = lp.design.terms[0].map
        assert m.canonical and any(len(blk.vshape) == 2 and blk.op is not None for blk in m.blocks)
        a = m.columns(np.arange(lp.n))
        maps.append((m, a.toarray() if sp.issparse(a) else a))
    calls = []
    real = Block.columns
    monkeypatch.setattr(Block, "columns", lambda self, *a: calls.append(self) or real(self, *a))
    for m, a in maps:
        np.testing.assert_allclose(m.dense_jacobian(), a, rtol=1e-15, atol=0)
    assert not [blk for blk in calls if blk.op is not None]  # (the views of b are written in place too)


@pytest.mark.parametrize("case", objectives(), ids=lambda c: c[0])
def test_columns_asked_twice_or_out_of_order_are_each_given(case):
    """Columns come back in the order asked, a repeated coordinate once per request."""
    _, obj, var = case
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(var) <= 3]).lower()
    cols = RNG.choice(lp.n, 4, replace=False)
    asked = np.concatenate([cols[::-1], cols[:2]])
    for t in lp.design.terms:
        a, b = t.map.columns(asked), t.map.columns(np.sort(cols))
        a = a.toarray() if sp.issparse(a) else np.asarray(a)
        b = b.toarray() if sp.issparse(b) else np.asarray(b)
        pos = {c: i for i, c in enumerate(np.sort(cols))}
        np.testing.assert_allclose(a, b[:, [pos[c] for c in asked]], rtol=1e-12, atol=1e-14)


def test_linearize_builds_blocks_over_the_users_data():
    X = RNG.standard_normal((20, 5))
    v = np.sign(RNG.standard_normal(20))
    w = sm.Variable(6, name="w")
    lp = sm.Problem(sm.minimize(sm.sum(sm.logistic(-v * (X @ w[1:] + w[0])))), [sm.nnz(w[1:]) <= 2]).lower()
    m = lp.design.terms[0].map
    assert m.canonical and len(m.blocks) == 2
    assert any(b.op is not None and b.op.A is X for b in m.blocks)  # no copy of the design
    e = linearize(-v * (X @ w[1:] + w[0]), lp.layout)
    x = RNG.standard_normal(6)
    np.testing.assert_allclose(e.value(x), -v * (X @ x[1:] + x[0]))


@pytest.mark.parametrize("case", objectives()[:4], ids=lambda c: c[0])
def test_mini_batches_are_unbiased_and_counted(case):
    """Averaging grad_batch over disjoint batches that cover the samples gives the full gradient;
    a batch of s rows counts s IFO, a full gradient n."""
    _, obj, var = case
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(var) <= 3]).lower().fresh()
    n = lp.design.n_samples
    assert n == 40
    x = 0.3 * RNG.standard_normal(lp.n)
    perm = RNG.permutation(n)
    batches = np.array_split(perm, 4)
    est = np.mean([lp.oracle.grad_batch(x, b) for b in batches], axis=0)
    np.testing.assert_allclose(est, lp.oracle.grad(x), rtol=1e-10, atol=1e-12)
    assert lp.oracle.ifo == n + n  # four batches covering n rows, then one full gradient
    before = lp.oracle.ifo
    lp.oracle.grad_batch(x, perm[:10])
    assert lp.oracle.ifo - before == 10


def test_the_sample_axis_and_terms_kept_exact():
    """The finite sum runs over the largest data axis; other terms are exact in every batch (the
    estimate stays unbiased); objectives without data rows or without a composite form have none."""
    X1, X2 = RNG.standard_normal((10, 4)), RNG.standard_normal((7, 4))
    w = sm.Variable(4, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(X1 @ w - 1) + sm.sum_squares(X2 @ w)), [sm.nnz(w) <= 2]).lower()
    assert lp.design.n_samples == 10 and lp.design.sample_terms == [0]
    x = RNG.standard_normal(4)
    est = np.mean([lp.design.grad_batch(x, b) for b in np.array_split(np.arange(10), 5)], axis=0)
    np.testing.assert_allclose(est, lp.design.value_and_grad(x)[1], rtol=1e-12)
    assert sm.Problem(sm.minimize(sm.sum_squares(w - 1)), [sm.nnz(w) <= 2]).lower().design.n_samples is None
    O = sm.Variable((3, 3), name="O", symmetric=True)
    assert sm.Problem(sm.minimize(-sm.logdet(O) + sm.trace(O))).lower().design is None


def test_every_run_has_its_own_counters():
    X = RNG.standard_normal((30, 10))
    y = RNG.standard_normal(30)
    w = sm.Variable(10, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w) <= 3])
    lp = prob.lower()
    a = sm.registry["iht"]().solve(lp)
    b = sm.registry["iht"]().solve(lp)
    assert a.counters == b.counters and a.counters["ifo"] > 0
    assert lp.oracle.ifo == 0  # the runs used fresh copies
    assert a.history["ifo"] == sorted(a.history["ifo"]) and a.counters["ht"] == a.history["ht"][-1]


# ---------------------------------------------------------------------- sets


def test_truncated_svd_is_the_best_rank_r_approximation():
    """Subspace iteration returns the leading triplets when there is a gap (the usual GraHTP
    iterate: rank r plus a small step), and falls back to the exact SVD when there is none."""
    low = RNG.standard_normal((300, 7)) @ RNG.standard_normal((7, 250)) * 10
    gap = low + 0.5 * RNG.standard_normal((300, 250))
    flat = RNG.standard_normal((300, 250)) @ np.diag(np.linspace(3, 0.01, 250)) @ RNG.standard_normal((250, 250))
    for M, expect in ((gap, "subspace"), (flat, "full (subspace iteration did not converge)")):
        U, s, Vt = np.linalg.svd(M, full_matrices=False)
        best = (U[:, :7] * s[:7]) @ Vt[:7]
        Ur, sr, Vtr, how = truncated_svd(M, 7, "subspace")
        assert how == expect
        np.testing.assert_allclose(sr, s[:7], rtol=1e-10)
        np.testing.assert_allclose((Ur * sr) @ Vtr, best, atol=1e-9 * s[0])
        Uf, sf, Vtf, how = truncated_svd(M, 7, "full")
        assert how == "full"
        np.testing.assert_allclose((Uf * sf) @ Vtf, best, atol=1e-12 * s[0])


def test_set_projections():
    w = sm.Variable(6, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(w - 1)), [sm.nnz(w, groups=np.array([0, 0, 1, 1, 2, 2])) <= 1]).lower()
    z = np.array([3.0, 0.0, 2.0, 2.5, -1.0, 0.1])
    x, sel = lp.set.project(z)
    np.testing.assert_array_equal(x, [0, 0, 2.0, 2.5, 0, 0])  # group norms 3, 3.2, 1.0
    W = sm.Variable((5, 4), name="W")
    lp = sm.Problem(sm.minimize(sm.sum_squares(W - 1)), [sm.rank(W) <= 2]).lower()
    z = RNG.standard_normal(20)
    x, st = lp.set.project(z)
    assert st.rank == 2 and np.linalg.matrix_rank(x.reshape(5, 4), tol=1e-10) == 2
    O = sm.Variable((4, 4), name="O", symmetric=True)
    lp = sm.Problem(sm.minimize(-sm.logdet(O) + sm.trace(O)), [sm.eig(O).between(0.5, 2.0)]).lower()
    A = RNG.standard_normal((4, 4))
    x, _ = lp.side[0].project((A + A.T).ravel())
    lam = np.linalg.eigvalsh(x.reshape(4, 4))
    assert lam.min() >= 0.5 - 1e-12 and lam.max() <= 2.0 + 1e-12


def test_with_budget_validates_with_the_constraints_location():
    prob = sm.parse("var w[5]\nminimize sum_squares(w - 1)\nsubject to\n    nnz(w) <= 2\n")
    lp = prob.lower()
    with pytest.raises(ConstraintError, match="has only 5 coordinates") as e:
        lp.set.with_budget(9)
    assert e.value.span.line == 4
    with pytest.raises(ConstraintError, match="nonnegative"):
        lp.set.with_budget(-1)


# ---------------------------------------------------------------------- the bound in one place


def test_compare_at_a_param_sweeps_the_param_not_the_bound():
    """Bug: `compare with grahtp, omp at lam in 1:3` was swept as the nnz bound."""
    X = RNG.standard_normal((40, 10))
    y = X[:, :3] @ np.array([3.0, -2.0, 1.0]) + 0.1 * RNG.standard_normal(40)
    text = (
        "data X : matrix\ndata y : vector\nparam lam = 1\nvar w[cols(X)]\n"
        "minimize sum_squares(X @ w - y) / 2 + lam / 2 * sum_squares(w)\n"
        "subject to\n    nnz(w) <= 3\ncompare with grahtp, omp at lam in 1:3\n"
    )
    prob = sm.parse(text, data={"X": X, "y": y})
    assert "at lam in 1:3" in prob.check().render()
    assert prob.compare_with["k"] is None and prob.compare_with["values"] == [1, 2, 3]
    comp = compare(prob, ["grahtp", "omp"], sweep=("lam", [1, 2, 3]), progress=False)
    assert comp.column == "lam" and comp.values == [1, 2, 3]
    assert [r["budget"] for r in comp.rows] == [3] * 6  # the bound never moved
    objs = [comp.row("grahtp", v)["objective"] for v in (1, 2, 3)]
    assert objs[0] < objs[1] < objs[2]  # a larger ridge weight costs more
    for v in (1, 2, 3):  # each run solved the problem with lam = v
        res = comp.results[("grahtp", v)]
        w = res.x
        f = 0.5 * np.sum((X @ w - y) ** 2) + v / 2 * np.sum(w * w)
        assert res.objective == pytest.approx(f, rel=1e-10)
    assert prob.params["lam"].value == 1  # restored
    assert comp.table().splitlines()[1].split()[0] == "lam"


def precision_problem(k_expr: str = "k"):
    p = 6
    Z = RNG.standard_normal((200, p))
    text = (
        "data Z : matrix\nlet S = cov(Z)\nparam k = 2\n"
        f"var O[cols(Z), cols(Z)] symmetric\nminimize -logdet(O) + trace(S @ O)\n"
        f"subject to\n    nnz(offdiag(O)) <= {k_expr}\n"
    )
    return sm.parse(text, data={"Z": Z})


def test_symmetric_pairs_sweep_counts_edges_everywhere():
    """k once meant edges in a param sweep and entries in --k / k= / Result.k. Now k counts
    what is selected, edges (a pair O[i,j], O[j,i]), in the sweep, the table, Result.k and check,
    while the bound as written counts entries as nnz does (nnz(offdiag(O)) <= 4 is 2 edges)."""
    prob = precision_problem("4")
    assert prob.lower().budget == 2
    comp = compare(prob, ["grahtp"], k=[2, 3], options={"grahtp": {"init": np.eye(6)}}, progress=False)
    assert [r["k"] for r in comp.rows] == [2, 3]
    assert [r["budget"] for r in comp.rows] == [2, 3] and {r["unit"] for r in comp.rows} == {"edges"}
    for k in (2, 3):
        res = comp.results[("grahtp", k)]
        assert res.k == k and res.unit == "edges" and res.k_text == f"k = {k} edges ({2 * k} entries)"
        off = res.x - np.diag(np.diag(res.x))
        assert np.count_nonzero(off) == 2 * k  # k pairs, mirrored
        assert res.bound == f"nnz(offdiag(O)) <= {2 * k}"
    assert comp.table().splitlines()[1].split()[:2] == ["k", "(edges)"]
    assert "budget k = 2 edges = 4 entries" in prob.check().render()
    assert prob.solve("grahtp", k=3, init=np.eye(6)).k == 3  # k= is edges too


def test_a_param_in_the_bound_moves_the_bound():
    """param k with nnz(offdiag(O)) <= 2 * k: the param, the sweep's column, the budget and
    Result.k are one number (edges)."""
    prob = precision_problem("2 * k")
    comp = compare(prob, ["grahtp"], sweep=("k", [1, 2, 3]), options={"grahtp": {"init": np.eye(6)}}, progress=False)
    assert comp.column == "k" and [r["budget"] for r in comp.rows] == [1, 2, 3]
    assert [comp.results[("grahtp", v)].k for v in (1, 2, 3)] == [1, 2, 3]
    assert comp.table().splitlines()[1].split()[:2] == ["k", "(edges)"]


@pytest.mark.parametrize("view", ["W", "W[1:, :]", "W[:, ::2]", "W[::-1, :]", "W[::-2, ::-1]"])
def test_dense_jacobian_of_a_matrix_product_with_any_view_of_its_variable(view):
    """X @ W writes X into each column of W's coordinates: through a strided view where they are an
    increasing progression (W's columns, util.progression), by a gather and scatter where not
    (rows reversed): the same Jacobian as the columns of every coordinate either way."""
    from sparsemodel.util import progression

    W = sm.Variable((7, 3), name="W")
    V = eval(view, {"W": W})
    X = RNG.standard_normal((9, V.shape[0]))
    Y = RNG.standard_normal((9, V.shape[1]))
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ V - Y)), [sm.nnz(W) <= 2]).lower()
    m = lp.design.terms[0].map
    a = m.columns(np.arange(lp.n))
    a = a.toarray() if sp.issparse(a) else a
    np.testing.assert_array_equal(m.dense_jacobian(np.full(a.shape, np.nan)), a)
    assert progression(np.array([1, 4, 7, 10])) == slice(1, 11, 3)
    for idx in ([2, 0, 1], [1, 2, 4], [5], [3, 3]):  # (decreasing, uneven, one entry, repeated)
        assert progression(np.array(idx)) is not None and not isinstance(progression(np.array(idx)), slice)
