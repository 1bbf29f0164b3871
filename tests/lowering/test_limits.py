"""Sizes just above every internal limit: the same answers whether or not a Jacobian is kept, a
block is dense, a Hessian is formed, the Gram columns are cached or an SVD is full.

Two kinds of test:

* ``auto`` (the default solver) at real sizes just above the Jacobian storage limit
  (``design.FULL_LIMIT`` entries), dense and sparse, least squares and logistic: it solves, and gives
  the answer it gives when the limit is raised so that the same Jacobian is kept;
* every registered solver, on every constraint kind it claims, on small problems solved twice: with
  the limits as shipped and with every internal limit set below the problem's size (so each switch
  takes its large-problem branch). The objective and the support must agree.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import scipy.sparse as sp

import sparsemodel as sm
from sparsemodel.errors import SolverError
from sparsemodel.lowering import active, constants, lowrank_solve
from sparsemodel.numerics import evaluation, newton
from sparsemodel.objective import columns
from sparsemodel.sets import lowrank
from sparsemodel.solvers import REGISTRY, get_solver

# every size switch of the package: module, name, the value that sends every problem here to the
# branch for large problems
LIMITS = [
    (columns, "FULL_LIMIT", 0),  # the whole Jacobian is kept below this
    (columns, "DENSE_LIMIT", 0),  # sparse reduced columns are densified below this
    (columns, "CHUNK_ENTRIES", 50),  # streamed blocks of columns
    (columns, "SMALL_DENSE", 0),
    (lowrank_solve, "MATERIALIZE_LIMIT", 0),  # a low-rank reduced design is formed explicitly below this
    (constants, "HESSIAN_CACHE_LIMIT", 0),  # cached columns of a constant Hessian
    (newton, "MATRIX_FREE_DIM", 2),  # Newton forms Hessians up to this dimension, CG above
    (evaluation, "CHUNK", 50),
    (evaluation, "FOLD_LIMIT", 0),  # a dense ridge term is folded into the diagonal below this
    (newton, "STALE_MIN_DIM", 1),  # Cholesky factors reused from this dimension
    (active, "_CHUNK", 50),
    (lowrank, "SVD_FULL_LIMIT", 0),  # full LAPACK SVD up to this min(p, m)
]


@contextlib.contextmanager
def tiny_limits():
    old = [(mod, name, getattr(mod, name)) for mod, name, _ in LIMITS]
    try:
        for mod, name, value in LIMITS:
            setattr(mod, name, value)
        yield
    finally:
        for mod, name, value in old:
            setattr(mod, name, value)


def test_every_limit_exists():
    """The list above names real switches (a renamed constant would silently test nothing)."""
    for mod, name, _ in LIMITS:
        assert isinstance(getattr(mod, name), int), f"{mod.__name__}.{name}"


# ---------------------------------------------------------------------- auto at real sizes


def _ls(n: int, p: int, k: int, sparse: bool, seed: int = 0) -> tuple[sm.Problem, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=0.05, random_state=seed, format="csc") if sparse else rng.standard_normal((n, p))
    w0 = np.zeros(p)
    S = rng.choice(p, k, replace=False)
    w0[S] = rng.choice([-1.0, 1.0], k) * rng.uniform(2, 3, k) * (4.0 if sparse else 1.0)
    y = X @ w0 + 0.1 * rng.standard_normal(n)
    w = sm.Variable(p, name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= k]), np.sort(S)


def _logistic(n: int, p: int, k: int, sparse: bool, seed: int = 0) -> tuple[sm.Problem, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=0.05, random_state=seed, format="csc") if sparse else rng.standard_normal((n, p))
    w0 = np.zeros(p)
    S = rng.choice(p, k, replace=False)
    w0[S] = rng.choice([-1.0, 1.0], k) * (12.0 if sparse else 3.0)
    v = np.where(rng.random(n) < 1 / (1 + np.exp(-(X @ w0))), 1.0, -1.0)
    w = sm.Variable(p + 1, name="w")
    obj = sm.mean(sm.logistic(-v * (X @ w[1:] + w[0]))) + 1e-3 / 2 * sm.sum_squares(w[1:])
    return sm.Problem(sm.minimize(obj), [sm.nnz(w[1:]) <= k]), np.sort(S)


@pytest.mark.parametrize(
    "make, sparse",
    [(_ls, False), (_ls, True), (_logistic, False), (_logistic, True)],
    ids=["least squares dense", "least squares sparse", "logistic dense", "logistic sparse"],
)
def test_auto_just_above_the_jacobian_storage_limit(make, sparse, monkeypatch):
    """n * p just above FULL_LIMIT: the Jacobian is not kept; auto still solves, and gives the
    answer it gives when the limit is raised so that the same Jacobian is kept."""
    n = 1001 if not sparse else 2001
    p = columns.FULL_LIMIT // n + 1  # n * p just above the limit
    assert n * p > columns.FULL_LIMIT
    prob, truth = make(n, p, 8, sparse)
    lp = prob.lower()
    assert lp.design.full_columns(0) is None  # the design term really is above the limit
    res = get_solver("auto")().solve(lp)
    assert res.status == "converged"
    monkeypatch.setattr(columns, "FULL_LIMIT", 10 * n * p)
    lp_kept = prob.lower()
    assert lp_kept.design.full_columns(0) is not None
    kept = get_solver("auto")().solve(lp_kept)
    assert res.objective == pytest.approx(kept.objective, rel=1e-9, abs=1e-12)
    assert np.array_equal(res.support, kept.support)
    if make is _ls:  # a strong signal: the truth is found
        assert np.array_equal(res.support, truth)


# ---------------------------------------------------------------------- every solver, every kind


def _problems() -> dict[str, sm.Problem]:
    rng = np.random.default_rng(3)
    out: dict[str, sm.Problem] = {}
    n, p = 60, 80
    X = rng.standard_normal((n, p))
    w0 = np.zeros(p)
    w0[[3, 17, 40, 66]] = [2.0, -2.5, 3.0, -1.5]
    y = X @ w0 + 0.1 * rng.standard_normal(n)
    w = sm.Variable(p, name="w")
    out["nnz"] = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= 4])
    wb = sm.Variable(p, name="w")
    yb = X @ np.abs(w0) + 0.1 * rng.standard_normal(n)
    out["box"] = sm.Problem(sm.minimize(sm.sum_squares(X @ wb - yb) / (2 * n)), [sm.nnz(wb) <= 4, wb >= 0])
    v = np.where(X @ w0 + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    wl = sm.Variable(p + 1, name="w")
    logit = sm.mean(sm.logistic(-v * (X @ wl[1:] + wl[0]))) + 0.05 / 2 * sm.sum_squares(wl[1:])
    out["nnz logistic"] = sm.Problem(sm.minimize(logit), [sm.nnz(wl[1:]) <= 3])
    wg = sm.Variable(40, name="w")
    Xg = X[:, :40]
    yg = Xg[:, [4, 5, 20, 21]] @ np.array([2.0, 1.0, -2.0, 1.5]) + 0.1 * rng.standard_normal(n)
    out["nnz_groups"] = sm.Problem(
        sm.minimize(sm.sum_squares(Xg @ wg - yg) / (2 * n)), [sm.nnz(wg, groups=np.repeat(np.arange(20), 2)) <= 2]
    )
    q, m, r = 46, 45, 1  # min(q, m) above 4 (r + 10): the truncated SVD can be subspace iteration
    Xr = rng.standard_normal((150, q))
    Wt = rng.standard_normal((q, r)) @ rng.standard_normal((r, m))
    Yr = Xr @ Wt + 0.1 * rng.standard_normal((150, m))
    W = sm.Variable((q, m), name="W")
    out["rank"] = sm.Problem(sm.minimize(sm.sum_squares(Xr @ W - Yr) / 300), [sm.rank(W) <= r])
    T = np.eye(8) * 2.0
    T[0, 1] = T[1, 0] = T[2, 5] = T[5, 2] = T[3, 7] = T[7, 3] = 0.6
    Z = rng.multivariate_normal(np.zeros(8), np.linalg.inv(T), size=400)
    S = np.cov(Z, rowvar=False)
    O = sm.Variable((8, 8), symmetric=True, name="O")
    out["eig_box"] = sm.Problem(
        sm.minimize(-sm.logdet(O) + sm.trace(S @ O)), [sm.nnz(sm.offdiag(O)) <= 6, sm.eig(O).between("auto", "auto")]
    )
    O2 = sm.Variable((8, 8), symmetric=True, name="O")
    out["nnz_pairs"] = sm.Problem(sm.minimize(-sm.logdet(O2) + sm.trace(S @ O2)), [sm.nnz(sm.offdiag(O2)) <= 6])
    return out


PROBLEMS = _problems()


def _cases() -> list[tuple[str, str]]:
    out = []
    for name, cls in sorted(REGISTRY.items()):
        for kind, prob in PROBLEMS.items():
            kinds = {c.kind for c in prob.constraints}
            if kinds <= cls.handles:
                out.append((name, kind))
    return out


STOCHASTIC = {"hsg_ht", "ahsg_ht", "sg_ht", "svrg_ht"}


@pytest.mark.parametrize("solver, kind", _cases(), ids=lambda v: v)
def test_every_solver_gives_the_same_answer_above_every_limit(solver, kind):
    prob = PROBLEMS[kind]
    opts = {"epochs": 5.0} if solver in STOCHASTIC else {}  # the same seeded run, shorter
    try:
        ref = get_solver(solver)(**opts).solve(prob.lower())
    except SolverError as exc:  # a refusal (a stochastic solver on a precision matrix: no finite sum)
        with tiny_limits(), pytest.raises(SolverError) as again:
            get_solver(solver)(**opts).solve(prob.lower())
        assert again.value.message == exc.message
        return
    with tiny_limits():
        lp = prob.lower()
        res = get_solver(solver)(**opts).solve(lp)
    assert res.status == ref.status
    assert res.objective == pytest.approx(ref.objective, rel=1e-6, abs=1e-9)
    if kind == "rank":
        assert res.extra["rank"] == ref.extra["rank"]
    else:
        assert np.array_equal(res.support, ref.support)


def test_small_problems_solve_on_one_blas_thread(monkeypatch):
    """Below BLAS_THREADS_LIMIT a solve runs with one BLAS thread (OpenBLAS's spinning second
    thread made small factorizations thousands of times slower on a busy machine); above it the
    user's setting is left alone."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from sparsemodel.solvers import base

    seen = []

    def spy(self, lp):
        seen.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
        return original(self, lp)

    original = base.REGISTRY["grahtp"].run
    monkeypatch.setattr(base.REGISTRY["grahtp"], "run", spy)
    prob = PROBLEMS["nnz"]
    with threadpool_limits(limits=2):
        get_solver("grahtp")().solve(prob.lower())
        monkeypatch.setattr(base, "BLAS_THREADS_LIMIT", 1)
        get_solver("grahtp")().solve(prob.lower())
    assert seen == [1, 2]


