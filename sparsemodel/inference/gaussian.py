"""Second-order (Gaussian) knockoffs: the S-matrix constructions and the two samplers.

A knockoff copy X~ of the n x p design X is exchangeable with it: swapping any column with its
knockoff leaves the joint law of [X, X~] unchanged (model-X, Candes, Fan, Janson and Lv 2018) or its
Gram matrix unchanged (fixed-X, Barber and Candes 2015). For second-order knockoffs both come down to
one diagonal matrix S = diag(s): the joint covariance is

    G = [[Sigma, Sigma - S], [Sigma - S, Sigma]],   which is PSD iff S >= 0 and 2 Sigma - S >= 0,

and the larger s_j, the less X~_j resembles X_j (the more power). The constructions choose s on the
correlation scale R = D^-1/2 Sigma D^-1/2 and scale it back:

* ``equi`` -- equicorrelated: s_j = min(1, 2 lambda_min(R)) (Barber and Candes 2015, eq. 2.4);
* ``sdp`` -- maximize sum_j s_j subject to 0 <= s_j <= 1, 2R - diag(s) >= 0 (Barber and Candes
  2015, eq. 2.5);
* ``mvr`` -- minimum variance-based reconstructability: minimize tr(G^-1) = sum_j 1/s_j +
  tr((2R - S)^-1) (Spector and Janson 2022, Section 3);
* ``maxent`` -- maximum entropy (minimum mutual information): maximize sum_j log s_j +
  log det(2R - S) (Gimenez and Zou 2019; Spector and Janson 2022, Section 4).

MVR, maxent and the SDP are solved here by exact coordinate descent (as Spector and Janson 2022
do: each coordinate's problem has a closed-form minimizer; the SDP through a log barrier). With M = 2R - S and M^-1 kept up to date
by Sherman-Morrison, changing s_j by delta changes M by -delta e_j e_j', so with
c_d = (M^-1)_jj and c_n = ||M^-1 e_j||^2:

* MVR: 1/(s_j + delta) + delta c_n / (1 - delta c_d) is convex on its domain; its minimizer is
  delta = (1 - sqrt(c_n) s_j) / (c_d + sqrt(c_n)), always inside the domain;
* maxent: log(s_j + delta) + log(1 - delta c_d) is concave; its maximizer gives
  s_j <- (s_j + 1 / c_d) / 2;
* SDP: -sum_j s_j - t log det(2R - S) over 0 <= s <= 1 gives s_j <- clip(s_j + 1/c_d - t, 0, 1)
  (s_j + 1/c_d is the largest s_j keeping 2R - S PSD); sweeps at each barrier weight t until no s_j
  moves by more than 1% of max(t, 0.01), then t shrinks by 0.7, down to 1e-7. Within 1e-4 of the
  conic solver's optimum (cvxpy, ``sdp_reference``) on the test matrices, at a fraction of its time.

M^-1 is recomputed from a Cholesky factorization at the start of every sweep (no drift), and the
sweeps stop when the objective improves by less than a relative 1e-7. Every construction ends with
the same feasibility step: s is scaled by the largest gamma <= 1 with 2R - gamma S >= tol I
(the generalized eigenvalue of (S, 2R - tol I)), so that the conditional covariance is well posed.

The constructions are ours (numpy and scipy); ``tests/inference`` checks them
against knockpy's where knockpy is installed, and docs/inference.md says why knockpy is not a
runtime dependency.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla

from .base import InferenceError

METHODS = ("mvr", "maxent", "sdp", "equi")
KINDS = ("model_x", "fixed_x")
SHRINKAGE = ("ledoit_wolf", "none")
TOL = 1e-5  # the smallest eigenvalue left in 2R - S (correlation scale)
SWEEPS = 100  # coordinate-descent sweeps at most (MVR, maxent)
SWEEP_RTOL = 1e-7  # stop when a sweep improves the objective by less than this (relative)
STEP_RTOL = 1e-6  # ... and moves no s_j by more than this (relative)
SDP_BARRIER_RATE = 0.7  # the SDP's log-barrier weight shrinks by this factor per sweep
SDP_BARRIER_END = 1e-7  # ... down to this
SDP_INNER = 20  # sweeps at one barrier weight at most (until no s_j moves by SDP_SETTLE x the weight)
SDP_SETTLE = 1e-2
SDP_FLOOR = 1e-2  # below this weight, s settles to 1e-5 (the answer is scaled to feasibility anyway)


def correlation(sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, sd): the correlation matrix of a covariance and its standard deviations."""
    sd = np.sqrt(np.diag(sigma))
    if not np.all(sd > 0):
        j = int(np.flatnonzero(~(sd > 0))[0])
        raise InferenceError(
            f"column {j} of the design is constant: a knockoff of it carries no information",
            hint="drop constant columns (or leave them free: nnz(w, free=[...]))",
        )
    R = sigma / np.outer(sd, sd)
    return (R + R.T) / 2, sd


