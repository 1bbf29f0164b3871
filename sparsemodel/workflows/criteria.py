"""The information criteria that choose k (``by`` in :func:`sparsemodel.workflows.select.run_select`),
read from the objective's data term at each point of the path.

**Information criteria** (``by`` = ``ebic`` -- the default --, ``aic``, ``bic``, ``ebic_cc``, ``gic``). The objective's *data
term* is its additive terms that read sample data (a ridge ``lam * sum_squares(w)`` is not in it,
see :func:`sparsemodel.model.samples.split_data_term`), written as c * sum_i l_i(x) over the n
samples (``mean(...)`` has c = 1/n, ``sum_squares(...) / (2 n)`` has c = 1/(2n), sample weights stay
inside l_i). L(x) = sum_i l_i(x) is taken as the negative log-likelihood, so the deviance is

    D = n log(RSS / n)   when every data term is a square (Gaussian, unknown variance; RSS = L)
    D = 2 L              otherwise (logistic, Poisson, softmax, Huber, user funcs)

with n the number of observations -- the loss values: the samples, or n m entries for an n x m
response (multi-task least squares), a row of a row-wise loss (softmax), what a whole-vector loss
states (``observations``: the Cox partial likelihood counts its events, their total weight with case
weights, as Volinsky and Raftery 2000 do for BIC; not the subjects) --, or the sum of the sample
weights when every data term carries them (frequency weights: a weight of 2 counts as a repeated
sample), and, with df = the nonzeros of the constrained coordinates plus the free coordinates (intercepts,
always-selected indices, other variables; coordinates fixed by a box with lo = hi not counted), p
the number of selectable units (coordinates, or groups) and s the units used,

    AIC     = D + 2 df                                 (Akaike 1974)
    BIC     = D + log(n) df                            (Schwarz 1978)
    EBIC    = D + (log(n) + 2 gamma log(p)) df_u       (the default; abess's ic_type="ebic": Chen &
                                                        Chen's 2 gamma log binom(p, s) bounded by its
                                                        upper bound 2 gamma s log p, a constant price
                                                        per unit; gamma = 1)
    EBIC_CC = D + log(n) df + 2 gamma log binom(p, s)  (Chen & Chen 2008 as written; gamma = 1 satisfies
                                                        their consistency condition gamma > 1 - 1/(2 kappa)
                                                        for every p = O(n^kappa))
    GIC     = D + log(log n) log(p) df                 (Fan & Tang 2013, a_n = log(log n) log p)

df_u is df with each selected group counted once (``groups=``; coordinates and edges as in df):
abess's effective number of parameters, which counts a feature of a multi-response model (a row of
the softmax's W, one column of X) once whatever the number of classes. Counting every coefficient
of the row, the softmax model paid (K log n + 2 K log p) per feature and kept one of the three true
features of abess's own multinomial test; measured on abess's multinomial generator
(docs/selection.md), counting the row once found as many exact supports as abess or more.

Why EBIC's constant price per unit is the default (measured by ``benchmarks/choose_k.py``, docs/selection.md):
on logistic paths the deviance drops steeply again at large k (towards separation), and the
binomial form's price per added unit, 2 gamma log((p - s) / (s + 1)), shrinks as s grows, so it
chose k = 22..28 on 4 of 10 high-dimensional logistic problems where the constant price chose the
true 10.

Rank constraints use df = r (p + m - r) + free coordinates and AIC or BIC only.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from ..lowering.lowered import LoweredProblem
from ..model.problem import Model
from ..objective.sampleview import DataTerm, SelectionError, sample_view

CRITERIA = ("ebic", "aic", "bic", "ebic_cc", "gic")


METHODS = ("cv",) + CRITERIA


def log_binom(p: int, s: int) -> float:
    return float(gammaln(p + 1) - gammaln(s + 1) - gammaln(p - s + 1))


def deviance(loss: float, n: float, gaussian: bool) -> float:
    """D = n log(RSS/n) (Gaussian, ``loss`` = RSS) or 2 L (``loss`` = the negative log-likelihood)."""
    if gaussian:
        return n * math.log(max(loss, 1e-300 * n) / n)
    return 2.0 * loss


def criterion(by: str, loss: float, n: float, df: int, p: int, s: int, gaussian: bool, gamma: float = 1.0) -> float:
    """The information criterion ``by`` (see the module docstring for every constant)."""
    D = deviance(loss, n, gaussian)
    if by == "aic":
        return D + 2.0 * df
    if by == "bic":
        return D + math.log(n) * df
    if by == "ebic":
        return D + (math.log(n) + 2.0 * gamma * math.log(max(p, 1))) * df
    if by == "ebic_cc":
        return D + math.log(n) * df + 2.0 * gamma * log_binom(p, s)
    if by == "gic":
        return D + math.log(math.log(n)) * math.log(p) * df
    raise SelectionError(f"unknown criterion {by!r}", hint=f"choose one of: {', '.join(METHODS)}")


def data_term(problem: Model, lp: LoweredProblem | None = None) -> DataTerm:
    """The data term of ``problem`` (:meth:`~sparsemodel.objective.sampleview.SampleView.term`),
    read from the design of its lowering ``lp`` when one is at hand."""
    return sample_view(problem, lp).term()


def _fixed(lp: LoweredProblem) -> np.ndarray:
    """The coordinates a box fixes (lo == hi), which no criterion counts (without a box none: one
    read-only array of n False per n, since a path asks at every point)."""
    box = lp.set.box_bounds()
    if box is not None:
        return box[0] == box[1]
    got = _NONE_FIXED.get(lp.n)
    if got is None:
        got = _NONE_FIXED[lp.n] = np.zeros(lp.n, dtype=bool)
        got.flags.writeable = False
    return got


_NONE_FIXED: dict[int, np.ndarray] = {}


def degrees_of_freedom(lp: LoweredProblem, x: np.ndarray) -> tuple[int, int, int]:
    """(df, units used s, selectable units p) of the flat point x under the problem's set."""
    return lp.set.degrees_of_freedom(x, _fixed(lp))


def ebic_count(lp: LoweredProblem, x: np.ndarray) -> int:
    """What EBIC prices at log n + 2 gamma log p each: df, with a selected group counted once."""
    return lp.set.ebic_count(x, _fixed(lp))


def default_k_max(n: float, units: int, free: int = 0) -> int:
    """The largest k tried when none is given: min(units, n / (log(log n) log p)), the largest support
    size ABESS's theory allows (Zhu et al. 2020; abess's default ``support_size``), with the divisor
    at least 1 and at most n - 1 - free coordinates (the fit keeps a residual degree of freedom)."""
    d = math.log(math.log(n)) * math.log(units) if n > math.e and units > 1 else 1.0
    top = int(n / max(d, 1.0))
    return max(0, min(units, top, int(n) - 1 - free))


__all__ = [
    "CRITERIA",
    "METHODS",
    "DataTerm",
    "SelectionError",
    "criterion",
    "data_term",
    "default_k_max",
    "degrees_of_freedom",
    "deviance",
    "ebic_count",
    "log_binom",
]
