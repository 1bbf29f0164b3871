"""Dask data (docs/scale.md): the same models on NumPy, scipy.sparse and dask inputs give the same
answers; the chunked readers give the same problem as in-memory data; bad inputs are located; the
passes over the data per iteration are what docs/scale.md states; the CLI runs with --scheduler."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

import sparsemodel as sm  # noqa: E402
from sparsemodel.cli import main  # noqa: E402
from sparsemodel.errors import DataError, ModelError  # noqa: E402
from sparsemodel.objective.chunked import DaskOperator, as_dask  # noqa: E402
from sparsemodel.objective.data import as_operator  # noqa: E402
from sparsemodel.objective.operators import DataOperator  # noqa: E402

N, P, K = 120, 30, 4


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, P))
    beta = np.zeros(P)
    beta[[1, 5, 9, 20]] = [2.0, -1.5, 1.0, 2.5]
    y = X @ beta + 0.5 + 0.1 * rng.standard_normal(N)
    labels = np.where(X @ beta + 0.3 * rng.standard_normal(N) > 0, 1.0, -1.0)
    return X, y, labels


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def inputs(X):
    return {"numpy": X, "sparse": sp.csr_matrix(X), "dask": as_dask(X, 25)}


def least_squares(Xv, y):
    w = sm.Variable(P, name="w")
    b = sm.Variable(name="b")
    obj = sm.sum_squares(sm.Data(Xv, name="X") @ w + b - y) / (2 * N) + 1e-3 * sm.sum_squares(w)
    return sm.Problem(sm.minimize(obj), [sm.nnz(w) <= K])


def logistic(Xv, labels):
    w = sm.Variable(P, name="w")
    return sm.Problem(sm.minimize(sm.sum(sm.logistic(-(labels * (sm.Data(Xv, name="X") @ w)))) / N), [sm.nnz(w) <= K])


@pytest.mark.parametrize(
    "solver,opts", [("grahtp", {}), ("iht", {}), ("omp", {}), ("hsg_ht", {"seed": 1, "max_iter": 60})]
)
def test_same_answer_numpy_sparse_dask_least_squares(data, solver, opts):
    X, y, _ = data
    res = {kind: least_squares(Xv, y).solve(solver=solver, **opts) for kind, Xv in inputs(X).items()}
    ref = res["numpy"]
    for kind in ("sparse", "dask"):
        assert list(res[kind].support) == list(ref.support), kind
        assert abs(res[kind].objective - ref.objective) <= 1e-8, kind
        assert np.allclose(res[kind].x, ref.x, atol=1e-8), kind


@pytest.mark.parametrize("solver", ["grahtp", "omp"])
def test_same_answer_logistic(data, solver):
    X, _, labels = data
    res = {kind: logistic(Xv, labels).solve(solver=solver) for kind, Xv in inputs(X).items()}
    for kind in ("sparse", "dask"):
        assert list(res[kind].support) == list(res["numpy"].support)
        assert abs(res[kind].objective - res["numpy"].objective) <= 1e-8


def test_lasso_path_same_on_dask(data):
    X, y, _ = data
    paths = {
        kind: least_squares(Xv, y).path(k=[1, 2, 4], solver="lasso", scheduler="synchronous")
        for kind, Xv in inputs(X).items()
    }
    ref = paths["numpy"]
    for kind in ("sparse", "dask"):
        for k in ref.ks:
            assert list(paths[kind].at(k).support) == list(ref.at(k).support)
            assert abs(paths[kind].at(k).objective - ref.at(k).objective) <= 1e-8


def test_local_cluster_gives_the_same_answer(data):
    pytest.importorskip("distributed")
    X, y, _ = data
    ref = least_squares(X, y).solve(solver="grahtp")
    got = least_squares(as_dask(X, 30), y).solve(solver="grahtp", scheduler="local")
    assert list(got.support) == list(ref.support)
    assert abs(got.objective - ref.objective) <= 1e-8


# ---------------------------------------------------------------------- the operator itself


def test_operator_products_match_numpy(data):
    X, y, _ = data
    op = as_operator(as_dask(X, 17))  # uneven last block
    assert isinstance(op, DaskOperator) and op.chunked and op.shape == X.shape
    rng = np.random.default_rng(0)
    x = np.zeros(P)
    x[[2, 7]] = [1.0, -2.0]  # a sparse iterate: only its support's columns are read
    v = rng.standard_normal(P)
    r = rng.standard_normal(N)
    cols = np.array([3, 1, 8])
    wts = rng.uniform(0.5, 2.0, N)
    assert np.allclose(op.matvec(x), X @ x)
    assert np.allclose(op.matvec(v), X @ v)
    assert np.allclose(op.rmatvec(r), X.T @ r)
    assert np.allclose(op.rmatvec(r, cols), X[:, cols].T @ r)
    assert np.allclose(op.rmatvec(np.c_[r, 2 * r]), X.T @ np.c_[r, 2 * r])
    assert np.allclose(op.col_sq_norms(), (X * X).sum(axis=0))
    assert np.allclose(op.gram(cols), X[:, cols].T @ X[:, cols])
    assert np.allclose(op.gram_all(), X.T @ X)
    E = np.ones((N, 1))
    G, h = op.gram_rhs(cols, r, wts, E)
    M = np.hstack([X[:, cols], E])
    assert np.allclose(G, M.T @ (wts[:, None] * M)) and np.allclose(h, M.T @ (wts * r))
    rows = np.array([100, 3, 50, 4])  # across blocks, unsorted
    assert np.allclose(op.rows(rows).dense(), X[rows])
    assert np.allclose(op.row_top_sq(3), DataOperator(X).row_top_sq(3))


def test_passes_per_iteration_as_documented(data):
    """A least-squares value+gradient is ONE pass; a restricted least-squares solve is ONE pass
    (X_S'X_S and X_S'y together); a general loss's gradient is two (X x, then X' phi'(z))."""
    X, y, labels = data
    lp = least_squares(as_dask(X, 25), y).lower()
    ops = [blk.op for t in lp.design.terms for blk in t.map.blocks if blk.op is not None and blk.op.chunked]
    assert len(ops) == 1
    op = ops[0]
    x = np.zeros(lp.n)
    x[:3] = 1.0
    before = op.passes
    f, g = lp.value_and_grad(x)
    assert op.passes - before == 1
    lp_np = least_squares(X, y).lower()
    f0, g0 = lp_np.value_and_grad(x)
    assert abs(f - f0) < 1e-10 and np.allclose(g, g0)
    before = op.passes
    res = lp.restricted_minimize(np.array([1, 5, 9, 20]))
    assert op.passes - before == 1
    ref = lp_np.restricted_minimize(np.array([1, 5, 9, 20]))
    assert abs(res.f - ref.f) < 1e-10 and np.allclose(res.x, ref.x, atol=1e-9)
    lpl = logistic(as_dask(X, 25), labels).lower()
    opl = next(blk.op for t in lpl.design.terms for blk in t.map.blocks if blk.op is not None)
    before = opl.passes
    lpl.value_and_grad(np.full(lpl.n, 0.1))
    assert opl.passes - before == 2


