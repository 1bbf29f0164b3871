"""bnb's nodes stop their Frank-Wolfe steps once the decision is known (``node_stop='decided'``, the
default): the relaxation's value at a visited point (an upper bound on its minimum) below the
incumbent means no number of steps prunes the node. What must hold for that to be safe: the value
is the relaxation's objective at a feasible point (so never below any dual bound of the node), a
node whose relaxation can reach the target is not given up, a leaf or an enumerated support
settled by a parent's dual point is one whose optimum reaches the incumbent (weak duality), the
steps' dual point computed from the free columns first is the generic one, and the proven optima
(and the root bound) agree with enumeration under both stopping rules."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sparsemodel.lowering import bound
from sparsemodel.lowering.bound import Relaxation, relaxation

from .test_bnb_steps import model  # (the same correlated-column problems)

TOL = 1e-9


def the_relaxation(lp) -> Relaxation:
    from sparsemodel.solvers.bnb import BranchAndBound

    return BranchAndBound._relaxation(lp)


def support_optimum(lp, units: np.ndarray) -> float:
    return float(lp.restricted_minimize(lp.set.bound_units().positions(np.asarray(units, dtype=np.int64))).f)


def enumerate_supports(lp) -> list[tuple[float, tuple[int, ...]]]:
    units = lp.set.bound_units()
    return sorted(
        (support_optimum(lp, np.array(S)), S) for S in itertools.combinations(range(units.n_units), units.budget)
    )


def random_nodes(nu: int, rng: np.random.Generator, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for _ in range(count):
        fin, fout = np.zeros(nu, dtype=bool), np.zeros(nu, dtype=bool)
        picks = rng.choice(nu, 3, replace=False)
        fin[picks[0]] = True
        fout[picks[1:]] = True
        out.append((fin, fout))
    return out


def perspective_objective(lp, rel: Relaxation, x: np.ndarray, z: np.ndarray) -> float:
    """The relaxation's objective at (x, z) written out (plain form): the model's objective at x
    plus the perspective's excess (r_j / 2)(1 / z_u - 1) x_j^2 over the constrained coordinates."""
    zc = z[lp.set.bound_units().unit_of]
    xc = x[rel.C]
    assert np.all(xc[zc == 0] == 0)
    on = zc > 0
    excess = 0.5 * rel.r[rel.C][on] * (1.0 / zc[on] - 1.0) * xc[on] ** 2
    return float(rel.design.value(x)) + float(np.sum(excess))


@pytest.mark.parametrize("kind,seed", [("logistic", 1), ("poisson", 2), ("ls", 3)])
def test_the_relaxed_value_is_the_objective_at_a_feasible_point_above_every_dual_bound(kind, seed):
    """At points Frank-Wolfe visits (exact minimizers at z, and Newton points), the relaxed value is
    the objective written out, and it is never below a dual bound of the same node (the best of
    100 exact steps): a primal value of the relaxation."""
    lp = model(kind, seed, p=9).lower()
    rel = the_relaxation(lp)
    nu = lp.set.bound_units().n_units
    rng = np.random.default_rng(seed)
    for fin, fout in random_nodes(nu, rng, 4):
        nb, _ = rel.frank_wolfe(None, 100, fin, fout, z=np.full(nu, lp.set.k / nu), inner="exact")
        z = rel.node_weights(rng.uniform(0.05, 1.0, nu), fin, fout)
        x = rel.phi_point(z)
        a = rel.anchor(x, z, curv=rel.steps_apply())
        got = rel.relaxed_value(a, z)
        if kind != "ls":
            assert got == pytest.approx(perspective_objective(lp, rel, x, z), rel=1e-12, abs=1e-12)
        assert got >= nb.value - TOL * max(1.0, abs(got))
        if rel.steps_apply():  # a Newton point from another node's point: still a point of the relaxation
            xn, _ = rel.newton_point(rel.anchor(rel.phi_point((z > 0.5).astype(float)), z, curv=True), z, fresh=True)
            an = rel.anchor(xn, z, curv=True)
            assert rel.relaxed_value(an, z) >= nb.value - TOL * max(1.0, abs(nb.value))
    if kind == "ls":  # the shifted form's value: its quadratic is the objective with the intercept eliminated
        z = np.ones(nu)
        z[lp.set.k :] = 0.0
        x = rel.phi_point(z)
        assert rel.relaxed_value(rel.anchor(x, z), z) == pytest.approx(support_optimum(lp, np.arange(lp.set.k)))


@pytest.mark.parametrize("kind,seed", [("logistic", 4), ("logistic", 5), ("poisson", 6), ("ls", 7)])
def test_decided_gives_up_only_on_nodes_that_cannot_reach_the_target(kind, seed, monkeypatch):
    """A target the node's bound reaches within n steps is still reached with ``decided`` (the
    relaxed value never undercuts it); a target above the relaxation's value at a visited point
    makes ``decided`` stop before the n steps, with a bound still below the target. (The other
    reason to stop, the extrapolated progress, is a heuristic on the cost: switched off here.)"""
    monkeypatch.setattr(bound, "STALL_STEPS", 10**6)
    lp = model(kind, seed, p=9).lower()
    rel = the_relaxation(lp)
    nu = lp.set.bound_units().n_units
    rng = np.random.default_rng(seed)
    inner = "step" if rel.steps_apply() else "exact"
    stopped = 0
    for fin, fout in random_nodes(nu, rng, 5):
        z0 = np.full(nu, lp.set.k / nu)
        plain, _ = rel.frank_wolfe(None, 30, fin, fout, z=z0, inner=inner)
        target = plain.value - 1e-12 * max(1.0, abs(plain.value))
        reached, _ = rel.frank_wolfe(None, 30, fin, fout, z=z0, target=target, inner=inner, decided=True)
        assert reached.value >= target
        calls = []
        orig = rel.node_bound

        def counting(*args, calls=calls, orig=orig, **kwargs):
            calls.append(1)
            return orig(*args, **kwargs)

        rel.node_bound = counting
        try:
            high = plain.value + 1.0  # above the relaxation's minimum (its values are within 1 of it here)
            nb, _ = rel.frank_wolfe(None, 30, fin, fout, z=z0, target=high, inner=inner, decided=True)
        finally:
            del rel.node_bound
        assert nb.value < high
        stopped += len(calls) < 31
    assert stopped == 5


