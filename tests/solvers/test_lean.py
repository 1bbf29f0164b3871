"""The lean path: ``auto``'s pipeline in one compiled call (sparsemodel/numerics/_lean.pyx) gives the
Python pipeline's answers (the same steps: the same supports and objectives to rounding) on the
problem families of benchmarks/vs_abess.py that it covers, falls back to the Python pipeline where
its kernel meets a case it does not treat, and is not used outside its class."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsemodel as sm
from sparsemodel.datasets import sparse_linear_regression, sparse_logistic_regression
from sparsemodel.lowering import lean as lean_mod
from sparsemodel.solvers import get_solver

pytest.importorskip("sparsemodel.numerics._lean", reason="the compiled kernels are not built (pip install -e .)")

AUTO = get_solver("auto")
REL = 1e-9  # the objectives agree to rounding: the benchmarks' tolerance (f <= f_ref + 1e-9 max(1, |f_ref|))


def glm(family: str, n: int, p: int, k: int, seed: int, ridge: float = 0.0, intercept: bool = True) -> sm.Problem:
    """The data of vs_abess.py's GLM families (abess.datasets.make_glm_data: an equicorrelated design,
    rho = 0.5, k nonzeros), drawn here with NumPy; the losses as vs_abess.py writes them."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + np.sqrt(0.5 / 0.5) * rng.standard_normal((n, 1))
    X /= np.sqrt(2.0)
    beta = np.zeros(p)
    beta[rng.choice(p, k, replace=False)] = rng.choice([-1.0, 1.0], k) * rng.uniform(0.5, 1.5, k)
    eta = X @ beta
    w = sm.Variable(p + 1 if intercept else p, name="w")
    coef = w[1:] if intercept else w
    z = X @ coef + w[0] if intercept else X @ coef
    if family == "gaussian":
        y = eta + rng.standard_normal(n)
        loss = sm.sum_squares(z - y)
    elif family == "binomial":
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
        loss = sm.sum(sm.logistic(-(2 * y - 1) * z))
    elif family == "poisson":
        y = rng.poisson(np.exp(0.5 * eta)).astype(float)
        loss = sm.sum(sm.exp(z) - y * z)
    else:  # gamma, canonical link: mean 1 / z with z > 0
        mu = 1.0 / (1.0 + np.exp(-eta))  # positive means
        y = rng.gamma(2.0, mu / 2.0)
        loss = sm.sum(y * z - sm.log(z))
    if ridge:
        loss = loss + ridge / 2 * sm.sum_squares(coef)
    return sm.Problem(sm.minimize(loss), [sm.nnz(coef) <= k])


def both(prob: sm.Problem, **opts):
    lp = prob.lower()
    lean = AUTO(**opts).solve(lp)
    python = AUTO(lean=False, **opts).solve(lp)
    return lean, python


def agree(lean, python) -> None:
    assert lean.extra.get("kernel") == "compiled"
    assert "kernel" not in python.extra
    assert lean.status == python.status
    assert abs(lean.objective - python.objective) <= REL * max(1.0, abs(python.objective))
    assert list(lean.support) == list(python.support)
    assert lean.extra["swaps"] == python.extra["swaps"]
    assert [s["start"] for s in lean.extra["starts"]] == [s["start"] for s in python.extra["starts"]]


@pytest.mark.parametrize("family", ["gaussian", "binomial", "poisson", "gamma"])
@pytest.mark.parametrize("size", [(100, 20, 3), (300, 60, 6)])
def test_the_kernel_gives_the_python_pipeline_answer(family, size):
    n, p, k = size
    for seed in range(2):
        agree(*both(glm(family, n, p, k, seed)))


@pytest.mark.parametrize("family", ["gaussian", "binomial"])
def test_ridge_no_intercept_and_other_options(family):
    agree(*both(glm(family, 120, 25, 4, 3, ridge=0.5)))
    agree(*both(glm(family, 120, 25, 4, 4, intercept=False)))
    prob = glm(family, 120, 25, 4, 5)
    agree(*both(prob, start="screen"))
    agree(*both(prob, start="grahtp", exchange=2, tries=1, pool=8, candidates=4))
    lp = prob.lower()
    init = np.zeros(26)
    init[[1, 2]] = 1.0  # a short init: filled to k by the model's gains
    agree(AUTO(init=init).solve(lp), AUTO(init=init, lean=False).solve(lp))


def test_paper_000_section_61_and_62_problems():
    """Near the phase transition of paper 000, Section 6.1 (n = 175, p = 500, k = 50; screened
    pools, several swaps at once) and the logistic problem of Section 6.2 (k = 50 of 200)."""
    X, y, _ = sparse_linear_regression(175, seed=1)
    w = sm.Variable(X.shape[1], name="w")
    agree(*both(sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / 350), [sm.nnz(w) <= 50])))
    X, v, _ = sparse_logistic_regression(200, seed=0)
    w = sm.Variable(X.shape[1], name="w")
    prob = sm.Problem(sm.minimize(sm.mean(sm.logistic(-v * (X @ w))) + 1e-5 / 2 * sm.sum_squares(w)), [sm.nnz(w) <= 20])
    agree(*both(prob))


def test_the_kernels_scratch_arena_lends_nothing_past_a_call():
    """A call's short-lived arrays are slices of the Problem's arena (numerics/_lean.pyx): an answer
    handed back must be a copy, untouched by the calls after it, and a call that outruns the arena
    (Section 6.1's first solve: 50 coordinates, many swap models) must give what a call inside the
    grown arena gives."""
    X, y, _ = sparse_linear_regression(175, seed=2)
    w = sm.Variable(X.shape[1], name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / 350), [sm.nnz(w) <= 50]).lower()
    first = AUTO().solve(lp)  # the arena's first call: outrun, then grown
    kept = first.x.copy()
    again = AUTO().solve(lp)  # inside the grown arena
    assert again.extra["kernel"] == "compiled"
    assert again.objective == first.objective and list(again.support) == list(first.support)
    for k in (10, 30):  # other calls on the same Problem write the arena over
        AUTO().solve(lp.with_budget(k))
    np.testing.assert_array_equal(first.x, kept)
    P = lean_mod.lean_data(lp).P
    x = np.zeros(X.shape[1])
    x[:3] = 1.0
    f, g = lean_mod.kernels().value_and_grad(P, x)
    g_kept = g.copy()
    lean_mod.kernels().value_and_grad(P, 2 * x)
    np.testing.assert_array_equal(g, g_kept)


