"""A row-wise softmax term's Hessian by pairs of classes (``Term.class_hessian``, what the Newton
steps of the Python pipeline form for Z = X W + b) equals J' (H J) over the whole columns, and
``Term.class_columns`` finds which class each column reads (None when one reads several)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsemodel as sm
from sparsemodel.numerics.evaluation import evaluate


def softmax_design(n: int, p: int, K: int, seed: int, ridge: float = 0.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    Y = np.eye(K)[rng.integers(0, K, n)]
    W, b = sm.Variable((p, K), name="W"), sm.Variable(K, name="b")
    Z = X @ W + b
    obj = sm.sum(sm.logsumexp(Z, axis=1)) - sm.sum(Y * Z)
    if ridge:
        obj = obj + ridge / 2 * sm.sum_squares(W)
    lp = sm.Problem(sm.minimize(obj), [sm.nnz(W) <= p * K]).lower()
    return lp, rng


@pytest.mark.parametrize("K", [2, 3, 7])
def test_the_blocks_by_class_equal_the_hessian_of_the_whole_columns(K):
    lp, rng = softmax_design(40, 6, K, K)
    d = lp.design
    ti = next(i for i, t in enumerate(d.terms) if t.rowwise)
    t = d.terms[ti]
    cols = rng.permutation(lp.n)[: lp.n - 3]  # (some classes short of a column, the order mixed)
    J = d.reduced(cols).Js[ti]
    for Jf in (np.asarray(J.toarray() if sp.issparse(J) else J), sp.csr_matrix(J)):
        V, cls = t.class_columns(Jf)
        z = rng.standard_normal(Jf.shape[0]) * 3
        Jd = Jf.toarray() if sp.issparse(Jf) else Jf
        want = Jd.T @ t.hessian_apply(z, Jd)
        got = t.class_hessian(z, V, cls)
        assert np.abs(got - want).max() <= 1e-12 * (1 + np.abs(want).max())
        assert np.abs(got - got.T).max() <= 1e-13 * (1 + np.abs(want).max())


def test_a_column_that_reads_two_classes_has_no_class():
    lp, rng = softmax_design(20, 3, 3, 0)
    d = lp.design
    ti = next(i for i, t in enumerate(d.terms) if t.rowwise)
    J = d.reduced(np.arange(lp.n)).Js[ti]
    J = J.toarray() if sp.issparse(J) else np.array(J)
    assert d.terms[ti].class_columns(J) is not None
    J2 = J.copy()
    J2[1::3, 0] = J[0::3, 0]  # column 0 now also reads class 1
    assert d.terms[ti].class_columns(J2) is None


def test_the_newton_hessian_of_a_restricted_softmax_is_the_general_one():
    """The Hessian the Newton loop forms (numerics/evaluation, blocks by class) against the
    loss's Hessian applied to the columns, with a ridge folded in."""
    lp, rng = softmax_design(50, 5, 4, 1, ridge=0.3)
    cols = np.sort(rng.choice(lp.n, 12, replace=False))
    rd = lp.design.reduced(cols)
    u = rng.standard_normal(len(cols))
    f, g, H = evaluate(rd, u)
    ti = next(i for i, t in enumerate(rd.terms) if t.rowwise)
    t = rd.terms[ti]
    J = rd.Js[ti].toarray() if sp.issparse(rd.Js[ti]) else np.asarray(rd.Js[ti])
    z = J @ u + rd.offsets[ti]
    want = t.coef * (J.T @ t.hessian_apply(z, J))
    for i, ot in enumerate(rd.terms):  # the ridge's diagonal (and any other elementwise term)
        if i != ti:
            Ji = rd.Js[i].toarray() if sp.issparse(rd.Js[i]) else np.asarray(rd.Js[i])
            want += ot.coef * (Ji.T @ (Ji * ot.derivs(Ji @ u + rd.offsets[i], 2)[2][:, None]))
    assert np.abs(H - want).max() <= 1e-11 * (1 + np.abs(want).max())