def min_eig(M: np.ndarray) -> float:
    return float(sla.eigvalsh(M, subset_by_index=[0, 0])[0])


def _check_pd(R: np.ndarray) -> float:
    lam = min_eig(R)
    if not lam > TOL:
        raise InferenceError(
            f"the covariance of the design is singular (smallest eigenvalue of its correlation {lam:.3g}): "
            "no knockoff can differ from its variable",
            hint="drop collinear columns, or estimate the covariance with shrinkage (the default, ledoit_wolf)",
        )
    return lam


def feasible(R: np.ndarray, s: np.ndarray, tol: float = TOL) -> np.ndarray:
    """s scaled by the largest gamma <= 1 with 2R - gamma diag(s) >= tol I."""
    s = np.maximum(np.asarray(s, dtype=float), 0.0)
    if not np.any(s > 0):
        return s
    M = 2.0 * R - tol * np.eye(len(s))
    top = float(sla.eigh(np.diag(s), M, eigvals_only=True, subset_by_index=[len(s) - 1, len(s) - 1])[0])
    gamma = min(1.0, (1.0 - 1e-10) / top) if top > 0 else 1.0
    return s * gamma


def equicorrelated(R: np.ndarray) -> np.ndarray:
    """s_j = min(1, 2 lambda_min(R)) for every j."""
    lam = _check_pd(R)
    return np.full(len(R), min(1.0, 2.0 * lam))


def sdp_reference(R: np.ndarray) -> np.ndarray:
    """maximize sum(s) subject to 0 <= s <= 1, 2R - diag(s) >= 0, by cvxpy's conic solver: the
    reference the coordinate descent of ``method="sdp"`` is tested against (minutes above p ~ 150:
    the default conic solver's SDP is slow to converge on AR(1) correlations)."""
    import cvxpy as cp

    _check_pd(R)
    p = len(R)
    s = cp.Variable(p)
    Rc = cp.Constant((R + R.T) / 2)
    prob = cp.Problem(cp.Maximize(cp.sum(s)), [s >= 0, s <= 1, 2 * Rc - cp.diag(s) >> 0])
    try:
        prob.solve()
    except cp.error.SolverError as exc:  # pragma: no cover - depends on the installed solvers
        raise InferenceError(
            f"the SDP knockoff construction failed: {exc}", hint="use method='mvr' or 'equi'"
        ) from None
    if s.value is None:  # pragma: no cover - the problem is always feasible (s = 0)
        raise InferenceError(f"the SDP knockoff construction ended {prob.status}", hint="use method='mvr' or 'equi'")
    return np.clip(np.asarray(s.value, dtype=float), 0.0, 1.0)


def _inverse(M: np.ndarray) -> np.ndarray:
    c = sla.cho_factor(M, lower=False, check_finite=False)
    inv = sla.cho_solve(c, np.eye(len(M)), check_finite=False)
    return np.ascontiguousarray((inv + inv.T) / 2)


def _logdet(M: np.ndarray) -> float:
    c = sla.cholesky(M, lower=False, check_finite=False)
    return 2.0 * float(np.sum(np.log(np.diag(c))))


