"""Stochastic hard thresholding: paper 002 (Zhou, Yuan, Feng, "Efficient Stochastic Gradient Hard
Thresholding", NeurIPS 2018), Algorithm 1, and the baselines it is compared with.

The objective is a finite sum f(x) = (1/n) sum_i f_i(x) (the design's sample axis: one sample per
row of the data; terms without a sample axis, such as the ridge, are exact in every mini-batch),
constrained by ``nnz(x) <= k`` (Phi_k keeps the k largest entries) or ``rank(X) <= k`` (Phi_k is
the truncated SVD). Each iteration t draws S_t, s_t samples uniformly without replacement, forms
g_t = (1/s_t) sum_{i in S_t} grad f_i(x_t) (``lp.oracle.grad_batch``: it touches only those rows
and counts s_t IFO, Definition 1), then

* ``hsg_ht`` -- option O1:  x_{t+1} = Phi_k(x_t - eta g_t);
* ``ahsg_ht`` -- option O2: x_{t+1} = Phi_k(x_t - eta g_t + nu (x_t - x_{t-1})), x_{-1} = x_0 (the
  printed loop starts at t = 1 with only x_0 given; see the digest);

with mini-batch sizes s_t = ceil(tau * omega^t), omega > 1 (the paper prints "s_t = tau omega t"
and describes an exponential growth at rate 1/omega with omega = 1 - 1/(480 kappa_s) < 1; we
expose the growth factor omega > 1 directly). Once s_t >= n the iteration is full-gradient
(accelerated) FG-HT, as Section 5 says, and the history marks it (``full``). One hard thresholding
(one call of Phi_k) per iteration.

Baselines of Section 5:

* ``sg_ht`` (Nguyen, Needell & Woolf 2017): x <- Phi_k(x - eta grad f_B(x)), a mini-batch B of
  ``batch`` samples (default 1) per step;
* ``svrg_ht`` (Li et al. 2016; Shen & Li 2017): per epoch a snapshot x~ and mu = grad f(x~) (n IFO),
  then ``inner`` steps (default n / batch) x <- Phi_k(x - eta (grad f_B(x) - grad f_B(x~) + mu)),
  2 |B| IFO each;
* FG-HT is ``iht`` (x <- Phi_k(x - eta grad f(x))); all five use the same step rule.

Step size (``eta``). Two constants come from the design: L, the restricted smoothness of f over
2k units (the truncated power method, the rule of ``iht``), and l_s, the restricted smoothness of
every f_i (Assumption 2; ``Design.sample_smoothness``: n c w_i times the sum of the 2k largest
squared entries of row i, maximized over i, c the bound on phi''). A single sample's gradient is
far less smooth than their average (l_s / L was 10-100 on our data): FG-HT's 1/L makes the
stochastic methods diverge, and the theory's fixed 1/(6 l_s) (Theorem 1, ``eta="paper"``) makes
the large mini-batches of HSG-HT crawl. Deviation (the default ``eta="auto"``): each step uses
1/(L + l_s/s) for its mini-batch of s samples, a bound on the restricted smoothness of the average
of s functions f_i: 1/l_s for single samples (SG-HT, SVRG-HT's inner steps), 1/L for a full
gradient, so every method, FG-HT included, follows one rule. A number is used as given. ``ahsg_ht`` with ``nu="theorem3"`` takes Theorem 3's heavy-ball
constants, eta = 4 / (sqrt(l_s) + sqrt(rho))^2 and nu = ((sqrt(kappa) - 1) / (sqrt(kappa) + 1))^2,
kappa = l_s / rho (l_s: Assumption 2's per-sample constant, which Theorem 3 uses), with rho the
restricted strong convexity estimated by the truncated power method on l_s I - H (a number for ``nu`` is used as given).

Stopping: ``epochs`` (an IFO budget of epochs * n), ``max_iter`` iterations, or, once the gradient
is full, ||x_{t+1} - x_t|| <= tol ||x_t|| (status converged). The objective is logged (uncounted)
whenever another n / ``log_per_epoch`` IFO have been spent, and at the end. A step that makes f
non-finite or grows it a hundredfold ends the run with status ``diverged`` and a hint.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import SolverError
from ..lowering.lowered import LoweredProblem
from ..util import Clock
from .base import REGISTRY, Solver, initial_point, register
from .options import Option
from .result import CONVERGED, DIVERGED, MAX_ITER, Result, finish


class NumberOr:
    """An option type: a number, or one of the given words (``eta='paper'``, ``nu='theorem3'``)."""

    def __init__(self, *words: str):
        self.words = words

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str) and value in self.words:
            return value
        return float(value)

    def __str__(self) -> str:
        return "number (or " + "/".join(f"'{w}'" for w in self.words) + ")"


COMMON = {
    "eta": Option(
        "auto",
        "step size: a number; 'auto' = 1/(L + l_s/s) for a mini-batch of s samples (L: restricted smoothness of f, "
        "as iht; l_s: of every f_i); 'paper' = Theorem 1's fixed 1/(6 l_s)",
        NumberOr("auto", "paper"),
        low=0,
        open_low=True,
    ),
    "epochs": Option(50.0, "IFO budget in passes over the data (epochs * n samples)", float, low=0, open_low=True),
    "max_iter": Option(10**7, "maximum number of iterations (hard thresholdings)", int, low=1),
    "tol": Option(1e-8, "with full gradients: stop when ||x(t+1)-x(t)|| <= tol ||x(t)||", float, low=0),
    "seed": Option(0, "seed of the sampling (none: not reproducible)", "int_or_none", low=0),
    "log_per_epoch": Option(50, "objective values logged per pass over the data", int, low=1),
    "init": Option("zeros", "starting point: 'zeros' or an array (Python API)", "any"),
}


def deterministic_alternatives(lp: LoweredProblem) -> list[str]:
    """The l0 solvers that run on this problem (the stochastic ones do not: it is no finite sum)."""
    return [
        n
        for n, c in REGISTRY.items()
        if not issubclass(c, _Stochastic) and not c.convex_relaxation and c.takes(lp.kinds, lp)
    ]


def sample(rng: np.random.Generator, n: int, s: int) -> np.ndarray:
    """s distinct indices of range(n), uniformly: Floyd's algorithm when s is small (O(s), no
    length-n temporary), a partial permutation otherwise."""
    if s >= n:
        return np.arange(n)
    if 16 * s > n:
        return np.sort(rng.permutation(n)[:s])
    chosen: set[int] = set()
    for j in range(n - s, n):
        t = int(rng.integers(0, j + 1))
        chosen.add(t if t not in chosen else j)
    return np.sort(np.fromiter(chosen, dtype=np.int64, count=s))


class _Stochastic(Solver):
    """What the four share: the finite-sum check, the step, projection, logging and stopping."""

    handles = frozenset({"nnz", "nnz_groups", "nnz_pairs", "rank"})
    protocol = True  # the projection and the restricted smoothness of any set
    needs = "a finite sum f = (1/n) sum_i f_i over the rows of the data"
    stochastic = True

    @classmethod
    def unfit(cls, lp: LoweredProblem) -> SolverError | None:
        d = lp.design
        if d is None or not d.finite_sum:
            what = "has no composite form" if d is None else d.finite_sum_reason()
            return SolverError(
                f"{cls.name} needs a finite sum f = (1/n) sum_i f_i over the rows of the data; this objective {what}",
                hint="deterministic solvers that apply: " + ", ".join(deterministic_alternatives(lp)),
            )
        return None

    def setup(self, lp: LoweredProblem) -> tuple[np.ndarray, float, float, int]:
        d = lp.design
        x = initial_point(lp, self.opts["init"])
        s = lp.set
        top = s.sparse_directions(2 * s.k) if s is not None else None
        L = lp.restricted_smoothness(2 * s.k) if s is not None else lp.smoothness(None)
        L = lp.safe_curvature(L, x)  # ~0 on a flat loss is rounding, not a verdict
        ls = d.sample_smoothness(top)
        if ls is None or not np.isfinite(ls):  # no per-sample bound for this loss: the batch noise is not modeled
            ls = L
        self.L, self.ls = L, max(ls, L)
        eta_opt = self.opts["eta"]
        if eta_opt == "auto":
            self.step_rule = "1/(L + l_s/s): the smoothness of a mini-batch average of s samples"
            eta = self.step_for(1)
        elif eta_opt == "paper":
            self.step_rule = "1/(6 l_s): paper 002, Theorem 1"
            eta = 1.0 / (6.0 * self.ls)
        else:
            eta = float(eta_opt)
            self.step_rule = "given"
        return x, eta, self.ls, d.n_samples

    def step_for(self, s: int) -> float:
        """The step for a mini-batch of s samples: fixed unless eta='auto', then 1/(L + l_s/s)
        (the restricted smoothness of the average of s functions f_i is at most L + l_s/s; a
        single sample gets 1/l_s, the full gradient FG-HT's 1/L)."""
        if self.opts["eta"] != "auto":
            return self.eta_fixed
        return 1.0 / (self.L + self.ls / max(s, 1))

    def project(self, lp: LoweredProblem, z: np.ndarray, state: Any) -> tuple[np.ndarray, Any]:
        if lp.set is None:
            lp.oracle.thresholded()
            return z, None
        return lp.project(z, warm=state)

    def run(self, lp: LoweredProblem) -> Result:
        o = self.opts
        clock = Clock()
        x, eta, L, n = self.setup(lp)
        self.eta_fixed = eta
        hist = self.history(lp, clock)
        f0 = lp.oracle.peek(x)
        hist.log(f0, batch=0, full=0, epoch=0.0)
        rng = np.random.default_rng(o["seed"])
        budget = o["epochs"] * n
        every = max(1, n // o["log_per_epoch"])
        state: dict[str, Any] = {"eta": eta, "L": L, "x_prev": x.copy(), "proj": None}
        self.prepare(lp, state, x)
        status, message, it = MAX_ITER, "", 0
        next_log = every
        while it < o["max_iter"] and lp.oracle.ifo < budget:
            it += 1
            xn, batch, full = self.step(lp, x, state, rng, it, n)
            dx = float(np.linalg.norm(xn - x))
            nx = float(np.linalg.norm(x))
            state["x_prev"], x = x, xn
            if lp.oracle.ifo >= next_log or full:
                with clock.paused():  # the history's objective is not the algorithm's work
                    f = lp.oracle.peek(x)
                hist.log(f, batch=batch, full=int(full), epoch=lp.oracle.ifo / n)
                next_log = lp.oracle.ifo + every
                if not np.isfinite(f) or f > 100.0 * abs(f0) + 1e3:
                    status = DIVERGED
                    message = (
                        f"{self.name} diverged: the objective went from {f0:.6g} to {f:.6g} with eta={state['eta']:.3g}; "
                        f"give a smaller eta (for example eta={state['eta'] / 10:.3g}) or leave eta='auto'"
                    )
                    break
            if full and dx <= o["tol"] * max(nx, 1e-300):
                status = CONVERGED
                break
        if status == MAX_ITER:
            message = (
                f"stopped at the budget of {o['epochs']:g} passes over the data"
                if lp.oracle.ifo >= budget
                else f"stopped after max_iter={o['max_iter']} iterations"
            )
        f = lp.oracle.peek(x)
        if status != DIVERGED and hist.rows["ifo"][-1] < lp.oracle.ifo:
            hist.log(f, batch=0, full=0, epoch=lp.oracle.ifo / n)
        extra = {
            "eta": state["eta"],
            "L": self.L,
            "l_s": self.ls,
            "step_rule": self.step_rule,
            "epochs": lp.oracle.ifo / n,
            **self.summary_extra(state),
        }
        return finish(lp, self, x, status, it, clock, hist, f=f, message=message, extra=extra)

    # hooks
    def prepare(self, lp: LoweredProblem, state: dict[str, Any], x: np.ndarray) -> None:
        pass

    def step(
        self, lp: LoweredProblem, x: np.ndarray, state: dict[str, Any], rng: Any, t: int, n: int
    ) -> tuple[np.ndarray, int, bool]:
        raise NotImplementedError

    def summary_extra(self, state: dict[str, Any]) -> dict[str, Any]:
        return {}


@register
class HSGHT(_Stochastic):
    name = "hsg_ht"
    summary = "Hybrid stochastic gradient HT: mini-batches growing as tau * omega^t, then full gradients"
    reference = "paper 002, Algorithm 1, option O1 (Theorems 1-2)"
    options = {
        **COMMON,
        "tau": Option(1.0, "initial mini-batch size (s_t = ceil(tau * omega^t))", float, low=0, open_low=True),
        "omega": Option(
            1.05,
            "growth factor of the mini-batch size per iteration (> 1; a fixed batch size is sg_ht)",
            float,
            low=1,
            open_low=True,
        ),
    }
    momentum = False

    def prepare(self, lp: LoweredProblem, state: dict[str, Any], x: np.ndarray) -> None:
        state["nu"] = 0.0

    def step(self, lp, x, state, rng, t, n):
        o = self.opts
        s_t = int(math.ceil(o["tau"] * o["omega"] ** (t - 1)))
        full = s_t >= n
        g = lp.oracle.grad(x) if full else lp.oracle.grad_batch(x, sample(rng, n, s_t))
        if "fixed_eta" not in state:
            state["eta"] = self.step_for(min(s_t, n))
        z = x - state["eta"] * g
        if state["nu"]:
            z += state["nu"] * (x - state["x_prev"])
        xn, state["proj"] = self.project(lp, z, state["proj"])
        return xn, min(s_t, n), full

    def summary_extra(self, state):
        return {"nu": state["nu"], "tau": self.opts["tau"], "omega": self.opts["omega"]}


@register
class AHSGHT(HSGHT):
    name = "ahsg_ht"
    summary = "Accelerated HSG-HT: heavy-ball momentum nu (x_t - x_{t-1}) before the hard thresholding"
    reference = "paper 002, Algorithm 1, option O2 (Theorem 3)"
    options = {
        **HSGHT.options,
        "nu": Option(
            0.3,
            "momentum strength in [0, 1), or 'theorem3' = ((sqrt(kappa)-1)/(sqrt(kappa)+1))^2 with Theorem 3's step",
            NumberOr("theorem3"),
            low=0,
            high=1,
            open_high=True,
        ),
    }

    def prepare(self, lp: LoweredProblem, state: dict[str, Any], x: np.ndarray) -> None:
        nu = self.opts["nu"]
        if isinstance(nu, str):
            if nu != "theorem3":
                raise SolverError(
                    f"ahsg_ht: nu={nu!r} is not a number or 'theorem3'", hint="nu in [0, 1), or nu='theorem3'"
                )
            L = state["L"]  # l_s: Theorem 3's l is the per-sample RSS constant of Assumption 2
            rho = restricted_convexity(lp, L)
            kappa = L / rho
            state["kappa"] = kappa
            state["nu"] = ((math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1)) ** 2
            state["eta"] = 4.0 / (math.sqrt(L) + math.sqrt(rho)) ** 2
            state["fixed_eta"] = True
            state["rho"] = rho
        else:
            if not 0 <= nu < 1:
                raise SolverError(f"ahsg_ht: nu={nu} must be in [0, 1)", hint="the heavy-ball momentum is a fraction")
            state["nu"] = float(nu)

    def summary_extra(self, state):
        out = super().summary_extra(state)
        if "rho" in state:
            out["rho"] = state["rho"]
            out["kappa"] = state["kappa"]
        return out


def restricted_convexity(lp: LoweredProblem, L: float) -> float:
    """rho_s: the smallest eigenvalue of the Hessian (bound) over 2k-unit directions, estimated as
    L - lambda_max(L I - H) by the truncated power method (the kernel of lp.smoothness), floored
    at 1e-6 L (a problem without restricted strong convexity gets a large kappa)."""
    from ..numerics.smooth import power_method

    hv = lp.hessian_operator()
    trunc = lp.truncation(lp.power_budget(2 * lp.set.k) if lp.set is not None else None)
    rng = np.random.default_rng(0)
    top = power_method(lambda v: L * v - hv(v), trunc, [np.ones(lp.n), rng.standard_normal(lp.n)])
    return max(L - top, 1e-6 * L)


@register
class SGHT(_Stochastic):
    name = "sg_ht"
    summary = "Stochastic gradient HT: x <- Phi_k(x - eta grad f_B(x)) with a fixed mini-batch B"
    reference = "Nguyen, Needell & Woolf (2017); baseline of paper 002, Section 5"
    options = {**COMMON, "batch": Option(1, "mini-batch size |B|", int, low=1)}

    def step(self, lp, x, state, rng, t, n):
        b = min(self.opts["batch"], n)
        g = lp.oracle.grad_batch(x, sample(rng, n, b)) if b < n else lp.oracle.grad(x)
        state["eta"] = self.step_for(b)
        xn, state["proj"] = self.project(lp, x - state["eta"] * g, state["proj"])
        return xn, b, b >= n


@register
class SVRGHT(_Stochastic):
    name = "svrg_ht"
    summary = "Stochastic variance-reduced gradient HT: a full-gradient snapshot per epoch, corrected steps"
    reference = "Li et al. (2016), Shen & Li (2017); baseline of paper 002, Section 5"
    options = {
        **COMMON,
        "batch": Option(1, "mini-batch size |B| of the inner steps", int, low=1),
        "inner": Option(None, "inner steps per snapshot (none: n / batch)", "int_or_none", low=1),
    }

    def prepare(self, lp, state, x):
        state["left"] = 0

    def step(self, lp, x, state, rng, t, n):
        b = min(self.opts["batch"], n)
        if state["left"] <= 0:  # a new snapshot: x~ = x, mu = grad f(x~) (n IFO)
            state["snap"] = x.copy()
            state["mu"] = lp.oracle.grad(x)
            state["left"] = self.opts["inner"] or max(1, n // b)
        rows = sample(rng, n, b)
        g = lp.oracle.grad_batch(x, rows) - lp.oracle.grad_batch(state["snap"], rows) + state["mu"]
        state["eta"] = self.step_for(b)
        state["left"] -= 1
        xn, state["proj"] = self.project(lp, x - state["eta"] * g, state["proj"])
        return xn, b, False


__all__ = ["HSGHT", "AHSGHT", "SGHT", "SVRGHT", "sample", "restricted_convexity"]