@pytest.mark.parametrize("kind,seed", [("logistic", 8), ("poisson", 9), ("ls", 10)])
def test_a_dual_point_settles_a_support_only_above_its_optimum(kind, seed):
    """The bound of one support at a node's dual point (what settles a leaf or an enumerated choice
    without a solve) never exceeds that support's optimum."""
    lp = model(kind, seed, p=8).lower()
    rel = the_relaxation(lp)
    nu = lp.set.bound_units().n_units
    rng = np.random.default_rng(seed)
    for fin, fout in random_nodes(nu, rng, 3):
        nb, _ = rel.frank_wolfe(None, 10, fin, fout, z=np.full(nu, lp.set.k / nu), inner="step")
        for S in itertools.combinations(range(nu), lp.set.k):
            assert nb.value_at(np.array(S)) <= support_optimum(lp, np.array(S)) + TOL


def test_the_dense_dual_point_is_the_generic_one():
    """The steps' dual point (the free intercept's correction solved on its column first, one
    transposed product) equals the generic anchor's: base, A'theta and the gradient before the
    correction, to rounding."""
    lp = model("logistic", 11, p=9).lower()
    rel = relaxation(lp)
    assert rel.steps_apply() and len(rel.E) == 1
    rng = np.random.default_rng(0)
    for _ in range(5):
        none = np.zeros(9, dtype=bool)
        z = rel.node_weights(rng.uniform(0.0, 1.0, 9) * (rng.random(9) < 0.6), none, none)
        x = rel.phi_point(z) + 0.05 * rng.standard_normal(lp.n) * (rel.phi_point(z) != 0)
        dense = rel.anchor(x, z, curv=True)
        generic = rel.anchor(x, z)
        assert dense.raw_thetas is not None and generic.grad is not None
        scale = 1.0 + float(np.max(np.abs(generic.v)))
        assert dense.base == pytest.approx(generic.base, rel=1e-12, abs=1e-13)
        assert np.max(np.abs(dense.v - generic.v)) <= 1e-12 * scale
        cols = np.arange(lp.n)
        assert np.max(np.abs(rel._raw_gradient(dense, cols) - generic.grad)) <= 1e-12 * scale
        assert dense.primal == pytest.approx(rel.design.value(x), rel=1e-13)
        assert generic.primal == pytest.approx(rel.design.value(x), rel=1e-13)


@pytest.mark.parametrize("kind,seed,k", [("logistic", 20, 2), ("logistic", 21, 3), ("poisson", 22, 3), ("ls", 23, 3)])
def test_both_stopping_rules_prove_the_enumerated_optimum(kind, seed, k):
    """The proven optimum is the enumerated one under both rules, and neither the root bound nor the
    final bound exceeds it; with top = 3 the three best supports are the enumerated three."""
    prob = model(kind, seed, p=9, k=k)
    lp = prob.lower()
    listed = enumerate_supports(lp)
    opt = listed[0][0]
    scale = max(1.0, abs(opt))
    for stop in ("decided", "iters"):
        r = prob.solve("bnb", node_stop=stop, gap_tol=1e-8)
        assert r.status == "optimal", r.message
        assert r.objective == pytest.approx(opt, rel=1e-8, abs=1e-10)
        assert r.lower_bound <= opt + TOL * scale
        assert r.extra["root_bound"] <= opt + TOL * scale
        t = prob.solve("bnb", node_stop=stop, top=3, gap_tol=1e-8)
        got = [e["objective"] for e in t.extra["top_supports"]]
        assert got == pytest.approx([f for f, _ in listed[:3]], rel=1e-7, abs=1e-9)
        assert [tuple(e["units"]) for e in t.extra["top_supports"]] == [S for _, S in listed[:3]]


def test_a_step_point_outside_the_conjugates_domain_falls_back_to_x_of_z():
    """A Newton point far from x(z) (here its intercept moved by 3) puts the corrected dual point
    outside the logistic conjugate's domain; the step then takes x(z) itself, whose bound is
    finite and below the optimum, instead of stopping the search with an error."""
    from sparsemodel.errors import NoBoundError

    lp = model("logistic", 1, p=9).lower()
    rel = the_relaxation(lp)
    assert rel.steps_apply()
    none = np.zeros(9, dtype=bool)
    z = rel.node_weights(np.full(9, 0.3), none, none)
    far = rel.phi_point(z)
    far[rel.F] += 3.0
    with pytest.raises(NoBoundError):
        rel.anchor(far, z, curv=True)
    x, a = rel._step_anchor(far, z, True, None)
    assert np.allclose(x, rel.phi_point(z))
    value = rel.node_bound(a).value
    assert np.isfinite(value) and value <= enumerate_supports(lp)[0][0] + TOL
