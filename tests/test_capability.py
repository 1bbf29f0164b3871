"""The one capability test (``Solver.takes`` with the lowered problem): ``check``'s list of solvers,
each constraint's solvers, ``auto``'s choice and the refusal hints name a solver only where it runs.
Cases where a solver takes every constraint kind of a model but not its objective: bnb without a
finite bound (Cox, a custom loss, least squares with p > n and no ridge), the relaxations without a
cvxpy counterpart (a custom loss), the edge-moving greedy solvers and the graphical LASSO on symmetric
pairs of another objective than the precision matrix's. The whole matrix (every registered example,
every solver) runs with -m slow."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import ModelError, SolverError
from sparsemodel.sets.registry import KINDS
from sparsemodel.solvers import REGISTRY


def runs(prob: sm.Problem, solver: str) -> bool:
    """Whether ``solver`` runs on the problem (a refusal is a ModelError; anything else is a bug)."""
    try:
        prob.solve(solver, **({"time_limit": 10} if solver == "bnb" else {}))
    except ModelError:
        return False
    return True


def assert_listed_where_it_runs(prob: sm.Problem, solvers) -> None:
    rep = prob.check()
    listed = {s for s, _ in rep.solvers}
    per_constraint = [set(d.split("solvers: ")[-1].split(", ")) for _, _, d in rep.constraints if "solvers: " in d]
    for s in solvers:
        ran = runs(prob, s)
        assert (s in listed) == ran, f"{s}: listed {s in listed}, runs {ran}"
        for handlers in per_constraint:
            assert (s in handlers) == ran, f"{s}: listed beside a constraint {s in handlers}, runs {ran}"


def data(seed: int = 0, n: int = 40, p: int = 10):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, :3] @ np.array([1.0, -1.0, 0.5]) + 0.3 * rng.standard_normal(n)
    return X, y, rng


def cox(linear: bool = False) -> sm.Problem:
    X, _, rng = data()
    t = np.abs(rng.standard_normal(len(X))) + 0.1
    d = (rng.uniform(size=len(X)) < 0.7).astype(float)
    w = sm.Variable(X.shape[1], name="w")
    cons = [sm.nnz(w) <= 3] + ([sm.sum(w) == 1] if linear else [])
    return sm.Problem(sm.minimize(sm.cox(sm.Data(X) @ w, t, d)), cons)


def custom(hvp: bool, rank: bool = False) -> sm.Problem:
    X, y, rng = data()
    if rank:
        Y = X @ rng.standard_normal((X.shape[1], 4))
        W = sm.Variable((X.shape[1], 4), name="W")

        def loss(V):
            R = Y - X @ V
            return float(np.sum(R * R)), -2 * X.T @ R

        return sm.Problem(sm.minimize(sm.custom_loss(loss, W)), [sm.rank(W) <= 2])
    w = sm.Variable(X.shape[1], name="w")

    def loss(v):
        r = y - X @ v
        return float(r @ r), -2 * X.T @ r

    h = (lambda v, d: 2 * X.T @ (X @ d)) if hvp else None
    return sm.Problem(sm.minimize(sm.custom_loss(loss, w, hvp=h)), [sm.nnz(w) <= 3])


def pairs_least_squares() -> sm.Problem:
    rng = np.random.default_rng(1)
    M = rng.standard_normal((6, 6))
    O = sm.Variable((6, 6), symmetric=True, name="O")
    return sm.Problem(sm.minimize(sm.sum_squares(O - (M + M.T))), [sm.nnz(sm.offdiag(O)) <= 6])


def least_squares(n: int, p: int, ridge: float = 0.0, linear: bool = False) -> sm.Problem:
    X, y, _ = data(2, n, p)
    w = sm.Variable(p, name="w")
    obj = sm.sum_squares(sm.Data(X) @ w - y) + ridge * sm.sum_squares(w)
    return sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 3] + ([sm.sum(w) == 1, w >= 0] if linear else []))


CASES = {
    "cox": (cox, ["bnb", "auto", "grahtp", "lasso", "sg_ht"]),
    "cox with sum(w) == 1": (lambda: cox(True), ["bnb", "auto", "iht"]),
    "custom loss": (lambda: custom(False), ["bnb", "lasso", "grahtp", "omp"]),
    "custom loss with hvp": (lambda: custom(True), ["bnb", "lasso", "auto"]),
    "custom loss, rank": (lambda: custom(False, rank=True), ["nuclear", "grahtp"]),
    "pairs of least squares": (pairs_least_squares, ["forward", "foba", "glasso", "grasp", "auto"]),
    "least squares p > n": (lambda: least_squares(20, 40), ["bnb", "auto"]),
    "least squares p > n, ridge": (lambda: least_squares(20, 40, ridge=0.5), ["bnb"]),
    "long-only least squares": (lambda: least_squares(40, 10, linear=True), ["bnb", "auto", "omp"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_lists_a_solver_exactly_where_it_runs(case):
    build, solvers = CASES[case]
    assert_listed_where_it_runs(build(), solvers)


def test_auto_and_the_hints_name_only_solvers_that_run():
    """On a Cox model with sum(w) == 1, omp's refusal names the solvers that handle the equality on
    this model (bnb takes the kind, but has no bound for Cox); a stochastic solver's refusal on Cox
    (no finite sum) names the deterministic ones that run, without bnb; bnb's refusal is its
    relaxation's reason; the default is auto."""
    prob = cox(True)
    with pytest.raises(SolverError) as e:
        prob.solve("omp")
    assert "auto, grahtp, fgrahtp, iht" in e.value.hint and "bnb" not in e.value.hint
    with pytest.raises(SolverError) as e:
        cox().solve("sg_ht")
    assert "grahtp" in e.value.hint and "bnb" not in e.value.hint
    with pytest.raises(ModelError) as e:
        prob.solve("bnb")
    assert "lower bound" in str(e.value) and "Cox" in str(e.value)
    assert prob.check().default_solver.startswith("auto")
    assert prob.solve().solver == "auto"
    # a finite sum beside constraints no stochastic solver takes: check does not say they apply
    text = least_squares(40, 10, linear=True).check().render()
    assert "a finite sum: no stochastic solver takes these constraints" in text
    assert "a finite sum: the stochastic solvers apply" in least_squares(40, 10).check().render()