def test_the_quadratic_hessian_is_read_only_where_its_rows_were_written():
    """A quadratic objective's constant Hessian Q (p x p) is allocated unwritten (lowering/lean.py:
    zeroing it cost a memset of p^2 doubles per lowering, 8 MB at p = 1000) and its rows are written
    whole when a solve first asks for them (``have``). Q filled with NaN before the first solve must
    leave every answer as the Python pipeline's: it fails when any kernel reads a row it did not
    write (Section 6.1's screened swaps read H_BI and H_II from Q; a path warm-starts from k to k)."""
    X, y, _ = sparse_linear_regression(175, seed=3)
    w = sm.Variable(X.shape[1], name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / 350 + 0.1 * sm.sum_squares(w)), [sm.nnz(w) <= 40]).lower()
    P = lean_mod.lean_data(lp).P
    Q, have = np.asarray(P.Q), np.asarray(P.have)
    assert Q.shape == (X.shape[1], X.shape[1]) and not have.any()
    Q[:] = np.nan
    for k in (40, 20, 45):
        agree(AUTO().solve(lp.with_budget(k)), AUTO(lean=False).solve(lp.with_budget(k)))
    assert have.any() and not np.isnan(Q[have.astype(bool)]).any()


def test_a_path_and_a_comparison_reuse_the_kernel_data():
    prob = glm("binomial", 100, 20, 3, 0)
    lp = prob.lower()
    first = lean_mod.lean_data(lp)
    for k in (2, 4, 6):
        lpk = lp.with_budget(k)
        assert lean_mod.lean_data(lpk) is first  # one design, the same coordinates: built once
        agree(AUTO().solve(lpk), AUTO(lean=False).solve(lpk))