def test_a_solve_freezes_the_heap_it_found_and_gives_it_back(monkeypatch):
    """Inside a solve the objects alive before it are frozen (a full collection does not walk them);
    after it nothing stays frozen, objects made inside are collected as usual, and a heap the caller
    froze is left as the caller froze it."""
    import gc

    from sparsemodel.solvers import base

    seen = []

    def spy(self, lp):
        seen.append(gc.get_freeze_count())
        return original(self, lp)

    original = base.REGISTRY["grahtp"].run
    monkeypatch.setattr(base.REGISTRY["grahtp"], "run", spy)
    lp = PROBLEMS["nnz"].lower()
    assert gc.get_freeze_count() == 0
    get_solver("grahtp")().solve(lp)
    assert seen[-1] > 0 and gc.get_freeze_count() == 0

    import weakref

    class Cycle:
        pass

    def inside(self, lp):  # garbage made inside the solve is collected inside it
        a, b = Cycle(), Cycle()
        a.b, b.a = b, a
        ref = weakref.ref(a)
        del a, b
        gc.collect()
        seen.append(ref() is None)
        return original(self, lp)

    monkeypatch.setattr(base.REGISTRY["grahtp"], "run", inside)
    get_solver("grahtp")().solve(lp)
    assert seen[-1] is True
    gc.freeze()  # the caller's own freeze (a server before fork) is not undone
    try:
        get_solver("grahtp")().solve(lp)
        assert gc.get_freeze_count() > 0  # (an unfreeze of ours would have emptied it)
    finally:
        gc.unfreeze()