def coordinate_descent(R: np.ndarray, method: str, sweeps: int = SWEEPS, rtol: float = SWEEP_RTOL) -> np.ndarray:
    """MVR, maxent or the SDP by exact coordinate descent (the module docstring), from
    s = lambda_min(R) (the SDP from s = lambda_min(R) / 100, as its barrier path starts inside)."""
    from scipy.linalg.blas import dger

    lam = _check_pd(R)
    p = len(R)
    s = np.full(p, lam if method != "sdp" else lam / 100)
    barrier = min(2.0 * lam, 0.5)
    if method == "sdp":
        levels = int(np.ceil(np.log(SDP_BARRIER_END / barrier) / np.log(SDP_BARRIER_RATE))) + 1
        sweeps = levels * SDP_INNER

    def objective(Minv: np.ndarray) -> float:
        if method == "sdp":
            return -float(np.sum(s))
        if method == "mvr":
            return float(np.sum(1.0 / s) + np.trace(Minv))
        return -float(np.sum(np.log(s)) + _logdet(2.0 * R - np.diag(s)))

    Minv = _inverse(2.0 * R - np.diag(s))
    f = objective(Minv)
    inner = 0
    for _ in range(sweeps):
        before = s.copy()
        for j in range(p):
            col = Minv[:, j].copy()
            cd = col[j]
            if method == "sdp":
                delta = min(max(s[j] + 1.0 / cd - barrier, 0.0), 1.0) - s[j]
            elif method == "mvr":
                r = float(np.sqrt(col @ col))
                delta = (1.0 - r * s[j]) / (cd + r)
            else:
                delta = 0.5 * (1.0 / cd - s[j])
            if delta == 0.0:
                continue
            denom = 1.0 - delta * cd
            if not (denom > 0 and s[j] + delta > 0):  # pragma: no cover - rounding at the domain's edge
                continue
            dger(delta / denom, col, col, a=Minv.T, overwrite_a=True)  # M^-1 + delta/(1 - delta c_d) u u'
            s[j] += delta
        Minv = _inverse(2.0 * R - np.diag(s))
        if method == "sdp":  # the barrier's path: sweeps at each weight until s settles, then a smaller weight
            inner += 1
            if np.max(np.abs(s - before)) > SDP_SETTLE * max(barrier, SDP_FLOOR) and inner < SDP_INNER:
                continue
            inner = 0
            barrier *= SDP_BARRIER_RATE
            if barrier < SDP_BARRIER_END:
                break
            continue
        f_new = objective(Minv)  # stop when the objective and every s_j have settled
        done = f - f_new <= rtol * max(abs(f_new), 1.0) and np.max(np.abs(s - before) / s) <= STEP_RTOL
        f = f_new
        if done:
            break
    return s


def s_vector(sigma: np.ndarray, method: str = "mvr", tol: float = TOL) -> np.ndarray:
    """The diagonal of S for the covariance ``sigma`` (on its own scale), by ``method``."""
    if method not in METHODS:
        raise InferenceError(
            f"unknown knockoff construction {method!r}", hint=f"choose one of: {', '.join(METHODS)} (default mvr)"
        )
    R, sd = correlation(np.asarray(sigma, dtype=float))
    s = equicorrelated(R) if method == "equi" else coordinate_descent(R, method)
    return feasible(R, s, tol) * sd * sd


def mvr_loss(R: np.ndarray, s: np.ndarray) -> float:
    """tr(G^-1) of the correlation-scale construction (infinite when infeasible)."""
    try:
        return float(np.sum(1.0 / s) + np.trace(_inverse(2.0 * R - np.diag(s))))
    except (np.linalg.LinAlgError, ZeroDivisionError):
        return np.inf


def maxent_loss(R: np.ndarray, s: np.ndarray) -> float:
    """-(sum log s + log det(2R - S)) (infinite when infeasible)."""
    try:
        return -float(np.sum(np.log(s)) + _logdet(2.0 * R - np.diag(s)))
    except (np.linalg.LinAlgError, FloatingPointError):
        return np.inf


# ====================================================================== the covariance


