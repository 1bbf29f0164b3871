"""The conformance suite: every registered constraint kind and every registered solver, checked on
the kind's own example model (sparsemodel/sets/examples.py, attached when the kind is registered).
A new set or a new solver is tested here by registering it, as scikit-learn's ``check_estimator``
tests an estimator.

For every set: the projection lands in the set, is idempotent, is the nearest point of the set
among many feasible points, spends at most its budget, and the budget's ends are refused with a
message; the subspace of a state embeds and restricts consistently. For every solver and every
kind it accepts: a complete Result, a feasible answer, the same answer twice, an answer no worse
than the best point that uses none of the budget, and (for the solvers that finish with the
restricted solve) no improvement left on its own support.
"""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
import sparsemodel.solvers  # noqa: F401  (registers every solver)
from sparsemodel.errors import ModelError
from sparsemodel.sets.registry import KINDS
from sparsemodel.solvers.base import REGISTRY
from sparsemodel.solvers.stochastic import _Stochastic

KIND_NAMES = sorted(KINDS)


def lowered(kind: str):
    return sm.Problem.of(KINDS[kind].example()).lower()


def test_every_kind_has_an_example_of_itself():
    for name in KIND_NAMES:
        assert KINDS[name].example is not None, f"kind {name} registered without an example model"
        lp = lowered(name)
        assert name in lp.kinds, f"the example of {name} lowers to kinds {sorted(lp.kinds)}"


def feasible(lp, x: np.ndarray) -> bool:
    """x lies in every set of the problem: the main set (its projection leaves x where it is and
    its state fits the budget) and each side set (``contains``)."""
    ok = True
    if lp.set is not None:
        y, st = lp.set.project(x)
        ok &= bool(np.allclose(y, x, atol=1e-8 * (1 + np.abs(x).max()))) and lp.set.used(st) <= lp.set.budget
    for s in lp.side:
        ok &= bool(s.contains(x))
    return ok


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_the_main_set_projects_to_the_nearest_point_within_budget(kind):
    lp = lowered(kind)
    S = lp.set
    rng = np.random.default_rng(11)
    # 0, 1, the set's own bound and its limit (for a product of sets, per part: a budget of several
    # parts scales and compares part by part, sets/product.Budgets)
    budgets = [S.limit * 0, S.limit * 0 + 1, S.budget, S.limit]
    for b in budgets:
        try:
            Sb = S.with_budget(b)
        except ModelError:  # a budget the set's other constraints exclude (sum(w) == 1 with k = 0)
            assert b < S.budget, "the set refuses its own budget or a larger one"
            continue
        for _ in range(5):
            z = 3 * rng.standard_normal(lp.n)
            x, st = Sb.project(z)
            assert Sb.used(st) <= b
            assert Sb.used(Sb.state(x)) <= Sb.used(st)  # (a box may clip a selected entry to 0)
            x2, st2 = Sb.project(x)
            # the point is reproduced, and so is the selection when it is the point's own structure
            # (a selected unit that the projection set to zero, as a box or a simplex can, is a tie)
            reproduced = Sb.same(st, st2) or not Sb.same(Sb.state(x), st)
            assert np.allclose(x2, x, atol=1e-9) and reproduced, "projection not idempotent"
            # nearest: no feasible point (projections of other points) is closer to z
            d = np.linalg.norm(x - z)
            for _ in range(30):
                y = Sb.project(z + rng.standard_normal(lp.n) * rng.uniform(0.05, 3))[0]
                assert d <= np.linalg.norm(y - z) + 1e-9, f"{kind}: a feasible point nearer than the projection"


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_the_budget_ends_are_refused_with_a_message(kind):
    S = lowered(kind).set
    for bad in (-1, S.limit + 1, 2.5):
        with pytest.raises(ModelError) as e:
            S.check_budget(bad)
        assert str(S.variable) in str(e.value) or "bound" in str(e.value).lower()
    assert S.check_budget(S.limit) == S.limit and S.check_budget(S.limit * 0) == 0
    assert str(S.budget) in S.describe()


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_a_subspace_embeds_and_restricts_consistently(kind):
    lp = lowered(kind)
    S = lp.set
    rng = np.random.default_rng(12)
    x, st = S.project(rng.standard_normal(lp.n))
    sub = S.subspace(st)
    u = sub.coords_of(x)
    assert u.shape == (sub.dim,)
    assert np.allclose(sub.embed(u), x), "a point of the subspace is not its own embedding"
    v = rng.standard_normal(sub.dim)
    g = rng.standard_normal(lp.n)
    assert np.isclose(g @ sub.embed(v), sub.restrict(g) @ v), "restrict is not the adjoint of embed"
    assert S.used(S.empty()) == 0
    # the empty state's subspace holds only the free part: projecting to budget 0 stays in it
    try:
        S.with_budget(0)
    except ModelError:  # the set's other constraints exclude a budget of 0 (sum(w) == 1)
        return
    z0 = S.project(rng.standard_normal(lp.n), 0)[0]
    e = S.subspace(S.empty())
    assert np.allclose(e.embed(e.coords_of(z0)), z0)


@pytest.mark.parametrize("kind", [k for k in KIND_NAMES if any(not s.thresholds for s in lowered(k).side)])
def test_side_sets_project_into_themselves(kind):
    lp = lowered(kind)
    rng = np.random.default_rng(13)
    for s in lp.side:
        for _ in range(5):
            z = 3 * rng.standard_normal(lp.n)
            y = s.project(z)[0]
            assert s.contains(y)
            assert np.allclose(s.project(y)[0], y, atol=1e-8)


