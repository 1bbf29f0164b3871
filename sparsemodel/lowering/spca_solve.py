"""The restricted solve of sparse PCA (:mod:`sparsemodel.model.forms`): the maximum of w'Sw over
the ball ||w|| <= r on a support C is r^2 lambda_max(S[C, C]), at r times the leading eigenvector
(:func:`sparsemodel.numerics.spca.leading`): exact, so every solver's debiasing step and the
conformance suite's refit are this one eigenproblem."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..numerics.spca import leading
from .backend import Request, Solved
from .data import LoweredData


def spca_solve(lp: LoweredData, sub: Any, req: Request) -> Solved:
    """min -w'Sw over the subspace's coordinates and the ball."""
    d = lp.spca
    pos = np.flatnonzero(np.isin(d.coords, sub.cols))
    lam, w = leading(d.S, pos)
    r = d.radius
    return Solved(d.embed(r * w, lp.n), -(r * r) * lam, 1, True, "eigen")