def ledoit_wolf(X: np.ndarray) -> tuple[np.ndarray, float]:
    """(covariance, shrinkage): the Ledoit-Wolf (2004) estimate, the sample covariance (divided by
    n) shrunk towards mu I by the optimal weight min(b^2, d^2) / d^2, with mu = tr(S) / p,
    d^2 = ||S - mu I||_F^2 / p and b^2 = (sum_i ||x_i||^4 - n ||S||_F^2) / (n^2 p)."""
    Xc = X - X.mean(axis=0)
    n, p = Xc.shape
    S = Xc.T @ Xc / n
    mu = float(np.trace(S)) / p
    d2 = float(np.sum((S - mu * np.eye(p)) ** 2)) / p
    b2 = (float(np.sum(np.sum(Xc * Xc, axis=1) ** 2)) - n * float(np.sum(S * S))) / (n * n * p)
    shrink = 0.0 if d2 == 0 else min(b2, d2) / d2
    return (1 - shrink) * S + shrink * mu * np.eye(p), shrink


def estimate(X: np.ndarray, shrinkage: str = "ledoit_wolf") -> tuple[np.ndarray, np.ndarray]:
    """(mu, Sigma) of the rows of X: the column means and a covariance (``ledoit_wolf`` or
    ``none``, the sample covariance)."""
    if shrinkage not in SHRINKAGE:
        raise InferenceError(f"unknown shrinkage {shrinkage!r}", hint=f"choose one of: {', '.join(SHRINKAGE)}")
    mu = X.mean(axis=0)
    if shrinkage == "ledoit_wolf":
        return mu, ledoit_wolf(X)[0]
    Xc = X - mu
    return mu, Xc.T @ Xc / len(X)


# ====================================================================== samplers


def _sqrt_psd(V: np.ndarray) -> np.ndarray:
    """L with L L' = V for a symmetric PSD V (eigenvalues below 0 by rounding set to 0)."""
    lam, U = np.linalg.eigh((V + V.T) / 2)
    return U * np.sqrt(np.maximum(lam, 0.0))