@pytest.mark.parametrize("sparse", [False, True])
def test_the_maps_class_values_are_the_columns_class_by_class(sparse):
    """``AffineMap.class_values`` (the candidates' values read from X @ W + b's blocks, what the swap
    model takes when no Jacobian is stored) equals ``Term.class_columns`` of the gathered columns,
    scaled maps included; a map whose blocks read a column twice gives None."""
    rng = np.random.default_rng(4)
    n, p, K = 30, 7, 4
    X = rng.standard_normal((n, p))
    Xd = sp.csr_matrix(X * (rng.random(X.shape) < 0.4)) if sparse else X
    W, b = sm.Variable((p, K), name="W"), sm.Variable(K, name="b")
    Y = np.eye(K)[rng.integers(0, K, n)]
    for Z in (Xd @ W + b, 2.5 * (Xd @ W - b) / 3, Xd @ W):
        obj = sm.sum(sm.logsumexp(Z, axis=1)) - sm.sum(Y * Z)
        lp = sm.Problem(sm.minimize(obj), [sm.nnz(W) <= 5]).lower()
        d = lp.design
        ti = next(i for i, t in enumerate(d.terms) if t.rowwise)
        t = d.terms[ti]
        cols = rng.permutation(lp.n)[: lp.n // 2]
        got, want = t.map.class_values(cols), t.class_columns(d.term_columns(ti, cols))
        assert got is not None and want is not None
        assert np.abs(got[0] - want[0]).max() <= 1e-15 * np.abs(want[0]).max()
        assert np.array_equal(got[1][np.abs(want[0]).max(axis=0) > 0], want[1][np.abs(want[0]).max(axis=0) > 0])
    Z2 = X @ W + X[:, ::-1] @ W  # two blocks read every column of W
    lp = sm.Problem(sm.minimize(sm.sum(sm.logsumexp(Z2, axis=1)) - sm.sum(Y * Z2)), [sm.nnz(W) <= 5]).lower()
    t = next(t for t in lp.design.terms if t.rowwise)
    assert t.map.class_values(np.arange(lp.n)) is None


def test_the_swap_model_without_stored_columns_reads_the_same_blocks(monkeypatch):
    """A softmax above the storage limit (no stored Jacobian: the swap model reads the candidates'
    values from the map's blocks) ends where the same problem with its Jacobian stored does."""
    from sparsemodel.objective import columns as columns_mod
    from sparsemodel.solvers import get_solver
    from tests.solvers.test_lean import multinomial

    def solve():
        return get_solver("auto")(lean=False).solve(multinomial(120, 30, 3, 7, ridge=1.0).lower())

    stored = solve()
    monkeypatch.setattr(columns_mod, "FULL_LIMIT", 10)
    streamed = solve()
    assert list(streamed.support) == list(stored.support)
    assert abs(streamed.objective - stored.objective) <= 1e-9 * abs(stored.objective)


def test_a_softmax_of_an_expression_map_above_the_storage_limit_reads_its_columns(monkeypatch):
    """Z = X @ (W @ R) is no block form (an expression map, no class_values): the swap model reads
    its columns, above the storage limit too, and ends where the stored run does."""
    from sparsemodel.objective import columns as columns_mod
    from sparsemodel.solvers import get_solver

    rng = np.random.default_rng(0)
    n, p, K = 60, 8, 3
    X, R = rng.standard_normal((n, p)), rng.standard_normal((K, K))
    Y = np.eye(K)[rng.integers(0, K, n)]

    def solve():
        W = sm.Variable((p, K), name="W")
        Z = X @ (W @ R)
        obj = sm.sum(sm.logsumexp(Z, axis=1)) - sm.sum(Y * Z) + 0.5 * sm.sum_squares(W)
        lp = sm.Problem(sm.minimize(obj), [sm.nnz(W, groups=np.repeat(np.arange(p), K)) <= 2]).lower()
        assert not hasattr(next(t for t in lp.design.terms if t.rowwise).map, "class_values")
        return get_solver("auto")(lean=False).solve(lp)

    stored = solve()
    monkeypatch.setattr(columns_mod, "FULL_LIMIT", 10)
    streamed = solve()
    assert streamed.status == stored.status == "converged"
    assert list(streamed.support) == list(stored.support)
    assert abs(streamed.objective - stored.objective) <= 1e-9 * abs(stored.objective)
