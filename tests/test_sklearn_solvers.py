"""Every scikit-learn estimator with every registered solver: the fit respects k, or it stops with a
``ModelError`` (also a ``ValueError``, as scikit-learn expects). A solver refused for the model's
constraint kinds (``Solver.takes``, the test ``check`` and ``solve`` use) is refused at ``fit``,
whatever k, with a hint naming only solvers that take the model; it never answers with every feature
(the largest bound of the path, which needs no solver)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sparsemodel.errors import ModelError  # noqa: E402
from sparsemodel.sklearn import (  # noqa: E402
    SparseLinearRegression,
    SparseLogisticRegression,
    SparsePoissonRegression,
)
from sparsemodel.solvers.base import REGISTRY  # noqa: E402

N, P = 50, 6


def data(kind: str):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, P))
    w = np.zeros(P)
    w[[1, 4]] = [1.5, -1.0]
    if kind == "linear":
        return SparseLinearRegression, {}, X, X @ w + 0.3 * rng.standard_normal(N)
    if kind == "poisson":
        return SparsePoissonRegression, {}, X, rng.poisson(np.exp(0.5 * X @ w)).astype(float)
    if kind == "binary":
        return SparseLogisticRegression, {}, X, (X @ w + 0.5 * rng.standard_normal(N) > 0).astype(int)
    scores = np.column_stack([X @ w, -X @ w, np.zeros(N)]) + rng.gumbel(size=(N, 3))
    return SparseLogisticRegression, {"multinomial": kind}, X, np.argmax(scores, axis=1)


KINDS = ("linear", "poisson", "binary", "groups", "reference")


def units_used(est) -> int:
    """What k counts: features, or class-specific coefficients (the reference class's column is 0)."""
    coef = np.atleast_2d(est.coef_)
    if getattr(est, "multinomial", "groups") == "reference" and coef.shape[0] > 2:
        return int(np.count_nonzero(coef[1:]))
    return int(np.count_nonzero(np.any(coef != 0, axis=0)))


def fit_or_refuse(est_cls, kw, X, y, solver: str, k):
    cls = REGISTRY[solver]
    opts = {"max_iter": 30} if "max_iter" in cls.options else {}
    est = est_cls(k=k, solver=solver, solver_options=opts, k_max=3, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning at max_iter = 30
        try:
            return est.fit(X, y), None
        except ModelError as exc:
            assert isinstance(exc, ValueError)  # scikit-learn's convention for a bad parameter
            return est, exc


def named_solvers(exc: ModelError) -> list[str]:
    m = re.search(r"solvers that (?:handle .*?|take this model): (.*)$", exc.hint or "")
    return [s.strip() for s in m.group(1).split(",")] if m else []


# the constraint kinds of each estimator's model (sparsemodel/sklearn.py): nnz(w) <= k; the row
# groups of the softmax's W; with a reference class, nnz of the other columns and a box fixing its own
MODEL_KINDS = {
    "linear": {"nnz"},
    "poisson": {"nnz"},
    "binary": {"nnz"},
    "groups": {"nnz_groups"},
    "reference": {"nnz", "box"},
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("solver", sorted(REGISTRY))
def test_every_estimator_with_every_solver_fits_within_k_or_refuses(kind, solver):
    est_cls, kw, X, y = data(kind)
    takers = [name for name, c in REGISTRY.items() if c.takes(MODEL_KINDS[kind])]
    est, exc = fit_or_refuse(est_cls, kw, X, y, solver, 2)
    if solver not in takers:  # refused at fit, naming exactly the solvers that take the model
        assert exc is not None and exc.kind == "solver error", f"{solver} was not refused"
        assert named_solvers(exc) == takers
        for k in ("ebic", 10**6):  # whatever k: the chosen k (a path), every feature allowed
            again = fit_or_refuse(est_cls, kw, X, y, solver, k)[1]
            assert again is not None and again.message == exc.message
    elif exc is None:
        assert est.k_ == 2 and units_used(est) <= 2
    else:  # a solver that takes the model and fails on it (diverged, no lower bound): said, no fit
        assert not hasattr(est, "coef_") and "does not handle" not in exc.message


def test_omp_refuses_the_multinomial_model_instead_of_keeping_every_feature():
    """The row groups of the softmax model are not a kind omp takes: before, the path's points
    failed one by one and the largest bound (every feature, answered without a solver) was chosen."""
    est_cls, kw, X, y = data("groups")
    with pytest.raises(ModelError, match="omp does not handle group-sparsity") as info:
        SparseLogisticRegression(solver="omp").fit(X, y)
    names = named_solvers(info.value)
    assert "auto" in names and "omp" not in names
    for name in names:
        assert REGISTRY[name].takes({"nnz_groups"})


def test_a_path_refuses_a_solver_that_cannot_take_the_model():
    """Problem.select and Problem.path refuse before the first point, as solve does."""
    import sparsemodel as sm

    _, _, X, y = data("groups")
    W = sm.Variable((P, 3), name="W")
    Y = np.eye(3)[y]
    obj = sm.mean(sm.logsumexp(X @ W, axis=1) - sm.sum(Y * (X @ W), axis=1))
    prob = sm.Problem(sm.minimize(obj), [sm.nnz(W, groups=np.repeat(np.arange(P), 3)) <= 2])
    for call in (lambda: prob.select(solver="omp"), lambda: prob.path(k=[1, P], solver="omp")):
        with pytest.raises(ModelError, match="omp does not handle group-sparsity"):
            call()


def test_a_solver_that_diverges_at_every_k_is_no_choice_of_k():
    """hsg_ht's step on the Poisson loss (no global curvature bound) diverges at every k of the
    path: the selection says so, instead of choosing k = 0, the one point answered without it."""
    _, _, X, y = data("poisson")
    with pytest.raises(ModelError, match="no k could be evaluated by hsg_ht") as info:
        SparsePoissonRegression(solver="hsg_ht", k_max=3).fit(X, y)
    assert "k=1: diverged" in info.value.hint