def test_sparsemodel_solvers_says_what_an_objective_must_be():
    """The solvers listing carries each solver's objective requirement (what ``unfit`` tests)."""
    assert "finite lower bound" in REGISTRY["bnb"].needs and "finite sum" in REGISTRY["sg_ht"].needs
    assert "cvxpy" in REGISTRY["lasso"].needs and "precision" in REGISTRY["glasso"].needs


def _variants():
    """Every registered kind's example, and objectives of every family on a plain nnz."""
    out = {f"example {k}": (lambda k=k: sm.Problem.of(KINDS[k].example())) for k in KINDS if KINDS[k].example}
    X, y, rng = data(3, 60, 12)
    v = np.sign(y + 0.01)
    c = rng.poisson(1.0, len(y)).astype(float)

    def glm(kind: str) -> sm.Problem:
        w = sm.Variable(X.shape[1], name="w")
        z = sm.Data(X) @ w
        obj = {
            "logistic": sm.mean(sm.logistic(-v * z)) + 0.01 * sm.sum_squares(w),
            "poisson": sm.mean(sm.exp(z) - c * z),
            "huber": sm.mean(sm.huber(z - y, 1.0)),
        }[kind]
        return sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 3])

    out.update({k: (lambda k=k: glm(k)) for k in ("logistic", "poisson", "huber")})
    out.update({k: b for k, (b, _) in CASES.items()})
    return out


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(_variants()))
def test_check_lists_every_solver_exactly_where_it_runs(case):
    """The whole matrix: every registered solver on every example kind and objective family."""
    prob = _variants()[case]()
    solvers = [s for s in REGISTRY if s != "auto" or prob.check().default_solver.startswith("auto")]
    assert_listed_where_it_runs(prob, solvers)