def model_x(X: np.ndarray, mu: np.ndarray, sigma: np.ndarray, s: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Gaussian model-X knockoffs (Candes et al. 2018, Section 3.1): X~ | X ~ N(X - (X - mu) Sigma^-1 S,
    2S - S Sigma^-1 S), one row at a time."""
    return Sampler.model_x(X, mu, sigma, s).draw(rng)


def fixed_x(X: np.ndarray, method: str, rng: np.random.Generator, tol: float = TOL) -> tuple[np.ndarray, np.ndarray]:
    """Fixed-X knockoffs of X and their s (on X's scale); see :meth:`Sampler.fixed_x`."""
    smp = Sampler.fixed_x(X, method, tol)
    return smp.draw(rng), smp.s


class Sampler:
    """Knockoff copies of one design: the construction is computed once (:meth:`model_x`,
    :meth:`fixed_x`), each :meth:`draw` costs one n x p random matrix and a product."""

    def __init__(self, form: str, X: np.ndarray, s: np.ndarray, parts: dict[str, Any]):
        self.form, self.X, self.s, self.parts = form, X, s, parts  # form: model_x or fixed_x

    @classmethod
    def model_x(cls, X: np.ndarray, mu: np.ndarray, sigma: np.ndarray, s: np.ndarray) -> Sampler:
        """Gaussian model-X (Candes et al. 2018, Section 3.1): X~ | X ~ N(X - (X - mu) Sigma^-1 S,
        2S - S Sigma^-1 S), one row at a time; ``s`` on Sigma's scale."""
        S = np.diag(s)
        A = sla.cho_solve(sla.cho_factor(sigma, check_finite=False), S, check_finite=False)  # Sigma^-1 S
        return cls("model_x", X, s, {"mean": X - (X - mu) @ A, "L": _sqrt_psd(2.0 * S - S @ A)})

    @classmethod
    def fixed_x(cls, X: np.ndarray, method: str, tol: float = TOL) -> Sampler:
        """Fixed-X (Barber and Candes 2015, Section 2.1): on the centred columns scaled to unit
        norm, X~ = X (I - Sigma^-1 S) + U~ C, U~ an n x p orthonormal basis orthogonal to the ones
        vector and to X, C'C = 2S - S Sigma^-1 S; then the scale and the column means are put back,
        so that [X X~] has the knockoff Gram structure with or without an intercept in the model.
        Needs n >= 2p + 1."""
        n, p = X.shape
        if n < 2 * p + 1:
            raise InferenceError(
                f"fixed-X knockoffs need n >= 2p + 1 samples (kept orthogonal to the intercept); here n = {n}, p = {p}",
                hint="use model-X knockoffs (the default), which need no such size",
            )
        mean = X.mean(axis=0)
        Xc = X - mean
        norms = np.linalg.norm(Xc, axis=0)
        if not np.all(norms > 0):
            j = int(np.flatnonzero(~(norms > 0))[0])
            raise InferenceError(f"column {j} of the design is constant: a knockoff of it carries no information")
        Xn = Xc / norms
        sigma = Xn.T @ Xn
        s = s_vector(sigma, method, tol)
        A = sla.cho_solve(sla.cho_factor(sigma, check_finite=False), np.diag(s), check_finite=False)
        C = _sqrt_psd(2.0 * np.diag(s) - np.diag(s) @ A).T  # C'C = 2S - S Sigma^-1 S
        parts = {"Xn": Xn, "base": Xn @ (np.eye(p) - A), "C": C, "norms": norms, "mean": mean}
        return cls("fixed_x", X, s * norms * norms, parts)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One knockoff copy."""
        P = self.parts
        if self.form == "model_x":
            return P["mean"] + rng.standard_normal(self.X.shape) @ P["L"].T
        n, p = self.X.shape
        Q, _ = np.linalg.qr(np.column_stack([np.ones(n), P["Xn"], rng.standard_normal((n, p))]))
        U = Q[:, p + 1 : 2 * p + 1]
        return (P["base"] + U @ P["C"]) * P["norms"] + P["mean"]


def sampler(
    X: np.ndarray,
    kind: str = "model_x",
    method: str = "mvr",
    mu: Any = None,
    sigma: Any = None,
    shrinkage: str = "ledoit_wolf",
) -> Sampler:
    """The knockoff sampler of X: ``kind`` = ``model_x`` (Gaussian, with ``mu``/``sigma`` given or
    estimated from X's rows) or ``fixed_x``; ``method`` the S-matrix construction."""
    if kind not in KINDS:
        raise InferenceError(f"unknown kind of knockoffs {kind!r}", hint=f"choose one of: {', '.join(KINDS)}")
    if kind == "fixed_x":
        if mu is not None or sigma is not None:
            raise InferenceError("fixed-X knockoffs use the design itself; mu= and sigma= are for model-X knockoffs")
        return Sampler.fixed_x(X, method)
    p = X.shape[1]
    flat = np.flatnonzero(np.ptp(X, axis=0) == 0)
    if len(flat):
        raise InferenceError(
            f"column {int(flat[0])} of the design is constant: a knockoff of it carries no information",
            hint="drop constant columns (or leave them free: nnz(w, free=[...]))",
        )
    if mu is None or sigma is None:
        mu_e, sigma_e = estimate(X, shrinkage)
        mu = mu_e if mu is None else mu
        sigma = sigma_e if sigma is None else sigma
    mu = np.broadcast_to(np.asarray(mu, dtype=float), (p,)).copy()
    sigma = np.asarray(sigma, dtype=float)
    if sigma.shape != (p, p) or not np.allclose(sigma, sigma.T, rtol=1e-10, atol=1e-12):
        raise InferenceError(
            f"sigma= must be a symmetric {p} x {p} covariance of the design's columns; got shape {sigma.shape}"
        )
    return Sampler.model_x(X, mu, sigma, s_vector(sigma, method))


__all__ = [
    "METHODS",
    "SHRINKAGE",
    "coordinate_descent",
    "correlation",
    "equicorrelated",
    "estimate",
    "feasible",
    "KINDS",
    "Sampler",
    "fixed_x",
    "ledoit_wolf",
    "maxent_loss",
    "model_x",
    "mvr_loss",
    "s_vector",
    "sampler",
    "sdp_reference",
]