# every solver on every example it runs on by the one capability test (the kinds, and its objective:
# Solver.takes with the lowered problem), which is what check lists (tests/test_capability.py)
PAIRS = [(s, k) for s in sorted(REGISTRY) for k in KIND_NAMES if REGISTRY[s].takes(lowered(k).kinds, lowered(k))]


def zero_budget_floor(lp) -> float:
    """The best objective of a point that uses none of the budget (its free part optimized)."""
    return float(lp.restricted_minimize(lp.set.empty()).f)


@pytest.mark.parametrize("solver,kind", PAIRS, ids=[f"{s}-{k}" for s, k in PAIRS])
def test_every_solver_on_every_kind_it_accepts(solver, kind):
    check_solver_on_kind(solver, kind)


def check_solver_on_kind(solver: str, kind: str) -> None:
    """What every registered solver must give on the example model of a kind it accepts (a new
    solver's own tests may call this directly)."""
    problem = sm.Problem.of(KINDS[kind].example())
    try:
        r = problem.solve(solver)
    except ModelError as e:  # the capability test said it runs here: a refusal is a false claim
        pytest.fail(f"{solver} claims the {kind} example (Solver.takes) but refuses it: {str(e).splitlines()[0]}")
    lp = problem.lower()
    # a complete result
    assert r.status in ("converged", "max_iter", "optimal"), r.status
    assert r.solver == solver and np.isfinite(r.objective) and r.k == lp.set.budget
    assert r.iterations >= 0 and r.time_s >= 0 and r.unit
    x = np.concatenate([np.ravel(r.values[v.name]) for v in lp.layout.variables])
    assert np.isclose(lp.f(x), r.objective, rtol=1e-8, atol=1e-10), "objective is not f(x)"
    assert np.array_equal(np.sort(r.support), np.sort(lp.set.nonzeros(x)))
    # the lower bound beside the answer (docs/certify.md), where one exists, lies below it
    if r.lower_bound is not None:
        assert r.lower_bound <= r.objective and 0 <= r.gap and r.bound_how
    else:
        assert r.gap is None and r.bound_note
    if r.status == "optimal":
        assert r.gap <= REGISTRY[solver](**{}).opts.get("gap_tol", 0)
    # feasible
    assert feasible(lp, x), f"{solver} returned a point outside the {kind} set"
    # deterministic
    r2 = problem.solve(solver)
    assert np.array_equal(r2.x, r.x) and r2.objective == r.objective
    # no worse than using none of the budget
    floor = zero_budget_floor(lp)
    assert r.objective <= floor + 1e-8 * (1 + abs(floor))
    # debiased: nothing left to gain on its own support (where the restricted problem is one convex
    # problem over a fixed subspace; the low-rank refit is two alternating solves, column space then
    # row space, and a second round may still gain)
    st = lp.set.state(x)
    if not issubclass(REGISTRY[solver], _Stochastic) and lp.set.subspace(st).form != "lowrank":
        refit = float(lp.restricted_minimize(st, x0=x).f)
        assert r.objective <= refit + 1e-6 * (1 + abs(refit)), f"{solver} left {r.objective - refit:.3g} on its support"


def test_every_concrete_class_gives_its_base_classes_hooks():
    """The template classes declare their hooks abstract (atoms' values and derivatives, a
    constraint's variable and limit, a set's limit, a tuned relaxation's start/snap/penalty, a sparse
    PCA solver's component): every class the package defines under them gives each one."""
    import importlib
    import inspect
    import pkgutil

    from sparsemodel.model.atoms.base import Elementwise, WholeLoss
    from sparsemodel.model.constraints.base import Bounded, Constraint
    from sparsemodel.sets.base import ConstraintSet
    from sparsemodel.solvers.tpm import _SparsePCASolver
    from sparsemodel.solvers.tuning import TunedRelaxation

    for m in pkgutil.walk_packages(sm.__path__, "sparsemodel."):
        if not m.name.endswith("__main__"):
            importlib.import_module(m.name)
    bases = (Elementwise, WholeLoss, Constraint, Bounded, ConstraintSet, TunedRelaxation, _SparsePCASolver)

    def below(c):
        for s in c.__subclasses__():
            yield s
            yield from below(s)

    abstract_ok = {"SideSet"}  # a base of its own (box, eigenvalue box, ball, linear sets)
    seen = 0
    for base in bases:
        for cls in below(base):
            if cls.__module__.startswith("sparsemodel.") and cls.__name__ not in abstract_ok:
                seen += 1
                assert not inspect.isabstract(cls), (cls, sorted(cls.__abstractmethods__))
    assert seen >= 30  # every elementwise atom, constraint, set kind and relaxation


def test_a_side_set_has_no_degrees_of_freedom_and_says_why():
    from sparsemodel.errors import ConstraintError

    w = sm.Variable(4, name="w")
    lp = sm.Problem(sm.minimize(sm.sum_squares(w - 1)), [sm.nnz(w) <= 2, w >= 0]).lower()
    side = next(s for s in lp.side if s is not None)
    with pytest.raises(ConstraintError, match="selects no units"):
        side.degrees_of_freedom(np.ones(4), np.zeros(4, dtype=bool))
