"""The log-determinant problems of sparse precision matrices (paper 000, Section 5.3 and App. D.2):
covsel (block coordinate descent, HTF Algorithm 17.1), the ADMM of Appendix D.2 with the
eigenvalue box, and a barrier Newton method where the box binds; proximal maps of supports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
from scipy.linalg.lapack import dposv, dpotrf, dpotri


@dataclass
class ADMMResult:
    Theta: np.ndarray  # the prox-side iterate: exactly sparse (support projection or soft thresholding)
    Omega: np.ndarray  # the box-side iterate: eigenvalues in [alpha, beta]
    Gamma: np.ndarray  # the multiplier (a warm start for the next solve)
    iterations: int  # eigen-decompositions
    converged: bool
    rho: float


def admm_logdet(
    S: np.ndarray,
    prox: Callable[[np.ndarray, float], np.ndarray],
    alpha: float = 0.0,
    beta: float = np.inf,
    rho: float = 1.0,
    Theta0: np.ndarray | None = None,
    Gamma0: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 5000,
    adaptive: bool = True,
) -> ADMMResult:
    """min -logdet(O) + <S, O> + h(Theta) s.t. O = Theta, alpha I <= O <= beta I, by the ADMM of
    paper 000, Appendix D.2 (splitting (31)):

    * (32) O = argmin_{alpha I <= O <= beta I} 1/2 ||O - M||_F^2 - (1/rho) logdet O with
      M = Theta - (S - Gamma)/rho: eigen-decompose M = V diag(lambda) V' and clip
      (lambda + sqrt(lambda^2 + 4/rho))/2 to [alpha, beta] (the paper's closed form);
    * (33) Theta = prox_{h/rho}(O - Gamma/rho): ``prox(Z, 1/rho)``; the support projection [.]_F of
      subproblem (13) (h the indicator of supp <= F), or soft thresholding of the off-diagonal for
      the graphical LASSO (h = lambda ||O^-||_1);
    * Gamma = Gamma - rho (O - Theta).

    Stops when the primal residual ||O - Theta||_F and the dual residual rho ||Theta - Theta_prev||_F
    are both at most tol * (1 + ||O||_F). ``adaptive`` balances the two residuals by rescaling rho
    (Boyd et al. 2011, Section 3.4.1: by 2 when one exceeds ten times the other; the multiplier is
    unaffected in this scaling); ``adaptive=False`` keeps the paper's fixed rho. Warm starts: the
    previous Theta and Gamma."""
    p = S.shape[0]
    Theta = np.eye(p) * max(alpha, 1.0) if Theta0 is None else Theta0.copy()
    Gamma = np.zeros((p, p)) if Gamma0 is None else Gamma0.copy()
    Omega = Theta
    converged = False
    it = 0
    while it < max_iter:
        it += 1
        M = Theta - (S - Gamma) / rho
        lam, V = np.linalg.eigh((M + M.T) / 2)
        lt = np.clip((lam + np.sqrt(lam * lam + 4.0 / rho)) / 2.0, alpha, beta)
        Omega = (V * lt) @ V.T
        Theta_prev = Theta
        Theta = prox(Omega - Gamma / rho, 1.0 / rho)
        Gamma = Gamma - rho * (Omega - Theta)
        r = float(np.linalg.norm(Omega - Theta))
        d = rho * float(np.linalg.norm(Theta - Theta_prev))
        scale = 1.0 + float(np.linalg.norm(Omega))
        if r <= tol * scale and d <= tol * scale:
            converged = True
            break
        if adaptive:
            if r > 10 * d:
                rho *= 2.0
            elif d > 10 * r:
                rho /= 2.0
    return ADMMResult(Theta, Omega, Gamma, it, converged, rho)


@dataclass
class CovselResult:
    Theta: np.ndarray  # exactly sparse on the support, symmetric
    W: np.ndarray  # the estimated covariance Theta^{-1} (equal to S on the support)
    sweeps: int
    converged: bool  # False also when a neighbourhood block of W was not positive definite


def covsel(
    S: np.ndarray, mask: np.ndarray, tol: float = 1e-8, max_sweeps: int = 100, W0: np.ndarray | None = None
) -> CovselResult:
    """The Gaussian maximum likelihood with a known graph, min -logdet(O) + <S, O> s.t. supp(O) in
    ``mask`` (diagonal included): subproblem (13) of paper 000 without its eigenvalue box, by the
    modified regression algorithm of Hastie, Tibshirani & Friedman (2009), Algorithm 17.1
    (Dempster's covariance selection; the dual: max logdet W s.t. W = S on the support).

    Start W = S, or the warm start ``W0`` (a previous solution's W, on another support) with the
    entries of this support set to S's, when that matrix is positive definite; sweep over the columns j: with N the neighbours of j, solve W_NN b = S_Nj (a
    Cholesky of a |N| x |N| block), set W_j = W_{:,N} b (mirrored) and W_jj = S_jj. Stops when a
    sweep moves no coefficient b by more than ``tol`` (the entries of W off every neighbourhood
    may converge much more slowly and do not enter Theta); then Theta_jj = 1 / (S_jj - W_Nj'b)
    and Theta_Nj = -b Theta_jj. A sweep costs sum_j (|N_j|^3 / 3 + p |N_j|) flops and no
    eigen-decomposition. Every block W_NN must be positive definite (it is when S is, or when
    each neighbourhood is smaller than the sample behind S); otherwise ``converged`` is False."""
    p = S.shape[0]
    eye = np.eye(p, dtype=bool)
    W = np.array(S, dtype=float, copy=True)
    if W0 is not None and W0.shape == S.shape:
        start = np.where(mask | eye, S, W0)
        if np.all(np.isfinite(start)) and dpotrf(start, lower=1)[1] == 0:  # positive definite
            W = start
    d = np.diag(S).copy()
    nbrs = [np.flatnonzero(mask[j] & ~eye[j]) for j in range(p)]
    B: list[np.ndarray] = [np.zeros(0)] * p
    rhs = [np.ascontiguousarray(S[nb, j]) for j, nb in enumerate(nbrs)]
    scale = tol  # on the regression coefficients b = -Theta_Nj / Theta_jj (scale-free)
    converged = False
    sweeps = 0
    prev = None
    while sweeps < max_sweeps:
        sweeps += 1
        for j in range(p):
            nb = nbrs[j]
            if nb.size == 0:
                continue
            rows = W.take(nb, 0)
            _, b, info = dposv(rows.take(nb, 1), rhs[j])
            if info != 0:
                return CovselResult(np.diag(1.0 / d), W, sweeps, False)
            B[j] = b
            new = b @ rows
            new[j] = d[j]
            W[:, j] = new
            W[j, :] = new
        if not np.all(np.isfinite(W)):
            return CovselResult(np.diag(1.0 / d), W, sweeps, False)
        coef = np.concatenate(B)
        if prev is not None and (coef.size == 0 or float(np.max(np.abs(coef - prev))) <= scale):
            converged = True
            break
        prev = coef
    Theta = np.zeros((p, p))
    for j in range(p):
        nb = nbrs[j]
        t = 1.0 / (d[j] - float(W[nb, j] @ B[j])) if nb.size else 1.0 / d[j]
        Theta[j, j] = t
        Theta[nb, j] = -B[j] * t
    return CovselResult((Theta + Theta.T) / 2, W, sweeps, converged and bool(np.all(np.diag(Theta) > 0)))


@dataclass
class BarrierResult:
    Theta: np.ndarray  # exactly sparse on the support, eigenvalues strictly inside (alpha, beta)
    iterations: int  # Newton steps (each: an m x m Cholesky and three p x p ones, no eigen-decomposition)
    converged: bool
    gap: float  # the barrier's bound on f(Theta) - min (13): mu * (number of logdet barriers) * p


def _pd_inverse(M: np.ndarray) -> tuple[float, np.ndarray] | None:
    """(logdet M, M^{-1}) by Cholesky, or None when M is not positive definite."""
    c, info = dpotrf(M, lower=1, clean=1)
    if info != 0:
        return None
    d = np.diag(c)
    if not np.all(d > 0):
        return None
    inv, info = dpotri(c, lower=1)
    if info != 0:
        return None
    inv = np.tril(inv) + np.tril(inv, -1).T
    return 2.0 * float(np.log(d).sum()), inv


def logdet_box_newton(
    S: np.ndarray,
    mask: np.ndarray,
    alpha: float = 0.0,
    beta: float = np.inf,
    Theta0: np.ndarray | None = None,
    tol: float = 1e-12,
    max_iter: int = 500,
    mu0: float = 1e-3,
    shrink: float = 10.0,
) -> BarrierResult:
    """Subproblem (13) of paper 000, min -logdet(O) + <S, O> s.t. supp(O) in ``mask`` and
    alpha I <= O <= beta I, by a primal barrier method with exact Newton steps on the m free
    entries of O (the diagonal and the upper triangle of the support): for mu decreasing by 10,
    minimize

        -logdet(O) + <S, O> - mu logdet(O - alpha I) - mu logdet(beta I - O)

    by damped Newton (Armijo backtracking that keeps both barriers finite). The gradient of the
    entry theta_ij (a pair (i, j), (j, i), or a diagonal entry) is w_ij G_ij with G = S - O^{-1} -
    mu (O - alpha I)^{-1} + mu (beta I - O)^{-1} (w = 2 off the diagonal, 1 on it), and the
    Hessian of -logdet at the entries (a, b) is the entry of A (x) A: (w_a w_b / 2)
    (A_{j_a i_b} A_{i_a j_b} + A_{j_a j_b} A_{i_a i_b}) with A = O^{-1}, and the same for each
    barrier with its own inverse. A bound (alpha <= 0, beta = inf) that is absent has no barrier.

    The answer is within mu * (p per barrier) of the minimum of (13) (the barrier's duality gap),
    and the iteration stops when that bound is below ``tol`` * (1 + |f|). Each Newton step costs
    one Cholesky factorization of an m x m matrix and three of p x p ones; no eigen-decomposition,
    so the cost does not depend on how ill-conditioned the box makes the problem (the ADMM of
    Appendix D.2, a first-order method, needs thousands of eigen-decompositions when the box
    binds on data whose covariance has condition number 1e5). ``Theta0``: a start (any matrix on
    the support, pulled into the box's interior toward a multiple of the identity)."""
    p = S.shape[0]
    I, J = np.nonzero(np.triu(mask | np.eye(p, dtype=bool)))
    w = np.where(I == J, 1.0, 2.0)
    ww = 0.5 * np.outer(w, w)
    bar = _Barrier(S, alpha, beta)
    nu = p * (int(bar.lower) + int(bar.upper))  # the barriers' parameter: the gap at mu is at most mu * nu
    O = bar.start(mask, Theta0)
    f0 = bar.parts(O, 0.0)
    scale = 1.0 + (abs(f0[0]) if f0 is not None else 1.0)
    mu = mu0 * scale / max(nu, 1)
    mu_final = tol * scale / max(nu, 1)
    if nu == 0:
        mu = mu_final = 0.0
    it = 0
    converged = False
    cur = bar.parts(O, mu)
    if cur is None:
        return BarrierResult(O, 0, False, np.inf)
    while it < max_iter:
        val, invs = cur
        d, dec = _barrier_newton_step(S, invs, I, J, w, ww)  # dec: the Newton decrement squared of phi_mu
        # phi_mu / mu = f / mu + barriers is self-concordant (f is, and 1 / mu >= 1), so its own decrement,
        # dec / mu, says how far from the centre of this mu the point is; rounding limits dec to ~1e-13 |phi|
        final = mu <= mu_final
        floor = 1e-13 * (1.0 + abs(val))
        if not np.isfinite(dec) or dec <= max(0.1 * mu, floor):
            if final:
                converged = bool(np.isfinite(dec))
                break
            mu = max(mu / shrink, mu_final)
            cur = bar.parts(O, mu)
            if cur is None:
                break
            continue
        it += 1
        D = np.zeros((p, p))
        D[I, J] = d
        D[J, I] = d
        step = 1.0
        while step > 1e-12:
            trial = bar.parts(O + step * D, mu)
            if trial is not None and trial[0] <= val - 0.25 * step * dec:
                break
            step /= 2.0
        else:  # no decrease along the Newton direction: rounding has the last word
            converged = final and dec <= max(mu, 1e3 * floor)
            break
        stalled = val - trial[0] <= 1e-15 * (1.0 + abs(val))  # a step that rounding cannot tell from none
        O = O + step * D
        cur = trial
        if stalled:
            converged = final and dec <= max(mu, 1e3 * floor)
            if not final:
                mu = max(mu / shrink, mu_final)
                cur = bar.parts(O, mu)
                if cur is not None:
                    continue
            break
    return BarrierResult((O + O.T) / 2, it, converged, mu * nu)


class _Barrier:
    """phi_mu(O) = -logdet(O) + <S, O> - mu logdet(O - alpha I) - mu logdet(beta I - O) of
    :func:`logdet_box_newton` (a bound that is absent, alpha <= 0 or beta = inf, has no barrier),
    and its strictly feasible start."""

    def __init__(self, S: np.ndarray, alpha: float, beta: float):
        self.S, self.alpha, self.beta = S, alpha, beta
        self.eye = np.eye(S.shape[0])
        self.lower, self.upper = alpha > 0, np.isfinite(beta)

    def start(self, mask: np.ndarray, Theta0: np.ndarray | None) -> np.ndarray:
        """O = t Theta0 + (1 - t) c I with the largest t in [0, 1] that keeps the eigenvalues a
        little inside [alpha, beta] (c I without a start)."""
        S, alpha, beta, lower, upper, eye = self.S, self.alpha, self.beta, self.lower, self.upper, self.eye
        p = S.shape[0]
        c = np.sqrt(alpha * beta) if lower and upper else (2.0 * alpha if lower else (beta / 2.0 if upper else 1.0))
        if not lower and not upper:
            c = 1.0 / max(float(np.mean(np.diag(S))), 1e-300)
        lo_t = alpha + 1e-3 * (c - alpha) if lower else 0.0
        hi_t = beta - 1e-3 * (beta - c) if upper else np.inf
        O = c * eye
        if Theta0 is not None and np.all(np.isfinite(Theta0)):
            T = np.where(mask | np.eye(p, dtype=bool), (Theta0 + Theta0.T) / 2, 0.0)
            lam = np.linalg.eigvalsh(T)
            t = 1.0
            if lam[0] < lo_t:
                t = min(t, (c - lo_t) / (c - lam[0]))
            if lam[-1] > hi_t:
                t = min(t, (hi_t - c) / (lam[-1] - c))
            if lam[0] <= 0 and not lower:
                t = min(t, 0.5 * c / (c - lam[0]))
            O = t * T + (1.0 - t) * c * eye
        return O

    def parts(self, M: np.ndarray, mu: float) -> tuple[float, list[tuple[float, np.ndarray]]] | None:
        """phi_mu(M) and the (weight, inverse) of each logdet term, or None outside the domain."""
        one = _pd_inverse(M)
        if one is None:
            return None
        val = -one[0] + float(np.sum(self.S * M))
        invs = [(1.0, one[1])]
        if self.lower:
            two = _pd_inverse(M - self.alpha * self.eye)
            if two is None:
                return None
            val -= mu * two[0]
            invs.append((mu, two[1]))
        if self.upper:
            three = _pd_inverse(self.beta * self.eye - M)
            if three is None:
                return None
            val -= mu * three[0]
            invs.append((-mu, three[1]))  # d/dM of -mu logdet(beta I - M) is +mu (beta I - M)^{-1}
        return val, invs


def _barrier_newton_step(
    S: np.ndarray,
    invs: list[tuple[float, np.ndarray]],
    I: np.ndarray,
    J: np.ndarray,
    w: np.ndarray,
    ww: np.ndarray,
) -> tuple[np.ndarray, float]:
    """The Newton step on the free entries (I, J) of phi_mu from its logdet terms' inverses, and
    the decrement squared: gradient w G[I, J] with G = S - sum weight A, Hessian sum |weight|
    (A (x) A) at the entries, by Cholesky (least squares when singular)."""
    G = S.copy()
    H = np.zeros((len(I), len(I)))
    for weight, A in invs:
        G -= weight * A
        H += abs(weight) * (A[np.ix_(J, I)] * A[np.ix_(I, J)] + A[np.ix_(J, J)] * A[np.ix_(I, I)])
    H *= ww
    g = w * G[I, J]
    try:
        cf = sla.cho_factor(H, lower=True, check_finite=False)
        d = -sla.cho_solve(cf, g, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        d = -np.linalg.lstsq(H, g, rcond=None)[0]
    return d, float(-g @ d)


def shift_into_box(O: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """O + c I with the smallest |c| that puts the eigenvalues of O into [alpha, beta] (c = 0 when
    they are; the support is unchanged when the diagonal is in it). An ADMM solution's sparse
    iterate is within its primal residual of the box; this makes it exactly feasible."""
    lam = np.linalg.eigvalsh(O)
    c = 0.0
    if lam[0] < alpha:
        c = alpha - lam[0]
    elif lam[-1] > beta:
        c = beta - lam[-1]
    if c == 0.0:
        return O
    out = O.copy()
    out[np.diag_indices_from(out)] += c
    return out


def support_prox(mask: np.ndarray) -> Callable[[np.ndarray, float], np.ndarray]:
    """[Z]_F: keep the entries in the support ``mask`` (symmetric, diagonal included), zero the rest."""
    return lambda Z, t: np.where(mask, (Z + Z.T) / 2, 0.0)


def soft_offdiag_prox(lam: float | np.ndarray) -> Callable[[np.ndarray, float], np.ndarray]:
    """Soft thresholding of the off-diagonal entries by t * lam (the diagonal is not penalized)."""

    def prox(Z: np.ndarray, t: float) -> np.ndarray:
        Z = (Z + Z.T) / 2
        out = np.sign(Z) * np.maximum(np.abs(Z) - t * lam, 0.0)
        np.fill_diagonal(out, np.diag(Z))
        return out

    return prox
