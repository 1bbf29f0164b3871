"""The restricted solve of sparse PCA (:mod:`sparsemodel.model.forms`): the maximum of w'Sw over
the ball ||w|| <= r on a support C is r^2 lambda_max(S[C, C]), at r times the leading eigenvector
(:func:`sparsemodel.numerics.spca.leading`): exact, so every solver's debiasing step and the
conformance suite's refit are this one eigenproblem."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..numerics.spca import leading


class SparsePCAData:
    """What the sparse PCA solvers read: S (the form maximized, p x p), the flat coordinates of w,
    the radius, and the bound k (the problem's set carries the bound used)."""

    def __init__(self, form: Any, layout: Any):
        self.form = form
        self.S = form.S
        self.coords = layout.coords(form.variable)
        self.radius = form.radius
        self.spelling = form.spelling

    def embed(self, w: np.ndarray, n: int) -> np.ndarray:
        x = np.zeros(n)
        x[self.coords] = w
        return x


def spca_backend(lp: Any, sub: Any, x0: Any, ridge: Any, method: str, tol: float, give_up: Any, hint: Any) -> tuple:
    """min -w'Sw over the subspace's coordinates and the ball (the restricted-solve signature)."""
    d = lp.spca
    pos = np.flatnonzero(np.isin(d.coords, sub.cols))
    lam, w = leading(d.S, pos)
    r = d.radius
    x = d.embed(r * w, lp.n)
    return x, -(r * r) * lam, 1, True, "eigen", 0.0, None, None
