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

The same three steps run on any constraint set of :mod:`sparsemodel.compile.sets`: for
``rank(W) <= r``, S2 is the truncated SVD (the best rank-r approximation), F(t) is its singular
subspaces, S3 minimizes f over {U C} (the column space of the S2 point; see ``LowRank``), and the
stopping rule F(t) = F(t-1) compares column spaces.

Step size. ``eta='rss'`` is the paper's choice eta = 1/(2 M_2k) (Remark 6, Section 6.2.1), with
M_2k estimated by the truncated power method; Lemma 13 then guarantees that f decreases. Deviation
for accuracy (the default ``eta='auto'``): that step is so short that S2 rarely swaps coordinates
and GraHTP stops early at poor supports (on the Section 6.1 problem, n=250, it stalled in 3 of 10
trials at objectives 10-60 times the truth's), which the paper itself warns about below (3).
'auto' takes the unit step of HTP for normalized columns (Foucart 2011), eta = 1 / mean diag(H)
over the constrained coordinates (Hutchinson estimate), and keeps f monotone by backtracking:
an iteration that would increase f is rejected and eta halved (``backtracking=true``).
``backtracking=false`` runs the fixed-step iteration unchanged; it stops with status ``diverged``
if f becomes non-finite or grows persistently.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..compile.lowered import Clock, LoweredProblem
from ..errors import SolverError
from .base import (
    CONVERGED,
    DIVERGED,
    MAX_ITER,
    History,
    Option,
    Result,
    Solver,
    check_k,
    divergence_message,
    finish,
    initial_point,
    register,
    restricted_option,
)


@register
class GraHTP(Solver):
    name = "grahtp"
    handles = frozenset({"nnz", "nnz_groups", "nnz_pairs", "rank", "box"})
    summary = "Gradient Hard Thresholding Pursuit: gradient step, top-k, debias on the support"
    reference = "paper 000, Algorithm 1 (GraHTP)"
    default_debias = True
    options = {
        "eta": Option(
            "auto",
            "step size: a number; 'auto' = 1/mean diag(H) with backtracking (HTP's unit step); "
            "'rss' = the paper's 1/(2 M_2k), M_2k by truncated power iteration (rank 2r for rank constraints)",
            "float_or_auto",
        ),
        "max_iter": Option(500, "maximum number of iterations", int),
        "tol": Option(1e-6, "stop when ||x(t)-x(t-1)|| <= tol ||x(t-1)||", float),
        "debias": Option(True, "S3 debiasing (GraHTP); false truncates instead (FGraHTP)", bool),
        "backtracking": Option(
            True, "halve eta when an iteration would increase f (false: the paper's fixed step)", bool
        ),
        "init": Option("zeros", "starting point: 'zeros' or an array (Python API)", "any"),
        "restricted": restricted_option("step S3"),
    }

    def __init__(self, **opts: Any):
        if "debias" not in opts:
            opts["debias"] = self.default_debias
        super().__init__(**opts)

    def run(self, lp: LoweredProblem) -> Result:
        o = self.opts
        clock = Clock()
        if lp.set is None:  # nothing to threshold: one restricted solve over all coordinates
            r = lp.restricted_minimize(None, method=o["restricted"])
            return finish(lp, self, r.x, CONVERGED, 1, clock, f=r.f)
        check_k(lp, self.name)
        s = lp.set
        debias = o["debias"]
        x = initial_point(lp, o["init"])
        if o["eta"] in ("auto", "rss"):
            at = None if lp.design is not None else x  # general objectives: curvature at the start
            if o["eta"] == "auto":
                M = lp.mean_curvature(x=at)
            else:
                M = 2.0 * lp.smoothness(lp.power_budget(2 * s.k), x=at)
            if not np.isfinite(M) or M <= 0:
                raise SolverError(
                    f"could not estimate the curvature of the objective at the starting point (got {M})",
                    hint="give a step size eta=..., or a starting point inside the domain of the loss with init=...",
                )
            eta = 1.0 / M
        else:
            eta = float(o["eta"])
            if eta <= 0:
                raise SolverError(f"eta must be positive; got {eta}")
        hist = History(lp, clock)
        st_prev = s.state(x)
        if debias:
            r = lp.restricted_minimize(st_prev, x0=x, method=o["restricted"])
            x = r.x
        f, g = lp.value_and_grad(x)
        f0 = f
        hist.log(f, eta=eta)
        if not np.isfinite(f):
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
        status, it, grow = MAX_ITER, 0, 0
        message = ""
        while it < o["max_iter"]:
            it += 1
            xt = x - eta * g  # S1
            warm, st = s.project(xt)  # S2: the projection, and F(t)
            lp.oracle.thresholded()
            if debias:  # S3: debias on F(t), warm-started at the gradient step restricted to F(t)
                r = lp.restricted_minimize(st, x0=warm, method=o["restricted"], grad=True)
                xn, fn, gn = r.x, r.f, r.g
            else:  # S3': truncate
                xn = warm
                fn, gn = lp.value_and_grad(xn)
            increased = not np.isfinite(fn) or fn > f + 1e-12 * max(1.0, abs(f))
            if increased and o["backtracking"]:
                eta /= 2.0
                if eta < 1e-14 * (1.0 / max(np.abs(g).max(), 1e-300)):
                    status, message = DIVERGED, divergence_message(self.name, f0, fn, eta)
                    break
                it -= 1  # a rejected step is not an iteration
                continue
            if not np.isfinite(fn):
                x, f = xn, fn
                status, message = DIVERGED, divergence_message(self.name, f0, fn, eta)
                break
            grow = grow + 1 if increased else 0
            dx = float(np.linalg.norm(xn - x))
            nx = float(np.linalg.norm(x))
            same_support = s.same(st, st_prev)
            x, f, g, st_prev = xn, fn, gn, st
            hist.log(f, eta=eta)
            if grow >= 10 and f > f0:
                status, message = DIVERGED, divergence_message(self.name, f0, f, eta)
                break
            if debias and same_support:  # F(t) = F(t-1): x(t) = x(t-1) from now on
                status = CONVERGED
                break
            if dx <= o["tol"] * max(nx, 1e-300) or (nx == 0 and dx == 0):
                status = CONVERGED
                break
        return finish(lp, self, x, status, it, clock, hist, f=f, gamma=eta, message=message, extra={"eta": eta})


@register
class FGraHTP(GraHTP):
    name = "fgrahtp"
    summary = "Fast GraHTP: gradient step then truncation to the top k (nonlinear IHT)"
    reference = "paper 000, Algorithm 1 (FGraHTP)"
    default_debias = False
