"""Restricted solves of a sparse precision matrix: subproblem (13) of paper 000 (the Gaussian
log-likelihood on a support, with the eigenvalue box), by covsel, a barrier Newton method or the
ADMM of Appendix D.2, and the final polish of a returned matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SolverError, UnboundedError
from ..numerics.logdet import admm_logdet, covsel, logdet_box_newton, shift_into_box, support_prox
from .backend import Request, Solved
from .data import LoweredData

BOX_NEWTON_MIN, BOX_NEWTON_RATIO = 300, 6  # (13) by barrier Newton for supports of at most max(300, 6 p) entries


def precision_solve(lp: LoweredData, sub: Any, req: Request) -> Solved:
    """Subproblem (13) of paper 000: min c (-logdet(O) + <S, O>) over alpha I <= O <= beta I
    (the eigenvalue box, when the problem has one) with supp(O) within the support of ``sub.cols``.

    ``admm``: the paper's method, the ADMM of Appendix D.2 (:func:`admm_logdet`),
    warm-started from ``x0`` restricted to the support and from the previous solve's multiplier
    and rho; options ``admm_tol`` / ``admm_rho`` / ``admm_max_iter`` / ``admm_adaptive`` of
    ``lp.subproblem`` (the argument of ``fresh``). The exactly sparse iterate Theta is returned, its eigenvalues moved
    into the box by a diagonal shift of at most the ADMM's primal residual (a deviation for
    exact feasibility: the diagonal is always in the support).

    ``covsel`` (the default, a deviation for speed: 10-70 times fewer flops at p = 200): (13)
    without the box by :func:`covsel` (Hastie, Tibshirani & Friedman 2009, Algorithm
    17.1; no eigen-decomposition per iteration), warm-started from the previous solve's W. When
    its solution has its eigenvalues in [alpha, beta] it solves (13) (a convex problem whose box
    constraint is inactive); when not, the barrier Newton method finishes the solve from covsel's
    answer on supports of at most max(300, 6 p) entries (:func:`box_newton_fits`), and the ADMM
    on larger ones, or when covsel fails or needs more than ``covsel_max_sweeps`` sweeps (started
    from covsel's iterate and multiplier S - W off the support).

    ``newton`` (a deviation for accuracy where the box binds): the primal barrier method of
    :func:`logdet_box_newton` (exact Newton steps on the support's entries, the gap
    below 1e-12 (1 + |f|); no eigen-decomposition). When the box binds on an ill-conditioned
    covariance the ADMM stops at its iteration limit short of the minimum (measured on
    breast-cancer features, cond(S) = 1e5: 0.013 and 0.57 above it after 20,000 iterations on
    two of GraHTP's graphs), which a solver comparing objectives across supports reads as noise. ``cvxpy``: the same problem
    with the box as semidefinite constraints (the reference)."""
    if req.ridge is not None and req.ridge[0] > 0:
        raise SolverError("a ridge on the restricted solve is not available for the precision-matrix problem")
    method, pf = req.method, lp.precision
    W = lp.layout.coords(pf.var)
    mask = precision_mask(lp, sub.cols)
    alpha, beta = _eigenvalue_bounds(lp)
    x = np.zeros(lp.n)
    if not mask[np.diag_indices(pf.p)].all():  # a zero diagonal entry: no positive definite matrix
        return Solved(x, np.inf, 0, False, method)
    if beta == np.inf:
        _refuse_singular_clique(pf.S, mask)
    if method == "cvxpy":
        from .cvxpy_lower import precision_cvxpy

        O, its = precision_cvxpy(pf.S, mask, alpha, beta)
        return _placed(lp, x, W, np.where(mask, (O + O.T) / 2, 0.0), its, True, method)
    admm_start = None
    if method in ("covsel", "newton"):
        start = None
        if method == "covsel":
            cs, solved = _covsel(lp, mask, alpha, beta)
            if solved:
                x[W] = cs.Theta.ravel()  # (13) solved: the box is inactive at the graph's MLE
                recent = lp._admm_warm.setdefault("covsel", {})  # support -> the last answers (polish)
                recent[np.packbits(mask).tobytes()] = x.copy()
                if len(recent) > 8:
                    del recent[next(iter(recent))]
                return Solved(x, None, cs.sweeps, True, method)
            if cs.converged and np.all(np.isfinite(cs.Theta)):
                start = cs.Theta
            elif np.all(np.isfinite(cs.W)) and np.all(np.isfinite(cs.Theta)) and cs.sweeps > 1:
                admm_start = (  # the ADMM's start: covsel's iterate and its dual S - W off the support
                    shift_into_box(cs.Theta, max(alpha, 1e-12), beta),
                    np.where(mask, 0.0, pf.S - cs.W),
                )
        if start is None and req.x0 is not None:
            T = req.x0[W].reshape(pf.p, pf.p)
            start = T if np.all(np.isfinite(T)) else None
        if method == "newton" or box_newton_fits(lp, mask):
            # the box binds at the graph's MLE (or covsel is slow): the barrier Newton method from
            # covsel's answer (exact to 1e-12 in a few dozen steps and no eigen-decomposition; the
            # ADMM needs thousands of iterations when the box binds on an ill-conditioned
            # covariance, and stops short of the optimum at its iteration limit)
            bn = logdet_box_newton(pf.S, mask, alpha, beta, Theta0=start)
            lp.oracle.charge(newton=bn.iterations)
            if bn.converged:
                x[W] = bn.Theta.ravel()
                return Solved(x, None, bn.iterations, True, "newton")
            admm_start = (bn.Theta, None)  # rounding stopped it: the ADMM finishes from there
    # the method asked for, or a box active on a large support, or covsel slow or failing: the ADMM
    return _admm(lp, mask, x, req.x0, admm_start)


def precision_mask(lp: LoweredData, cols: np.ndarray) -> np.ndarray:
    """The support (p x p bool, symmetric) of the precision matrix spanned by flat coordinates."""
    pf = lp.precision
    p = pf.p
    W = lp.layout.coords(pf.var)
    local = np.asarray(cols, dtype=np.int64) - W[0]
    local = local[(local >= 0) & (local < p * p)]
    mask = np.zeros(p * p, dtype=bool)
    mask[local] = True
    mask = mask.reshape(p, p)
    return mask | mask.T


def _eigenvalue_bounds(lp: LoweredData) -> tuple[float, float]:
    """(alpha, beta) of the eigenvalue box, (0, inf) without one."""
    return (lp.eigbox.alpha, lp.eigbox.beta) if lp.eigbox is not None else (0.0, np.inf)


def _covsel(lp: LoweredData, mask: np.ndarray, alpha: float, beta: float) -> tuple[Any, bool]:
    """covsel on the graph (warm-started from the previous solve's W), and whether its answer solves
    (13): converged, finite, and its eigenvalues inside the box (the box inactive at the graph's MLE)."""
    o = lp.subproblem
    cs = covsel(lp.precision.S, mask, tol=o["covsel_tol"], max_sweeps=o["covsel_max_sweeps"], W0=lp._admm_warm.get("W"))
    if cs.converged:
        lp._admm_warm["W"] = cs.W
    lp.oracle.charge(eigs=1)
    if not (cs.converged and np.all(np.isfinite(cs.Theta))):
        return cs, False
    lam = np.linalg.eigvalsh(cs.Theta)
    slack = 1e-9 * max(1.0, abs(alpha), abs(lam[-1]))
    return cs, bool(lam[0] >= alpha - slack and lam[-1] <= beta + slack and lam[0] > 0)


def _admm(
    lp: LoweredData, mask: np.ndarray, x: np.ndarray, x0: np.ndarray | None, start: tuple[Any, Any] | None
) -> Solved:
    """(13) by the ADMM of paper 000, Appendix D.2, from ``start`` (Theta, Gamma) when given, else
    from x0 on the support and the previous solve's multiplier and rho."""
    pf, o, warm = lp.precision, lp.subproblem, lp._admm_warm
    p, W = pf.p, lp.layout.coords(pf.var)
    alpha, beta = _eigenvalue_bounds(lp)
    Theta0 = None
    if x0 is not None:
        T = x0[W].reshape(p, p)
        T = np.where(mask, (T + T.T) / 2, 0.0)
        if np.all(np.isfinite(T)):
            Theta0 = T
    Gamma0 = warm.get("Gamma")
    if start is not None:
        Theta0, Gamma0 = start
    res = admm_logdet(
        pf.S,
        support_prox(mask),
        alpha,
        beta,
        rho=warm.get("rho", o["rho"]),
        Theta0=Theta0,
        Gamma0=Gamma0,
        tol=o["tol"],
        max_iter=o["max_iter"],
        adaptive=o["adaptive"],
    )
    warm["Gamma"], warm["rho"] = res.Gamma, res.rho
    lp.oracle.charge(eigs=res.iterations)
    return _placed(lp, x, W, res.Theta, res.iterations, res.converged, "admm")


def _placed(
    lp: LoweredData, x: np.ndarray, W: np.ndarray, O: np.ndarray, its: int, converged: bool, method: str
) -> Solved:
    """O with its eigenvalues moved into the box (a diagonal shift), written into x."""
    O = shift_into_box(O, *_eigenvalue_bounds(lp))
    x[W] = O.ravel()
    return Solved(x, None, its, converged, method)


def box_newton_fits(lp: LoweredData, mask: np.ndarray) -> bool:
    """Whether (13) on this support is solved by the barrier Newton method rather than the ADMM
    when the box binds: m = p + edges entries, a Newton step costs an m x m Cholesky (m^3 / 3) and
    an ADMM iteration a p x p eigen-decomposition (about 10 p^3); the Newton method takes a few
    dozen steps, the ADMM hundreds to thousands of iterations, so Newton up to m = 6 p (and any
    support of at most 300 entries)."""
    m = int(np.count_nonzero(np.triu(mask)))
    return m <= max(BOX_NEWTON_MIN, BOX_NEWTON_RATIO * lp.precision.p)


def polish(lp: LoweredData, x: np.ndarray) -> np.ndarray:
    """The returned point, when it is a recent covsel solve of (13) (on the same graph and within
    its tolerance; stopped at ``covsel_tol``,
    1e-6 on the regression coefficients, which is enough to compare supports), re-solved on
    the same graph to 1e-10 from its own W: a few sweeps, so that the gradient on the support
    vanishes to rounding in the certificate. Any other point is returned as it is."""
    if lp.precision is None or not lp._admm_warm.get("covsel"):
        return x
    pf = lp.precision
    p = pf.p
    W = lp.layout.coords(pf.var)
    O = x[W].reshape(p, p)
    mask = O != 0
    last = lp._admm_warm["covsel"].get(np.packbits(mask).tobytes())
    if last is None or float(np.max(np.abs(last - x))) > 1e-4 * float(np.max(np.abs(x))):
        return x  # not a covsel answer on this graph
    cs = covsel(pf.S, mask, tol=1e-10, max_sweeps=1000, W0=lp._admm_warm.get("W"))
    alpha, beta = _eigenvalue_bounds(lp)
    if not cs.converged or not np.all(cs.Theta[~mask] == 0):
        return x
    lam = np.linalg.eigvalsh(cs.Theta)
    if lam[0] <= 0 or lam[0] < alpha or lam[-1] > beta:
        return x
    out = x.copy()
    out[W] = cs.Theta.ravel()
    return out if lp.oracle.peek(out) <= lp.oracle.peek(x) + 1e-12 * max(1.0, abs(lp.oracle.peek(x))) else x


def _refuse_singular_clique(S: np.ndarray, mask: np.ndarray) -> None:
    """An UnboundedError when S is singular on a vertex or an edge of the graph ``mask`` (S_ii = 0,
    or S_ii S_jj = S_ij^2 for an edge ij, to rounding: two variables of the data that are equal or
    proportional): -logdet(O) + tr(S O) then decreases without bound along O + t v v' with v in the
    null space of that submatrix (v v' lies in the graph), so the graph's maximum-likelihood
    estimate does not exist unless an upper eigenvalue bound holds O back."""
    d = np.diag(S)
    hint = (
        "bound the eigenvalues (alpha <= eig(O) <= beta), or drop one of two variables that are equal or proportional"
    )
    zero = np.flatnonzero(d <= 1e-12 * max(1.0, float(np.abs(d).max())))
    if zero.size:
        raise UnboundedError(
            f"the objective has no minimum: S[{zero[0]}, {zero[0]}] = 0 (a variable without variance), so "
            f"-logdet(O) + trace(S @ O) decreases without bound as O[{zero[0]}, {zero[0]}] grows",
            hint=hint,
        )
    i, j = np.nonzero(np.triu(mask, 1))
    bad = np.flatnonzero(d[i] * d[j] - S[i, j] ** 2 <= 1e-12 * d[i] * d[j])
    if bad.size:
        a, b = int(i[bad[0]]), int(j[bad[0]])
        raise UnboundedError(
            f"the objective has no minimum on a graph with the edge ({a}, {b}): S is singular on the pair "
            f"(variables {a} and {b} are perfectly correlated), so -logdet(O) + trace(S @ O) decreases without bound "
            "along that pair",
            hint=hint,
        )
