"""GraHTP and FGraHTP: Algorithm 1 of paper 000 (Yuan, Li, Zhang, "Gradient Hard Thresholding Pursuit").

Each iteration t:

* (S1) gradient step   x~ = x(t-1) - eta * grad f(x(t-1));
* (S2) selection       F(t) = supp(x~, k), the k largest |x~_i| (argpartition, not a sort);
* (S3) GraHTP debiases, x(t) = argmin { f(x) : supp(x) within F(t) } (the lowered problem's
  restricted solve: QR for least squares, Newton for composite losses, L-BFGS otherwise);
  FGraHTP truncates, x(t) = x~ restricted to F(t) (this is nonlinear IHT).

GraHTP stops when F(t) = F(t-1) (then x stays fixed forever, Section 2); both variants also stop on
a relative change ||x(t) - x(t-1)|| / ||x(t-1)|| <= tol (the criterion of Section 6.2.2).

Coordinates outside the nnz(...) slice (an intercept, other variables) are never thresholded:
S2 ranks only the constrained coordinates, S3 always optimizes the free ones.

The same three steps run on any constraint set of :mod:`sparsemodel.sets`: for
``rank(W) <= r``, S2 is the truncated SVD (the best rank-r approximation), F(t) is its singular
subspaces, S3 minimizes f over {U C} (the column space of the S2 point; see ``LowRank``), and the
stopping rule F(t) = F(t-1) compares column spaces.

Step size (option ``eta``; measurements in docs/solvers.md, "The GraHTP step rule"). ``'rss'`` is
the paper's choice eta = 1/(2 M_2k) (Remark 6, Section 6.2.1), with M_2k estimated by the truncated
power method; Lemma 13 then guarantees that f decreases. Deviation for accuracy: that step is so
short that S2 rarely swaps coordinates and GraHTP stops early at poor supports (on the Section 6.1
problem, n=250, it stalled in 3 of 10 trials at objectives 10-60 times the truth's; on the Section
6.2 logistic protocol it stopped after two iterations 10-30 times above ELS's objective), which the
paper itself warns about below (3). The rules:

* ``'local'`` (GraHTP's default): eta_t = 1 / mean_{j in C} H_jj(x_t), HTP's unit step for
  normalized columns (Foucart 2011) at the curvature of the current iterate, recomputed every
  iteration; the diagonal is exact from the design's columns for every loss (built-in atoms and
  ``func``s alike, so one function spelled two ways gets one step), O(rows) per iteration. On least
  squares (a constant Hessian) it is ``'htp'``.
* ``'htp'``: the same at the start, then fixed (the former default).
* ``'bb'`` (FGraHTP's default): Barzilai-Borwein, eta = s's / s'y for the last changes s of x and y
  of the gradient (``'local'`` when s'y <= 0).

Every rule keeps f monotone by backtracking: an iteration that would increase f is rejected and
eta halved (``backtracking=true``; ``false`` runs the fixed step unchanged and stops with status
``diverged`` if f becomes non-finite or grows persistently). With backtracking f never increases,
so a run is never ``diverged``: when no step size down to one that moves no coordinate lowers f,
the last accepted iterate is returned as ``converged`` and the message says what happened. A step
whose S2 keeps the current support is F(t) = F(t-1) without a new S3 (x already minimizes f on
it; a re-solve could differ from x only by the restricted solve's tolerance, which on an
ill-conditioned precision matrix read as an increase and halved eta down to 1e-14).

Support-change line search (``search=true``, GraHTP only; a deviation, ``search=false`` is the
paper's stopping rule): when the step leaves F(t) = F(t-1), eta is doubled until S2 selects another
support (projections only), the debiased f there is computed, and that support is kept when f
decreases; up to three supports are tried before GraHTP stops. The first one differs from F(t-1)
by the largest gradient entry in and the smallest |x_j| out (OMPR's swap), so GraHTP no longer stops
where OMPR would still improve f.

The start is :meth:`LoweredProblem.inside_domain` (zero, or the free coordinates moved to where f is
finite), and the curvature is measured there, never at a point outside the loss's domain.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SolverError
from ..lowering.forms import divergence_advice
from ..lowering.lowered import LoweredProblem
from ..util import Clock
from .base import Solver, divergence_message, initial_point, register
from .options import Option, restricted_option, subproblem13_options
from .result import CONVERGED, DIVERGED, MAX_ITER, Result, finish

STEP_RULES = ("auto", "local", "bb", "htp", "rss")
SEARCH_TRIES = 3  # supports tried by one support-change line search


@register
class GraHTP(Solver):
    name = "grahtp"
    protocol = True  # the projection, state, subspace and certificate of any set
    handles = frozenset({"nnz", "nnz_groups", "nnz_pairs", "rank", "box", "eig_box", "linear_eq", "linear_ineq"})
    summary = "Gradient Hard Thresholding Pursuit: gradient step, top-k, debias on the support"
    reference = "paper 000, Algorithm 1 (GraHTP)"
    default_eta = "local"  # what eta='auto' means (measured: see the module docstring)
    options = {
        "eta": Option(
            "auto",
            "step size: a number, or a rule: 'local' = 1/mean diag of the Hessian at the current iterate "
            "(recomputed every iteration); 'htp' = the same at the start, then fixed (HTP's unit step); "
            "'bb' = Barzilai-Borwein; 'rss' = the paper's 1/(2 M_2k), M_2k by truncated power iteration "
            "(rank 2r for rank constraints); 'auto' = 'local' for GraHTP, 'bb' for FGraHTP",
            "float_or_name",
            STEP_RULES,
            low=0,
            open_low=True,
        ),
        "max_iter": Option(500, "maximum number of iterations", int, low=1),
        "tol": Option(1e-6, "stop when ||x(t)-x(t-1)|| <= tol ||x(t-1)||", float, low=0),
        "debias": Option(True, "S3 debiasing (GraHTP); false truncates instead (FGraHTP)", bool),
        "backtracking": Option(
            True, "halve eta when an iteration would increase f (false: the paper's fixed step)", bool
        ),
        "search": Option(
            True,
            "support-change line search (GraHTP): when a step leaves the support unchanged, double eta until "
            "the support changes and keep the new support if its debiased f is lower (up to 3 supports); "
            "false: stop at F(t) = F(t-1) as the paper does",
            bool,
        ),
        "init": Option("zeros", "starting point: 'zeros' or an array (Python API)", "any"),
        "restricted": restricted_option("step S3"),
        **subproblem13_options(),
    }

    def _curvature_step(self, lp: LoweredProblem, x: np.ndarray, g: np.ndarray) -> float:
        """HTP's unit step 1 / (mean curvature at x), the estimate made safe (a negative or zero
        one is rounding on a flat convex loss, or the sign of a nonconvex custom loss's curvature:
        ``LoweredProblem.safe_curvature``); backtracking shortens it when f would increase."""
        return 1.0 / lp.safe_curvature(lp.mean_curvature(x=x), x, g)

    def run(self, lp: LoweredProblem) -> Result:
        o = self.opts
        clock = Clock()
        if lp.set is None:  # nothing to threshold: one restricted solve over all coordinates
            r = lp.restricted_minimize(None, method=o["restricted"])
            return finish(lp, self, r.x, CONVERGED, 1, clock, f=r.f)
        s = lp.set
        debias = o["debias"]
        search = o["search"] and debias
        rule = self._rule(lp)
        x = initial_point(lp, o["init"])
        hist = self.history(lp, clock)
        st_prev = s.state(x)
        if debias:
            r = lp.restricted_minimize(st_prev, x0=x, method=o["restricted"])
            x = r.x
        f, g = lp.value_and_grad(x)
        f0 = f
        if not np.isfinite(f):
            hist.log(f)
            return finish(
                lp,
                self,
                x,
                DIVERGED,
                0,
                clock,
                hist,
                f=f,
                message=f"the objective is not finite at the starting point ({f})",
            )
        eta = self._first_step(lp, rule, x, g)
        hist.log(f, eta=eta)
        status, it, grow, searches = MAX_ITER, 0, 0, 0
        x_old = g_old = None
        message = ""
        retry = False  # a rejected step is retried with eta halved (not recomputed by the rule)
        while it < o["max_iter"]:
            it += 1
            if not retry:
                if rule == "local" and it > 1:
                    eta = self._curvature_step(lp, x, g)
                elif rule == "bb" and x_old is not None:
                    sx, sg = x - x_old, g - g_old
                    sy = float(sx @ sg)
                    eta = float(sx @ sx) / sy if sy > 0 else self._curvature_step(lp, x, g)
            retry = False
            xt = x - eta * g  # S1
            warm, st = lp.project(xt)  # S2: the projection, and F(t)
            same_support = s.same(st, st_prev)
            xn, fn, gn = self._s3(lp, x, f, g, warm, st, same_support)
            increased = not np.isfinite(fn) or fn > f + 1e-12 * max(1.0, abs(f))
            if increased and o["backtracking"]:
                eta /= 2.0
                if eta < 1e-14 * (1.0 / max(np.abs(g).max(), 1e-300)):
                    # every step size tried, down to a step that moves no coordinate, gave a higher f:
                    # x (the last accepted iterate, f never increased) is a fixed point of the method
                    status, message = CONVERGED, stalled_message(self.name, f0, f, fn, eta)
                    hist.log(f, eta=eta)
                    break
                it -= 1  # a rejected step is not an iteration
                retry = True
                continue
            if not np.isfinite(fn):
                x, f = xn, fn
                status, message = DIVERGED, divergence_message(self.name, f0, fn, eta, advice=_advice(lp))
                break
            increased = fn > f + 1e-12 * max(1.0, abs(f))
            grow = grow + 1 if increased else 0
            if search and same_support:  # the step did not move the support: search for one that does
                found = self._support_change(lp, x, g, f, eta, st_prev)
                if found is None:  # F(t) = F(t-1) and no larger step helps: x(t) = x(t-1) from now on
                    status = CONVERGED
                    hist.log(f, eta=eta)
                    break
                searches += 1
                xn, fn, gn, st = found
                same_support = False
            dx = float(np.linalg.norm(xn - x))
            nx = float(np.linalg.norm(x))
            x_old, g_old = x, g
            x, f, g, st_prev = xn, fn, gn, st
            hist.log(f, eta=eta)
            if grow >= 10 and f > f0:
                status, message = DIVERGED, divergence_message(self.name, f0, f, eta, advice=_advice(lp))
                break
            if debias and same_support:  # F(t) = F(t-1): x(t) = x(t-1) from now on
                status = CONVERGED
                break
            if dx <= o["tol"] * max(nx, 1e-300) or (nx == 0 and dx == 0):
                status = CONVERGED
                break
        return finish(
            lp,
            self,
            x,
            status,
            it,
            clock,
            hist,
            f=f,
            gamma=eta,
            message=message,
            extra={"eta": eta, "step_rule": rule, "support_searches": searches},
        )

    def _rule(self, lp: LoweredProblem) -> str:
        """The step rule: the option, ``auto`` this solver's default, ``local`` on a constant
        Hessian the same as ``htp`` (the step at the start is the step at every iterate)."""
        o = self.opts
        rule = o["eta"] if isinstance(o["eta"], str) else "fixed"
        if rule == "auto":
            rule = self.default_eta
        if rule == "local" and lp.design is not None and lp.design.quadratic:
            rule = "htp"
        return rule

    def _first_step(self, lp: LoweredProblem, rule: str, x: np.ndarray, g: np.ndarray) -> float:
        """eta at the start: the given number, the paper's 1/(2 M_2k), or the unit step at x."""
        if rule == "fixed":
            eta = float(self.opts["eta"])
            if eta <= 0:
                raise SolverError(f"eta must be positive; got {eta}")
            return eta
        if rule == "rss":
            return 1.0 / (2.0 * lp.safe_curvature(lp.smoothness(lp.power_budget(2 * lp.set.k), x=x), x, g))
        return self._curvature_step(lp, x, g)  # local, bb, htp: the unit step at the start

    def _s3(
        self,
        lp: LoweredProblem,
        x: np.ndarray,
        f: float,
        g: np.ndarray,
        warm: np.ndarray,
        st: Any,
        same_support: bool,
    ) -> tuple[np.ndarray, float, np.ndarray]:
        """Step S3 on F(t) (the projection ``warm`` and its state ``st``): (x, f, grad f)."""
        if self.opts["debias"] and same_support:
            # F(t) = F(t-1): x is already the minimizer on F(t) (S3 of the last iteration), so S3 would
            # return x again; a re-solve could differ from it only by the restricted solve's tolerance,
            # which must not count as an increase of f (it made the backtracking halve eta ~50 times
            # down to 1e-14 and end in a false 'diverged' on an ill-conditioned precision matrix whose
            # solves stopped 1e-9 short)
            return x, f, g
        if self.opts["debias"]:  # S3: debias on F(t), warm-started at the gradient step restricted to F(t)
            r = lp.restricted_minimize(st, x0=warm, method=self.opts["restricted"], grad=True)
            return r.x, r.f, r.g
        fn, gn = lp.value_and_grad(warm)  # S3': truncate
        return warm, fn, gn

    def _support_change(
        self, lp: LoweredProblem, x: np.ndarray, g: np.ndarray, f: float, eta: float, st_now: Any
    ) -> tuple[np.ndarray, float, np.ndarray, Any] | None:
        """The support-change line search: double eta until S2 selects a support other than the
        current one, debias on it, and return it when f decreases; up to SEARCH_TRIES supports."""
        s = lp.set
        tried: list[Any] = [st_now]
        e = eta
        for _ in range(60):
            e *= 2.0
            warm, st = lp.project(x - e * g)
            if any(s.same(st, t) for t in tried):
                continue
            tried.append(st)
            bar = f - 1e-12 * max(1.0, abs(f))
            r = lp.restricted_minimize(st, x0=warm, method=self.opts["restricted"], grad=True, give_up=bar)
            if np.isfinite(r.f) and r.f < bar:
                return r.x, r.f, r.g, st
            if len(tried) > SEARCH_TRIES:
                break
        return None


def stalled_message(solver: str, f_start: float, f_now: float, f_tried: float, eta: float) -> str:
    """What happened when backtracking found no step that lowers f: not a divergence (f only went down)."""
    return (
        f"{solver} stopped: the objective went down from {f_start:.6g} to {f_now:.6g}, and then no step size, "
        f"down to eta = {eta:.3g} (a step that moves no coordinate), gave a lower objective (the last one tried "
        f"ended at {f_tried:.6g}); the point returned is the last accepted iterate"
    )


def _advice(lp: LoweredProblem) -> str | None:
    """The divergence hint for this problem: rescaling the data is no advice for a precision matrix."""
    return divergence_advice(lp)


@register
class FGraHTP(GraHTP):
    name = "fgrahtp"
    summary = "Fast GraHTP: gradient step then truncation to the top k (nonlinear IHT)"
    reference = "paper 000, Algorithm 1 (FGraHTP)"
    handles = GraHTP.handles - {"eig_box"}  # truncation leaves the box: Algorithm 2 debiases (use grahtp)
    default_eta = "bb"
    options = {
        **GraHTP.options,
        "debias": Option(False, "S3 debiasing (GraHTP); false truncates instead (FGraHTP)", bool),
    }