@pytest.mark.parametrize("n", [0, 5, 40, 64, 65, 300, 1000])
def test_the_kernels_ranking_is_a_stable_sorts(n):
    """The kernel's ranking (a few of many by insertion; otherwise the first m chosen by
    partitioning and sorted inline; NumPy's sort when a NaN is present) gives the positions of a
    stable sort of the keys (-v for the largest, v for the smallest): best first, ties to the lower
    position, for every m; on values with many ties and on values with NaN."""
    kern = lean_mod.kernels()
    rng = np.random.default_rng(n)
    draws = [rng.standard_normal(n), rng.integers(0, 4, n).astype(float)]  # distinct values; many ties
    if n:
        nan = rng.standard_normal(n)
        nan[rng.choice(n, max(1, n // 10), replace=False)] = np.nan
        draws.append(nan)
    for v in draws:
        for m in sorted({0, 1, 3, n // 4, n // 2, n - 1, n, n + 2} - {-1}):
            for largest in (True, False):
                want = np.argsort(-v if largest else v, kind="stable")[: min(m, n)]
                np.testing.assert_array_equal(kern.top_positions(v, m, largest), want)


def test_a_warm_path_on_many_candidates_takes_the_python_pipeline_steps():
    """A warm path over k on least squares with 600 columns, as cross-validation's folds run it
    (auto's warm and fold options): the swap model orders its candidates first among the 65 of
    largest gain and, where the widening reads further (every converged point), all of them; the
    gradient comes from the Hessian rows the restricted solve holds. At every k the kernel ends
    where the Python pipeline ends (support, objective, swaps)."""
    rng = np.random.default_rng(7)
    n, p = 150, 600
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[rng.choice(p, 6, replace=False)] = rng.choice([-1.0, 1.0], 6) * rng.uniform(1.0, 2.0, 6)
    y = X @ beta + rng.standard_normal(n)
    w = sm.Variable(p + 1, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w[1:] + w[0] - y)), [sm.nnz(w[1:]) <= 1]).lower()
    opts = {**AUTO.warm_options, **AUTO.fold_options}
    prev = None
    for k in range(1, 10):
        lpk = lp.with_budget(k)
        kw = opts if prev is None else {**opts, "init": prev}
        lean, python = AUTO(**kw).solve(lpk), AUTO(lean=False, **kw).solve(lpk)
        assert lean.extra.get("kernel") == "compiled"
        assert list(lean.support) == list(python.support), k
        assert abs(lean.objective - python.objective) <= REL * max(1.0, abs(python.objective))
        assert lean.extra["swaps"] == python.extra["swaps"]
        prev = lpk.layout.pack(lean.values)


def test_dependent_columns_fall_back_to_the_python_pipeline():
    """A support whose Gram block is singular (a duplicated column) is a case for the general path,
    which handles dependent columns: the answer is the Python pipeline's."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 8))
    X[:, 5] = X[:, 2]
    y = X[:, 2] + X[:, 4] + 0.1 * rng.standard_normal(50)
    w = sm.Variable(8, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), [sm.nnz(w) <= 3]).lower()
    res = AUTO().solve(lp)
    ref = AUTO(lean=False).solve(lp)
    assert abs(res.objective - ref.objective) <= REL * max(1.0, ref.objective)
    assert set(np.flatnonzero(res.x)) >= {4} and ({2} <= set(res.support) or {5} <= set(res.support))


def multinomial(n: int, p: int, k: int, seed: int, classes: int = 3, ridge: float = 0.0) -> sm.Problem:
    """vs_abess.py's multinomial family (softmax regression with row-group sparsity on W and a free
    intercept b), drawn here with NumPy: an equicorrelated design, k rows of W nonzero, labels from
    the softmax of X W."""
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, p)) + rng.standard_normal((n, 1))) / np.sqrt(2.0)
    B = np.zeros((p, classes))
    B[rng.choice(p, k, replace=False)] = rng.uniform(-1.5, 1.5, (k, classes))
    Z = X @ B
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    Y = np.eye(classes)[[rng.choice(classes, p=row) for row in P]]
    W, b = sm.Variable((p, classes), name="W"), sm.Variable(classes, name="b")
    Zs = X @ W + b
    loss = sm.sum(sm.logsumexp(Zs, axis=1)) - sm.sum(Y * Zs)
    if ridge:
        loss = loss + ridge / 2 * sm.sum_squares(W)
    return sm.Problem(sm.minimize(loss), [sm.nnz(W, groups=np.repeat(np.arange(p), classes)) <= k])


def agree_answer(lean, python) -> None:
    """The same objective (to rounding) and support. Softmax regression with a free coefficient per
    class is not identifiable (adding one number to a row of W leaves the loss unchanged), so a
    restricted minimizer is one of a line of them, picked by the rounding of the Newton steps; the
    start's thresholded gradient step reads it, and the two pipelines may visit other supports on
    the way (then the number of swaps differs) -- but they end at the same minimum."""
    assert lean.extra.get("kernel") == "compiled"
    assert "kernel" not in python.extra
    assert lean.status == python.status
    assert abs(lean.objective - python.objective) <= REL * max(1.0, abs(python.objective))
    assert list(lean.support) == list(python.support)


@pytest.mark.parametrize("size", [(100, 20, 3), (200, 50, 5), (150, 30, 4)])
def test_multinomial_kernel_gives_the_python_pipeline_answer(size):
    """The softmax with row groups of three (the multinomial family of vs_abess.py and
    small_vs_abess.py) runs in the kernel and ends where the Python pipeline does."""
    n, p, k = size
    for seed in range(3):
        agree_answer(*both(multinomial(n, p, k, seed)))


def test_the_confirming_pass_models_every_unit_in_both_pipelines():
    """Before stopping, a search step that found nothing in the screened pool is repeated against
    every unit outside the support (solvers/auto.py, pass 2). The pool counts coordinates (pool // m
    units of m); the kernel's pass 2 once passed the number of units as the pool, so on units of m
    coordinates it modelled only 1/m of them. The kernel and the Python pipeline must read the same
    units in every model (``modelled_units``), and a confirming model reads them all."""
    for seed in range(3):
        lp = multinomial(120, 40, 6, seed, classes=4, ridge=0.1).lower()
        lean, python = AUTO(pool=8).solve(lp), AUTO(pool=8, lean=False).solve(lp)
        agree_answer(lean, python)
        assert lean.extra["full_models"] == python.extra["full_models"] >= 1
        assert lean.extra["modelled_units"] == python.extra["modelled_units"]
        # every model but the confirming ones reads the pool's 2 units; a confirming one all 34
        pooled = lean.extra["models"] - lean.extra["full_models"]
        assert lean.extra["modelled_units"] == 2 * pooled + 34 * lean.extra["full_models"]


def test_multinomial_options_ridge_and_paths():
    prob = multinomial(120, 25, 4, 7, ridge=0.3)
    agree_answer(*both(prob))
    agree_answer(*both(prob, start="grahtp", exchange=2, tries=1, pool=8, candidates=4))
    lp = prob.lower()
    for k in (2, 6):  # a path over k: the kernel's arrays built once
        lpk = lp.with_budget(k)
        assert lean_mod.lean_data(lpk) is lean_mod.lean_data(lp)
        agree_answer(AUTO().solve(lpk), AUTO(lean=False).solve(lpk))


def test_multinomial_above_the_sparse_storage_runs_the_kernel_on_the_same_path(monkeypatch):
    """At 500 x 100 (a Jacobian of 1500 x 303 entries, which the Python path keeps sparse) the kernel
    reads a dense one written from the data and takes the Python pipeline's path: the same GraHTP
    point and the same swaps, also on draws where a restricted solve's point on the softmax's line
    of minimizers (one number added to a row of W changes nothing) was decided by rounding (seeds 0
    and 3 started from different GraHTP points with a jitter of 1e-14); above the design's
    FULL_LIMIT (set here just at and just below a small problem's size) the kernel has no arrays."""
    from sparsemodel.objective import columns

    for seed in (0, 3):
        lp = multinomial(500, 100, 10, seed).lower()
        t = lp.design.terms[0]
        assert columns.SMALL_DENSE < t.map.size * lp.n <= columns.FULL_LIMIT
        lean, python = AUTO().solve(lp), AUTO(lean=False).solve(lp)
        agree_answer(lean, python)
        assert lean.extra["start_objective"] == pytest.approx(python.extra["start_objective"], rel=REL, abs=REL)
        assert lean.extra["swaps"] == python.extra["swaps"]
        assert sp.issparse(lp.design.full_columns(0))  # (the Python path's own copy stays sparse)
    size = 180 * 27  # multinomial(60, 8, ...): 180 rows x 27 coordinates
    for limit, runs in ((size, True), (size - 1, False)):
        monkeypatch.setattr(columns, "FULL_LIMIT", limit)
        lp = multinomial(60, 8, 2, 1).lower()
        assert lp.design.terms[0].map.size * lp.n == size
        assert (lean_mod.lean_data(lp) is not None) == runs
        assert (AUTO().solve(lp).extra.get("kernel") == "compiled") == runs


def test_multinomial_rebound_kernel_reads_the_new_data():
    """A rebinding writes the new data into the kernel problem, which finds the softmax's columns by
    class again from them: the rebound lowering's kernel run is the fresh lowering's, number for
    number (the same iterations, Newton steps and end point), also when the new X has a zero column
    (that column of X W + b then belongs to no class). A kernel that kept the old data's columns by
    class would form the Hessians of the old data: other Newton steps, other counts."""
    n, p, k = 90, 12, 3
    rng = np.random.default_rng(5)

    def problem(X: np.ndarray, Y: np.ndarray) -> sm.Problem:
        W, b = sm.Variable((p, 3), name="W"), sm.Variable(3, name="b")
        Zs = sm.Data(X, name="X") @ W + b
        loss = sm.sum(sm.logsumexp(Zs, axis=1)) - sm.sum(sm.Data(Y, name="Y") * Zs) + 0.2 * sm.sum_squares(W)
        return sm.Problem(sm.minimize(loss), [sm.nnz(W, groups=np.repeat(np.arange(p), 3)) <= k])

    def draw() -> tuple[np.ndarray, np.ndarray]:
        X = rng.standard_normal((n, p))
        Z = X[:, :3] @ rng.uniform(-1.5, 1.5, (3, 3))
        P = np.exp(Z - Z.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        return X, np.eye(3)[[rng.choice(3, p=row) for row in P]]

    lp = problem(*draw()).lower()
    AUTO().solve(lp)
    kernel = lean_mod.lean_data(lp)
    for zero_column in (False, True):
        X, Y = draw()
        if zero_column:
            X[:, 4] = 0.0
        lp = lp.rebind(X=X, Y=Y)
        got = AUTO().solve(lp)
        assert lean_mod.lean_data(lp) is kernel
        fresh = AUTO().solve(problem(X, Y).lower())
        assert got.extra["kernel"] == fresh.extra["kernel"] == "compiled"
        assert got.iterations == fresh.iterations and got.counters == fresh.counters
        assert np.array_equal(got.x, fresh.x) and got.objective == fresh.objective
        agree_answer(got, AUTO(lean=False).solve(lp))


def grouped(family: str, n: int, G: int, m: int, k: int, seed: int) -> sm.Problem:
    """An elementwise GLM with G groups of m coordinates (an equicorrelated design, the first two
    groups nonzero) and a free intercept, at most k groups."""
    rng = np.random.default_rng(seed)
    p = G * m
    X = (rng.standard_normal((n, p)) + rng.standard_normal((n, 1))) / np.sqrt(2.0)
    beta = np.zeros(p)
    beta[: 2 * m] = rng.uniform(0.5, 1.0, 2 * m) * rng.choice([-1.0, 1.0], 2 * m)
    eta = 0.5 * X @ beta
    w = sm.Variable(p + 1, name="w")
    z = X @ w[1:] + w[0]
    if family == "gaussian":
        loss = sm.sum_squares(z - eta - rng.standard_normal(n))
    elif family == "binomial":
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
        loss = sm.sum(sm.logistic(-(2 * y - 1) * z))
    else:
        y = rng.poisson(np.exp(eta)).astype(float)
        loss = sm.sum(sm.exp(z) - y * z)
    return sm.Problem(sm.minimize(loss), [sm.nnz(w[1:], groups=np.repeat(np.arange(G), m)) <= k])


@pytest.mark.parametrize("family", ["gaussian", "binomial", "poisson"])
def test_groups_at_and_above_the_kernels_largest_unit(family):
    """Groups of one size on the elementwise losses: two to MAX_UNIT (16) coordinates in the kernel,
    the Python pipeline's answers (9, just above the kernels' first limit of 8, included); groups of
    17 run the Python pipeline (no lean data)."""
    from sparsemodel.numerics import _lean

    assert lean_mod.MAX_UNIT == _lean.MAX_UNIT == 16
    for m, G, k in ((2, 10, 3), (3, 20, 4), (8, 12, 2), (9, 10, 2), (16, 6, 2), (17, 5, 2)):
        prob = grouped(family, 120, G, m, k, seed=m)
        lean, python = both(prob)
        if m > lean_mod.MAX_UNIT:
            assert lean_mod.lean_data(prob.lower()) is None and "kernel" not in lean.extra
            assert lean.objective == python.objective
        else:
            agree(lean, python)


def test_multinomial_kernel_value_and_gradient_match_the_model():
    """The kernel's softmax loss and gradient at a point against the model's own evaluation and
    against central differences."""
    prob = multinomial(60, 8, 3, 1, classes=4)
    lp = prob.lower()
    data = lean_mod.lean_data(lp)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(lp.n)
    f, g = lean_mod.kernels().value_and_grad(data.P, x)
    f_ref, g_ref = lp.value_and_grad(x)
    assert abs(f - f_ref) <= 1e-12 * max(1.0, abs(f_ref))
    assert np.allclose(g, g_ref, rtol=1e-12, atol=1e-10)
    h = 1e-6
    for j in (0, 5, lp.n - 1):
        e = np.zeros(lp.n)
        e[j] = h
        fd = (
            lean_mod.kernels().value_and_grad(data.P, x + e)[0] - lean_mod.kernels().value_and_grad(data.P, x - e)[0]
        ) / (2 * h)
        assert abs(fd - g[j]) <= 1e-6 * max(1.0, abs(g[j]))


@pytest.mark.parametrize("family", ["multinomial", "binomial"])
def test_the_kernels_losses_where_exp_underflows(family):
    """Far out along a separating direction (entries of z 800 to 2000 apart: exp underflows to 0,
    which the kernels answer without calling exp) the kernel's loss and gradient are still the
    model's own, to rounding; and both pipelines end a separable problem at the same minimum."""
    rng = np.random.default_rng(3)
    if family == "multinomial":
        prob = multinomial(60, 8, 3, 1, classes=4)
    else:
        X = rng.standard_normal((60, 8))
        v = np.sign(X[:, 0] + 0.1)  # separable along the first column
        w = sm.Variable(9, name="w")
        prob = sm.Problem(sm.minimize(sm.sum(sm.logistic(-v * (X @ w[1:] + w[0])))), [sm.nnz(w[1:]) <= 2])
    lp = prob.lower()
    data = lean_mod.lean_data(lp)
    for scale in (400.0, 1000.0):
        x = scale * rng.standard_normal(lp.n)
        f, g = lean_mod.kernels().value_and_grad(data.P, x)
        f_ref, g_ref = lp.value_and_grad(x)
        assert abs(f - f_ref) <= 1e-12 * max(1.0, abs(f_ref))
        assert np.allclose(g, g_ref, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(g_ref).max()))
    if family == "binomial":
        lean, python = both(prob)
        assert lean.extra.get("kernel") == "compiled" and lean.status == python.status
        assert abs(lean.objective - python.objective) <= 1e-6 and list(lean.support) == list(python.support)


def test_outside_the_class_the_python_pipeline_runs():
    """Groups of unequal sizes, a box, a loss with parameters: no lean data, the Python pipeline's
    result."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 6))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.standard_normal(40)
    w = sm.Variable(6, name="w")
    for cons in ([sm.nnz(w, groups=[0, 0, 1, 1, 1, 2]) <= 1], [sm.nnz(w) <= 2, w >= 0]):
        lp = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y)), cons).lower()
        assert lean_mod.lean_data(lp) is None
        assert "kernel" not in AUTO().solve(lp).extra
    lp = sm.Problem(sm.minimize(sm.sum(sm.huber(X @ w - y, 1.0))), [sm.nnz(w) <= 2]).lower()
    assert lean_mod.lean_data(lp) is None


def test_without_the_extension_auto_runs_the_python_pipeline(monkeypatch):
    prob = glm("poisson", 80, 15, 3, 2)
    lp = prob.lower()
    monkeypatch.setattr(lean_mod, "_KERNELS", [None])
    res = AUTO().solve(lp)
    assert "kernel" not in res.extra
    monkeypatch.undo()
    assert AUTO().solve(lp).extra.get("kernel") == "compiled"


@pytest.mark.parametrize("family", ["gaussian", "binomial", "poisson", "gamma"])
def test_the_kernels_budget_zero_is_the_restricted_solve_of_the_free_coordinates(family):
    """k = 0 (every path's first point): the kernel fits the free coordinates alone (an intercept),
    the general restricted solve's minimizer to its tolerance; the answer a solver reports at k = 0
    is that point, and without free coordinates it is zero."""
    for intercept in (True, False):
        lp = glm(family, 90, 12, 3, 5, intercept=intercept).lower().with_budget(0)
        got = lean_mod.free_fit(lp)
        ref = lp.restricted_minimize(lp.set.empty())
        if not np.isfinite(ref.f):  # Gamma without an intercept: zero is outside the loss's domain
            assert got is None and family == "gamma" and not intercept
            continue
        x, f = got
        assert abs(f - ref.f) <= REL * max(1.0, abs(ref.f))
        # the minimizers agree as far as f's tolerance (1e-12, relative) fixes them: about its root
        assert np.allclose(x, ref.x, rtol=1e-5, atol=1e-7)
        assert not np.any(x[lp.set.coords])
        res = AUTO().solve(lp)
        assert res.objective == pytest.approx(f, rel=1e-12) and len(res.support) == 0
        python = AUTO(restricted="newton").solve(lp)  # (another restricted option: the general solve)
        assert abs(python.objective - f) <= REL * max(1.0, abs(f))


def test_the_kernels_budget_zero_on_the_softmax():
    """The same on the multinomial loss with three intercepts."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((60, 6))
    Y = np.eye(3)[rng.integers(0, 3, 60)]
    W, b = sm.Variable((6, 3), name="W"), sm.Variable(3, name="b")
    Z = X @ W + b
    lp = sm.Problem(sm.minimize(sm.sum(sm.logsumexp(Z, axis=1)) - sm.sum(Y * Z)), [sm.nnz(W) <= 4]).lower()
    lp0 = lp.with_budget(0)
    x, f = lean_mod.free_fit(lp0)
    ref = lp0.restricted_minimize(lp0.set.empty())
    assert abs(f - ref.f) <= REL * max(1.0, abs(ref.f))
    # the softmax's intercepts are fixed up to a common shift (b + c 1 has the same loss)
    d = x[-3:] - ref.x[-3:]
    assert np.allclose(d, d.mean(), atol=1e-5) and not np.any(x[:-3])


@pytest.mark.parametrize("family", ["binomial", "poisson"])
def test_the_kernels_loss_pass_gives_the_atoms_values_and_derivatives(family):
    """``_lean.losses`` (one pass over the samples: the loss evaluations of ARHT's lean Newton solves)
    against the atom's formulas (NumPy's exp and log1p, summed exactly): the weighted sum to a few
    ulps of its size, also where every sample is far on the flat side of the logistic loss (z down
    to -40: log(1 + e^z) ~ e^z, where log(1 + e) of the rounded 1 + e would lose every digit), and
    the derivatives to rounding."""
    import math

    from sparsemodel.numerics import _lean

    lp = glm(family, 150, 10, 3, 0).lower()
    data = lean_mod.lean_data(lp)
    P, phi = data.P, data.phi
    wc = np.asarray(P.wc)
    rng = np.random.default_rng(1)
    shifts = [(0.0, 2.0), (0.0, 30.0), (-30.0, 10.0)] if family == "binomial" else [(0.0, 2.0), (-20.0, 3.0)]
    for mid, spread in shifts:
        z = mid + spread * rng.uniform(-1.0, 1.0, P.n)
        d1, d2 = np.empty(P.n), np.empty(P.n)
        total = _lean.losses(P, z, d1, d2)
        v, a, h = phi.derivs(z, 2)
        exact = math.fsum(wc * v)
        assert abs(total - exact) <= 1e-14 * abs(exact), (mid, spread, total, exact)
        np.testing.assert_allclose(d1, wc * a, rtol=1e-14, atol=0)
        np.testing.assert_allclose(d2, wc * h, rtol=1e-14, atol=0)


def test_the_kernel_refuses_a_budget_or_options_below_their_bounds():
    """The compiled search is called with k >= 1 (Solver.solve answers k = 0 itself) and options at
    least their lower bounds; called directly with less it says so instead of writing out of bounds."""
    lp = glm("gaussian", 60, 8, 2, 0).lower()
    data = lean_mod.lean_data(lp)
    kern = lean_mod.kernels()
    x0 = np.zeros(lp.n)
    good = np.array([1, 0, 1, 8, 10, 1e-12, 100, 1e-10], dtype=float)

    def run(k, opts):
        stats = np.zeros((1, kern.N_STATS), dtype=np.int64)
        return kern.auto_run(data.P, k, np.array([0], dtype=np.int64), x0, x0, opts, stats, np.full((1, 5), np.nan))

    for k, change in ((0, None), (2, (0, 0.0)), (2, (2, 0.0)), (2, (3, 0.0))):
        opts = good.copy()
        if change is not None:
            opts[change[0]] = change[1]
        with pytest.raises(ValueError, match="auto_run takes"):
            run(k, opts)
    out = run(2, good)
    assert np.count_nonzero(out[0][lp.set.coords]) <= 2


def _models_agree(prob: sm.Problem, pool: int, candidates: int = 8, rtol: float = 1e-7) -> None:
    """At auto's answer, the kernel's swap model (its gains, removals, candidates and pair values)
    equals lowering/swaps.SwapModel's to rounding (``rtol``)."""
    from sparsemodel.lowering.swaps import SwapModel
    from sparsemodel.solvers.auto import _units_of

    lp = prob.lower()
    res = AUTO().solve(lp)
    x = lp.layout.pack(res.values)
    g = lp.oracle.value_and_grad(x)[1]
    sps = lp.set
    units = _units_of(sps, x)
    members = sps.swap_members()
    py = SwapModel(lp, x, g, units, members, candidates=candidates, pool=pool)
    ke = lean_mod.kernels().swap_model(lean_mod.lean_data(lp).P, x, g, units, pool, candidates)
    assert list(ke["units_out"]) == list(py.units_out)
    # the pool counts coordinates: pool // m units of m coordinates (at least one) are modelled
    assert len(py.units_out) == min(max(pool // members.shape[1], 1), len(members) - len(units))
    scale = max(1.0, float(np.max(py.gain)))
    np.testing.assert_allclose(ke["gain"], py.gain, rtol=rtol, atol=rtol * 1e-2 * scale)
    np.testing.assert_allclose(ke["removal"], py.removal, rtol=rtol, atol=rtol * 1e-2 * scale)
    assert list(ke["cand"]) == list(py.cand)
    np.testing.assert_allclose(ke["delta"], py.delta, rtol=rtol, atol=rtol * 1e-2 * scale)


@pytest.mark.parametrize("family", ["binomial", "poisson"])
def test_a_screened_pool_forms_only_the_rows_the_model_reads(family):
    """With a pool of candidates at most half of J's columns with the support, the kernel's swap
    model forms the Hessian's rows on the support and the pool only (from the gathered columns; by
    class on the softmax) and its Schur complements row by row; without a pool every row. Its
    numbers are lowering/swaps.SwapModel's on single coordinates, groups of two and the softmax."""
    for seed in range(2):
        prob = glm(family, 150, 60, 4, seed, ridge=0.1)
        for pool in (6, 1000):  # (2 (5 + 6) <= 61 columns: the short path; every candidate: the full one)
            _models_agree(prob, pool)
    groups = grouped(family, 150, 30, 2, 3, seed=5)
    for pool in (6, 1000):
        _models_agree(groups, pool)
    # the softmax (40 rows of 3 classes: 123 columns, 15 on the support, 18 in a pool of 18): its free
    # intercepts make H_BB singular along one direction, kept invertible by the jitter (1e-10 of the
    # mean diagonal), so the rounding of either inverse is magnified up to 1 / jitter: 1e-16 / 1e-10
    for seed in range(2):
        for pool in (18, 1000):
            _models_agree(multinomial(150, 40, 4, seed, ridge=0.2), pool, rtol=1e-5)


def test_the_cholesky_route_equals_the_inverse_formula():
    """The swap model of groups on a non-quadratic loss forms its Schur complements through the
    Cholesky factor of H_BB (Y = L^-1 H_BI: H_IB A H_BI = Y' Y, A H_BI = L^-T Y, the kernel's
    _chol_rows and _ab_units, SwapModel's schur_rows): the same numbers as the formula with A, on a
    random positive definite H_BB, and SwapModel's sigma_I and A H_BI on groups and the softmax equal
    H_II - H_IB A H_BI and A H_BI formed directly; the kernel's model (H_BI and A H_BI formed only
    for the columns read) is SwapModel's, with and without a screened pool."""
    import scipy.linalg as sla

    from sparsemodel.lowering.swaps import SwapModel, _inverse_pd, schur_rows
    from sparsemodel.solvers.auto import _units_of

    rng = np.random.default_rng(0)
    G = rng.standard_normal((12, 30))
    HBB, HBI = G @ G.T + 0.1 * np.eye(12), rng.standard_normal((12, 40))
    A, L = _inverse_pd(HBB, 1e-10, factor=True)
    Y = schur_rows(L, HBI)
    np.testing.assert_allclose(Y.T @ Y, HBI.T @ A @ HBI, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sla.solve_triangular(L, Y, lower=True, trans="T"), A @ HBI, rtol=1e-10, atol=1e-12)
    for prob in (grouped("binomial", 150, 30, 2, 3, seed=5), multinomial(150, 40, 4, 0, ridge=0.2)):
        lp = prob.lower()
        res = AUTO().solve(lp)
        x = lp.layout.pack(res.values)
        g = lp.oracle.value_and_grad(x)[1]
        units, members = _units_of(lp.set, x), lp.set.swap_members()
        md = SwapModel(lp, x, g, units, members, candidates=8)
        AB, sigma, _, _, _, nJ, m = md._parts
        nb, nI = len(md.B), len(md.units_out)
        lam = 1e-10 * np.trace(md.HBB) / nb
        Ad = np.linalg.inv(md.HBB + lam * np.eye(nb))
        ABd = Ad @ md.HBI
        Sd = md.HII - np.matmul(md.HBI.reshape(nb, nI, m).transpose(1, 2, 0), ABd.reshape(nb, nI, m).transpose(1, 0, 2))
        Sd = 0.5 * (Sd + np.swapaxes(Sd, 1, 2))
        scale = float(np.max(np.abs(Sd)))
        np.testing.assert_allclose(sigma, Sd, rtol=1e-6, atol=1e-6 * scale)
        np.testing.assert_allclose(AB[: nJ * m], ABd[: nJ * m], rtol=1e-5, atol=1e-6 * float(np.max(np.abs(ABd))))
    for pool in (6, 1000):
        _models_agree(grouped("poisson", 150, 30, 2, 3, seed=2), pool)
        _models_agree(multinomial(150, 40, 4, 1, ridge=0.2), pool, rtol=1e-5)


def test_the_kernel_takes_the_python_pipelines_steps_on_a_singular_softmax():
    """The softmax without a ridge has a singular Hessian on every support (a constant added to a row
    of W, or to b, across the classes leaves the loss unchanged): the Newton steps run on the
    jittered Cholesky factor, the swap model's small Schur systems by elimination with row
    interchanges. On small draws (n = 30 to 60, where some restricted solves also need the singular
    steps) the kernel stays compiled and ends where the Python pipeline does."""
    for n, p, k in ((30, 20, 3), (40, 30, 4), (60, 30, 5)):
        for seed in range(6):
            agree_answer(*both(multinomial(n, p, k, seed)))


def test_separable_data_stay_on_the_kernel():
    """On separable data the loss only tends to 0 (no minimizer): the restricted solves stop short
    or meet a Hessian whose curvature vanished, and the kernel continues as the Python pipeline does
    (the least-squares step of the jittered system, the pseudo-inverse of H_BB) instead of handing
    the run back: the infimum reached to rounding, compiled; the logistic loss to the Python
    pipeline's value."""
    for seed in (2, 3):  # (24 samples, 4 rows of W of 3 classes and b: separable on the answer's support)
        lean, python = both(multinomial(24, 20, 4, seed))
        assert lean.extra.get("kernel") == "compiled" and lean.status == "converged"
        assert abs(lean.objective) <= 1e-6 and abs(python.objective) <= 1e-6
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 10))
    y = (X[:, 0] + X[:, 1] > 0).astype(float)
    w = sm.Variable(11, name="w")
    z = X @ w[1:] + w[0]
    prob = sm.Problem(sm.minimize(sm.sum(sm.logistic(-(2 * y - 1) * z))), [sm.nnz(w[1:]) <= 3])
    lean, python = both(prob)
    agree(lean, python)
    assert lean.objective <= 1e-6


def test_an_unbounded_loss_is_reported_with_the_kernel_on():
    """A loss unbounded below (exp(z) - y z with every y negative: z -> -infinity) is not taken for a
    solve that merely stopped short: the kernel hands it to the general path, which says so."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 8))
    y = -np.abs(rng.standard_normal(50)) - 0.1
    w = sm.Variable(9, name="w")
    z = X @ w[1:] + w[0]
    lean, python = both(sm.Problem(sm.minimize(sm.sum(sm.exp(z) - y * z)), [sm.nnz(w[1:]) <= 2]))
    assert lean.status == python.status == "unbounded"
    assert lean.objective == -np.inf


def test_softmax_at_and_above_the_kernels_largest_unit():
    """Row groups of the softmax are units of as many coordinates as classes: up to 16 classes run the
    kernel (its small systems and per-sample class pairs are sized for MAX_UNIT; 10 classes, digits,
    included) and end where the Python pipeline does; 17 classes run the Python pipeline."""
    for classes in (8, 9, 10, 16, 17):
        lean, python = both(multinomial(200, 15, 3, 0, classes=classes, ridge=0.1))
        if classes > lean_mod.MAX_UNIT:
            assert "kernel" not in lean.extra and lean.objective == python.objective
        else:
            agree_answer(lean, python)


@pytest.mark.parametrize("family", ["gaussian", "binomial", "poisson", "gamma"])
def test_a_folds_warm_point_is_the_warm_solves_answer(family):
    """Solver.fold_point (a cross-validation fold's warm point, no Result) gives exactly the point the
    warm solve gives, at every bound of a path, and declines where solve answers otherwise (the two
    ends of the bound, the Python pipeline asked for)."""
    prob = glm(family, 100, 20, 3, 4)
    lp = prob.lower()
    opts = {**AUTO.warm_options, **AUTO.fold_options}
    quick = AUTO(**opts)
    init = AUTO().solve(lp.with_budget(1), bound="none").x
    for k in range(2, 8):
        lpk = lp.with_budget(k)
        got = quick.fold_point(lpk, init.copy())
        want = AUTO(**opts, init=init.copy()).solve(lpk, bound="none")
        assert want.extra.get("kernel") == "compiled"
        assert got is not None and np.array_equal(got, lp.layout.pack(want.values))
        init = got
    assert quick.fold_point(lp.with_budget(0), init.copy()) is None  # budget 0: solve fits the free part
    assert quick.fold_point(lp.with_budget(20), init.copy()) is None  # every unit allowed: solve's own answer
    assert AUTO(**opts, lean=False).fold_point(lp.with_budget(4), init.copy()) is None
    assert AUTO(**opts, search=False).fold_point(lp.with_budget(4), init.copy()) is None


@pytest.mark.parametrize("family", ["gaussian", "binomial", "poisson", "gamma"])
def test_a_folds_path_in_one_call_is_its_points_one_at_a_time(family, monkeypatch):
    """Solver.fold_points (the kernel's path_run: a fold's whole path in one call) gives bit for bit
    the points of fold_point asked a bound at a time, each from the last; it stops before the bound
    that allows every unit (solve's own answer); at a Jacobian one entry above PATH_BATCH_LIMIT it
    answers the first bound alone, at the limit the whole path (the limit counts coordinates x samples)."""
    from sparsemodel.solvers import auto as auto_mod

    prob = glm(family, 100, 20, 3, 4)
    lp = prob.lower()
    opts = {**AUTO.warm_options, **AUTO.fold_options}
    quick = AUTO(**opts)
    start = AUTO().solve(lp.with_budget(1), bound="none").x
    ks = list(range(2, 21))
    got = quick.fold_points(lp.with_budget(2), ks, start.copy())
    assert len(got) == 18  # k = 2..19; k = 20 allows every unit
    init = start
    for k, x in zip(ks, got):
        want = quick.fold_point(lp.with_budget(k), init.copy())
        assert want is not None and np.array_equal(x, want)
        init = want
    size = lp.n * lp.n_samples
    monkeypatch.setattr(auto_mod, "PATH_BATCH_LIMIT", size - 1)
    one = quick.fold_points(lp.with_budget(2), ks, start.copy())
    assert len(one) == 1 and np.array_equal(one[0], got[0])
    monkeypatch.setattr(auto_mod, "PATH_BATCH_LIMIT", size)
    assert len(quick.fold_points(lp.with_budget(2), ks, start.copy())) == 18
    assert AUTO(**opts, lean=False).fold_points(lp.with_budget(2), ks, start.copy()) == []
    down = quick.fold_points(lp.with_budget(9), [9, 6, 7, 4], got[7].copy())  # a smaller bound next: its
    assert len(down) == 1 and np.array_equal(down[0], quick.fold_point(lp.with_budget(9), got[7].copy()))  # own start


@pytest.mark.parametrize("family", ["gaussian", "binomial", "poisson", "gamma"])
def test_a_folds_first_point_at_zero_is_the_cold_solves_answer(family):
    """Solver.fold_points with no start (a fold's first point) answers a bound of 0 by the kernel's
    free fit: bit for bit the point of the cold solve (zero_budget), then the path from it as
    fold_points from that point gives it; it declines at a bound above 0, with the Python pipeline
    or another restricted solver asked for, and every other solver declines."""
    from sparsemodel.solvers import get_solver

    prob = glm(family, 100, 20, 3, 4)
    lp = prob.lower()
    opts = {**AUTO.warm_options, **AUTO.fold_options}
    quick = AUTO(**opts)
    got = quick.fold_points(lp.with_budget(0), [0, 1, 2, 3], None)
    cold = AUTO(**{**AUTO.fold_options}).solve(lp.with_budget(0), bound="none")
    assert len(got) == 4 and np.array_equal(got[0], lp.layout.pack(cold.values))
    rest = quick.fold_points(lp.with_budget(1), [1, 2, 3], got[0].copy())
    assert all(np.array_equal(a, b) for a, b in zip(got[1:], rest, strict=True))
    only = quick.fold_points(lp.with_budget(0), [0], None)
    assert len(only) == 1 and np.array_equal(only[0], got[0])
    assert quick.fold_points(lp.with_budget(2), [2, 3], None) == []
    assert AUTO(**opts, lean=False).fold_points(lp.with_budget(0), [0, 1], None) == []
    assert AUTO(**opts, restricted="newton").fold_points(lp.with_budget(0), [0, 1], None) == []
    assert get_solver("grahtp")().fold_points(lp.with_budget(0), [0, 1], None) == []


@pytest.mark.parametrize("family", ["gaussian", "binomial"])
def test_the_shared_scratch_pool_changes_no_answer_and_keeps_its_limits(family):
    """The kernel's scratch (restricted-solve workspaces, swap-model buffers) comes from one pool
    per thread, keyed by shape and shared by every Problem: problems of several shapes solved
    interleaved, along paths, give the bits each gives alone after the pool is emptied; the pool
    holds at most its objects and bytes (here set just below what the run asks for, and to one
    object), the newest kept."""
    kern = pytest.importorskip("sparsemodel.numerics._lean")
    probs = [glm(family, n, p, 3, seed) for n, p, seed in ((60, 12, 1), (80, 12, 2), (60, 25, 3))]
    lps = [prob.lower() for prob in probs]
    ks = (1, 2, 4, 3)

    def run(lp, k):
        r = AUTO().solve(lp.with_budget(k))
        assert r.extra["kernel"] == "compiled"
        return r.x.tobytes(), r.objective

    alone = {}
    for i, prob in enumerate(probs):
        for k in ks:
            kern.scratch_pool(clear=True)
            alone[i, k] = run(prob.lower(), k)
    old = kern.scratch_limits()
    try:
        for entries, nbytes in ((old[0], old[1]), (3, 2000), (1, 0)):
            kern.scratch_limits(entries, nbytes)
            kern.scratch_pool(clear=True)
            for k in ks:
                for i, lp in enumerate(lps):
                    assert run(lp, k) == alone[i, k]
                    count, used = kern.scratch_pool()
                    assert 1 <= count <= entries and (used <= nbytes or count == 1)
    finally:
        kern.scratch_limits(*old)
