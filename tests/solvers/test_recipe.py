"""The recipe of docs/architecture.md for a new solver, followed once: a solver written in this
file alone (registered here, nothing in sparsemodel/ edited) is accepted by the registry, gets
every generic constraint kind through the set protocol, is listed and refused where it should be,
and passes the conformance suite on every kind it accepts."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import SolverError
from sparsemodel.lowering.lowered import LoweredProblem
from sparsemodel.sets.registry import KINDS
from sparsemodel.solvers.base import REGISTRY, Solver, register
from sparsemodel.solvers.options import Option, restricted_option
from sparsemodel.solvers.result import CONVERGED, MAX_ITER, Result, finish
from sparsemodel.util import Clock
from tests.test_conformance import check_solver_on_kind, lowered


class DebiasedIHT(Solver):
    """The recipe's solver: IHT with the step 1/L_2k and a restricted solve after every projection
    (a minimal hard thresholding pursuit), written against the set protocol only."""

    name = "recipe_htp"
    handles = frozenset()  # kinds it knows by name; `protocol` adds every generic kind
    protocol = True  # it uses only lp.project, lp.set.state/same/empty and lp.restricted_minimize
    summary = "the architecture recipe's example: IHT with debiasing"
    reference = "docs/architecture.md, 'Adding a solver'"
    options = {
        "max_iter": Option(100, "iterations", int, low=1),
        "restricted": restricted_option(),
    }

    def run(self, lp: LoweredProblem) -> Result:
        o = self.opts
        clock = Clock()
        hist = self.history(lp, clock)
        s = lp.set
        r = lp.restricted_minimize(s.empty(), method=o["restricted"])  # the free part, nothing selected
        x, f = r.x, r.f
        hist.log(f)
        L = lp.restricted_smoothness(2 * s.k)
        status, it = MAX_ITER, 0
        while it < o["max_iter"]:
            it += 1
            _, g = lp.value_and_grad(x)
            z, state = lp.project(x - g / L)  # the projection is counted where it happens
            r = lp.restricted_minimize(state, x0=z, method=o["restricted"])
            if r.f >= f - 1e-12 * max(1.0, abs(f)):  # no decrease: keep the last iterate
                status = CONVERGED
                break
            x, f = r.x, r.f
            hist.log(f)
        return finish(lp, self, x, status, it, clock, hist, f=f)


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(REGISTRY, DebiasedIHT.name, DebiasedIHT)
    return DebiasedIHT


def test_register_is_the_decorator_the_recipe_names():
    saved = dict(REGISTRY)
    try:
        assert register(DebiasedIHT) is DebiasedIHT and REGISTRY["recipe_htp"] is DebiasedIHT
    finally:
        REGISTRY.clear()
        REGISTRY.update(saved)


def test_the_protocol_gives_it_every_generic_kind(registered):
    assert registered.accepts("fused") and not registered.accepts("nnz")
    assert "recipe_htp" in sm.solvers.solvers_for("fused")


# the kinds whose example it runs on by the one capability test (a product of bounded variables counts
# only where it takes every part)
@pytest.mark.parametrize("kind", [k for k in sorted(KINDS) if DebiasedIHT.takes(lowered(k).kinds, lowered(k))])
def test_it_passes_the_conformance_suite(registered, kind):
    check_solver_on_kind("recipe_htp", kind)


def test_it_is_refused_on_kinds_it_does_not_accept_with_the_solvers_that_do(registered):
    problem = sm.Problem.of(KINDS["nnz"].example())
    with pytest.raises(SolverError) as e:
        problem.solve("recipe_htp")
    assert "recipe_htp does not handle sparsity" in str(e.value) and "grahtp" in str(e.value.hint)


def test_it_recovers_the_breakpoints_of_a_piecewise_constant_signal(registered):
    problem = sm.Problem.of(KINDS["fused"].example())
    r = problem.solve("recipe_htp")
    assert np.array_equal(np.flatnonzero(np.diff(r.x) != 0) + 1, [10, 20, 30])
    assert r.objective <= problem.solve("grahtp").objective + 1e-9
