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
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import gammaln

from ..errors import ModelError
from ..lowering.lowered import LoweredProblem
from ..model.problem import Model
from ..model.samples import sample_nodes, split_data_term

if TYPE_CHECKING:
    from ..model.expr import Data, Expr

CRITERIA = ("ebic", "aic", "bic", "ebic_cc", "gic")


METHODS = ("cv",) + CRITERIA


class SelectionError(ModelError):
    kind = "selection error"


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


@dataclass
class DataTerm:
    """The objective's data term and what the criteria need to read it as a likelihood."""

    expr: Expr  # the data term over all n samples
    nodes: list[Data]  # the sample data nodes (n rows)
    n: int
    scale: float | None  # c: data term = c * sum_i l_i (None when the sample terms disagree)
    gaussian: bool
    n_eff: float  # the rows, or the sum of the sample weights (the largest k tried)
    n_obs: float  # n of the criteria: the loss values (n m for an n x m response), or their weights' sum
    n_unit: str = "samples"  # what n_obs counts: "events" for the Cox partial likelihood


def data_term(problem: Model, lp: LoweredProblem) -> DataTerm:
    d = lp.design
    if d is None or d.n_samples is None or not d.sample_terms:
        raise SelectionError(
            "choosing k needs a loss that is a sum over samples (rows of data), "
            f"and this objective is a {lp.structure}",
            hint="write the loss as mean(...) or sum(...) of a per-sample loss of affine maps of the data",
        )
    n = d.n_samples
    nodes = sample_nodes(problem.objective.expr, n)
    terms = [d.terms[i] for i in d.sample_terms]
    # observations: one per loss value (an entry of an elementwise loss -- n m of them for a
    # multi-response Y --, a row of a row-wise loss, a sample of a whole-vector loss), or the sum of
    # their frequency weights; the rows (for the largest k tried) scale the same way
    obs = [float(np.sum(t.weights)) if t.weights is not None else t.observations for t in terms]
    per_row = [(float(np.sum(t.weights)) * n / t.out_size) if t.weights is not None else float(n) for t in terms]
    agree = np.allclose(obs, obs[0], rtol=1e-10)
    n_obs = obs[0] if agree else float(n)
    units = {t.observations_unit for t in terms}
    unit = units.pop() if agree and len(units) == 1 else "samples"
    n_eff = per_row[0] if np.allclose(per_row, per_row[0], rtol=1e-10) else float(n)
    expr, _ = split_data_term(problem.objective.expr, nodes)
    if expr is None or not nodes:
        raise SelectionError("no term of the objective reads the sample data", hint="check the objective")
    coefs = [d.terms[i].coef for i in d.sample_terms]
    scale = coefs[0] if np.allclose(coefs, coefs[0], rtol=1e-12, atol=0) else None
    gaussian = all(d.terms[i].quadratic for i in d.sample_terms)
    return DataTerm(expr, nodes, n, scale, gaussian, n_eff, n_obs, unit)


def _fixed(lp: LoweredProblem) -> np.ndarray:
    """The coordinates a box fixes (lo == hi), which no criterion counts."""
    box = lp.set.box_bounds()
    return box[0] == box[1] if box is not None else np.zeros(lp.n, dtype=bool)


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