def test_data_keeps_dask_lazy_and_checks_values(data):
    X, _, _ = data
    d = sm.Data(as_dask(X, 25), name="X")
    assert d.chunked and d.shape == X.shape and isinstance(d.value, da.Array)
    bad = X.copy()
    bad[37, 4] = np.nan
    bad[90, 2] = np.inf
    with pytest.raises(DataError, match=r"1 NaN and 1 infinite value\(s\) \(first at index \(37, 4\)\)"):
        sm.Data(as_dask(bad, 25), name="X")
    with pytest.raises(DataError, match="not numbers"):
        sm.Data(da.from_array(np.array([["a", "b"], ["c", "d"]]), chunks=1), name="S")


# ---------------------------------------------------------------------- readers


MODEL = """data X : matrix from "{spec}"
data y : vector from "y.npy"
var w[cols(X)]
minimize sum_squares(X @ w - y) / (2 * rows(X))
subject to nnz(w) <= 4
"""


@pytest.fixture
def files(tmp_path, data):
    X, y, _ = data
    (tmp_path / "parts").mkdir()
    for i in range(12):  # natural order: part2 before part10
        np.save(tmp_path / "parts" / f"part{i}.npy", X[10 * i : 10 * (i + 1)])
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "X.npy", X)
    da.to_zarr(da.from_array(X, chunks=(25, P)), str(tmp_path / "X.zarr"))
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "X.h5", "w") as f:
        f.create_dataset("grp/X", data=X)
        f.create_dataset("other", data=np.zeros(3))
    return tmp_path


