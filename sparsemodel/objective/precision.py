"""The Gaussian log-likelihood of a precision matrix, recognized in the objective (paper 000,
Section 5.3):

    L(O) = c * ( -logdet(O) + <S, O> ),     grad L = c (S - O^{-1}),

written ``-logdet(O) + trace(S @ O)`` (or ``trace(O @ S)``, ``sum(S * O)``), times a positive
constant. :func:`logdet_form` finds S; the restricted problem (13) on a support and an eigenvalue
box is then solved by covsel, a barrier Newton method (:func:`sparsemodel.numerics.logdet.logdet_box_newton`)
or the ADMM of Appendix D.2 (:func:`sparsemodel.numerics.logdet.admm_logdet`),
the graphical LASSO by the same ADMM with soft thresholding, and single-edge line searches
(:func:`edge_gains`) in closed form (the moves of the greedy baselines:
:class:`sparsemodel.lowering.forms.PrecisionEdges`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import atoms as A
from ..model.arith import Add, Div, MatMul, Mul, Neg, Sub
from ..model.expr import Expr, Variable, dense


@dataclass
class LogdetForm:
    """L(O) = scale * (-logdet(O) + <S, O>) in the variable ``var``."""

    var: Variable
    S: np.ndarray
    scale: float

    @property
    def p(self) -> int:
        return self.S.shape[0]

    def value(self, O: np.ndarray) -> float:
        try:
            Lc = np.linalg.cholesky((O + O.T) / 2)
        except np.linalg.LinAlgError:
            return np.inf
        return self.scale * (-2.0 * float(np.log(np.diag(Lc)).sum()) + float(np.sum(self.S * O)))


def _linear_part(e: Expr, var: Variable) -> tuple[np.ndarray, float] | None:
    """(S, c) if e is c * <S, var> written as trace(S @ O), trace(O @ S), sum(S * O) or trace(O)."""
    if isinstance(e, A.trace):
        inner = e.args[0]
        if inner is var:
            return np.eye(var.shape[0]), 1.0
        if isinstance(inner, MatMul):
            a, b = inner.args
            if a.is_constant() and b is var:
                return dense(a.constant_value()).T, 1.0  # tr(S O) = <S', O>
            if b.is_constant() and a is var:
                return dense(b.constant_value()).T, 1.0
        return None
    if isinstance(e, A.sum) and e.axis is None and isinstance(e.args[0], Mul):
        a, b = e.args[0].args
        if a.is_constant() and b is var:
            return dense(a.constant_value()), 1.0
        if b.is_constant() and a is var:
            return dense(b.constant_value()), 1.0
    return None


def logdet_form(objective: Expr, variables: list[Variable] | None = None) -> LogdetForm | None:
    """The form c (-logdet(O) + <S, O>) of the objective, or None (also when the problem has
    variables other than O: ``variables``)."""
    parts: list[tuple[Expr, float]] = []
    stack = [(objective, 1.0)]
    while stack:
        e, c = stack.pop()
        if isinstance(e, (Add, Sub)):
            stack.append((e.args[0], c))
            stack.append((e.args[1], -c if isinstance(e, Sub) else c))
        elif isinstance(e, Neg):
            stack.append((e.args[0], -c))
        elif isinstance(e, (Mul, Div)) and e.shape == ():
            a, b = e.args
            if isinstance(e, Div) and b.is_constant() and b.shape == ():
                stack.append((a, c / float(b.constant_value())))
            elif isinstance(e, Mul) and a.is_constant() and a.shape == ():
                stack.append((b, c * float(a.constant_value())))
            elif isinstance(e, Mul) and b.is_constant() and b.shape == ():
                stack.append((a, c * float(b.constant_value())))
            else:
                return None
        elif e.is_constant():
            continue
        else:
            parts.append((e, c))
    logdets = [(e, c) for e, c in parts if isinstance(e, A.logdet) and isinstance(e.args[0], Variable)]
    if len(logdets) != 1 or len(parts) != 2:
        return None
    (ld, c_ld), other = logdets[0], next(p for p in parts if p[0] is not logdets[0][0])
    var = ld.args[0]
    lin = _linear_part(other[0], var)
    if lin is None or c_ld >= 0:
        return None
    S, k = lin
    scale = -c_ld
    S = (S * other[1] * k) / scale
    if S.shape != var.shape or not var.symmetric or not np.all(np.isfinite(S)):
        return None
    if variables is not None and [v.uid for v in variables] != [var.uid]:
        return None
    return LogdetForm(var, (S + S.T) / 2, scale)


def edge_gains(
    S: np.ndarray, Sigma: np.ndarray, O: np.ndarray, pairs: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """For each off-diagonal pair (i, j): the exact minimum over t of
    L(O + t (e_i e_j' + e_j e_i')) - L(O) (with L = -logdet + <S, .>) and the minimizing t.

    With Sigma = O^{-1}, det(O + t E) = det(O) ((1 + t s)^2 - t^2 a b), s = Sigma_ij, a = Sigma_ii,
    b = Sigma_jj, so phi(t) = -log((1 + t s)^2 - t^2 a b) + 2 t (S_ij) and phi'(t) = 0 is a quadratic
    in t; its root inside the domain (where the determinant stays positive) is the minimizer."""
    i, j = pairs
    s, a, b, c = Sigma[i, j], Sigma[i, i], Sigma[j, j], S[i, j]
    d = a * b - s * s  # > 0 for a positive definite Sigma
    # phi'(t) = -(2 s (1 + t s) - 2 t a b) / ((1 + t s)^2 - t^2 a b) + 2 c = 0
    # <=> c ((1 + t s)^2 - t^2 a b) = s (1 + t s) - t a b  <=>  -c d t^2 + (2 c s + d) t + (c - s) = 0
    qa, qb, qc = -c * d, 2 * c * s + d, c - s
    with np.errstate(divide="ignore", invalid="ignore"):
        disc = np.sqrt(np.maximum(qb * qb - 4 * qa * qc, 0.0))
        r1 = np.where(np.abs(qa) > 1e-300, (-qb + disc) / (2 * qa), -qc / qb)
        r2 = np.where(np.abs(qa) > 1e-300, (-qb - disc) / (2 * qa), -qc / qb)
    best_t = np.zeros_like(s)
    best = np.zeros_like(s)
    for r in (r1, r2):
        det = (1 + r * s) ** 2 - r * r * a * b
        ok = np.isfinite(r) & (det > 0) & (1 + r * s > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            val = np.where(ok, -np.log(np.where(ok, det, 1.0)) + 2 * r * c, np.inf)
        better = val < best
        best = np.where(better, val, best)
        best_t = np.where(better, r, best_t)
    return best, best_t


__all__ = ["LogdetForm", "edge_gains", "logdet_form"]