@pytest.mark.parametrize("spec", ["parts/*.npy", "X.zarr", "X.h5:grp/X"])
def test_chunked_readers_give_the_same_problem(files, spec):
    pytest.importorskip("zarr")
    (files / "ref.sm").write_text(MODEL.format(spec="X.npy"))
    (files / "m.sm").write_text(MODEL.format(spec=spec))
    ref = sm.load(str(files / "ref.sm"))
    got = sm.load(str(files / "m.sm"))
    assert got.data["X"].chunked
    assert np.array_equal(np.asarray(got.data["X"].value.compute()), ref.data["X"].value)
    a, b = ref.solve(solver="grahtp"), got.solve(solver="grahtp")
    assert list(a.support) == list(b.support) and abs(a.objective - b.objective) <= 1e-8


@pytest.mark.parametrize(
    "spec,message",
    [
        ("nope/*.npy", 'the folder of "nope/\\*.npy" does not exist'),
        ("parts/*.txt", "does not end in .npy"),
        ("parts/q*.npy", "no file matches"),
        ("X.h5:nope", "has no dataset 'nope'"),
        ("X.h5", "holds 2 datasets; name one"),
        ("missing.zarr", "does not exist"),
        ("X.zarr:a", "is a single array, not a group"),
    ],
)
def test_bad_chunked_sources_are_located(files, spec, message):
    (files / "m.sm").write_text(MODEL.format(spec=spec))
    with pytest.raises(DataError, match=message) as exc:
        sm.load(str(files / "m.sm"))
    assert exc.value.span is not None and exc.value.span.line == 1 and exc.value.span.column == 22


def test_row_block_of_another_width_is_named(files):
    np.save(files / "parts" / "part12.npy", np.zeros((5, P + 1)))
    (files / "m.sm").write_text(MODEL.format(spec="parts/*.npy"))
    with pytest.raises(DataError, match=r"part12.npy .* has shape \(5,31\), but part0.npy has \(10,30\)"):
        sm.load(str(files / "m.sm"))


# ---------------------------------------------------------------------- CLI


def test_cli_scheduler_synchronous_end_to_end(files, capsys):
    (files / "m.sm").write_text(MODEL.format(spec="parts/*.npy"))
    (files / "ref.sm").write_text(MODEL.format(spec="X.npy"))
    assert main(["solve", str(files / "m.sm"), "--solver", "grahtp", "--scheduler", "synchronous", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert main(["solve", str(files / "ref.sm"), "--solver", "grahtp", "--json", "--quiet"]) == 0
    ref = json.loads(capsys.readouterr().out)
    assert got["support"] == ref["support"] and abs(got["objective"] - ref["objective"]) <= 1e-8
    assert main(["check", str(files / "m.sm"), "--scheduler", "synchronous"]) == 0
    assert "dask (12 row blocks)" in capsys.readouterr().out
    assert main(["solve", str(files / "m.sm"), "--scheduler", "nowhere"]) == 2
    assert "unknown scheduler 'nowhere'" in capsys.readouterr().err


def test_python_scheduler_refused_before_work(data):
    X, y, _ = data
    with pytest.raises(ModelError, match="unknown scheduler"):
        least_squares(as_dask(X, 25), y).solve(solver="grahtp", scheduler="nowhere")


def test_progress_reports_iterations_and_passes(data):
    """The bar's callback sees every iteration's objective (the bar itself prints only on a terminal)."""
    X, y, _ = data
    from sparsemodel.solvers import get_solver

    lp = least_squares(as_dask(X, 25), y).lower()
    seen = []
    res = get_solver("grahtp")().solve(lp, progress=lambda it, f: seen.append((it, f)))
    assert [it for it, _ in seen] == list(range(1, len(seen) + 1))
    assert np.allclose([f for _, f in seen], res.history["objective"])
