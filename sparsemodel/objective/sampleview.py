"""The samples of a model, read from its objective's composite form without lowering it.

A workflow that splits rows (cross-validation folds, held-out splits, the rows handed to an outside
method), reads the held-out loss or prices a fit by an information criterion needs four facts of
the objective and nothing of its constraint sets, oracle or caches:

* ``n`` -- the number of samples: the common leading dimension of the loss terms that read data
  (the design's finite-sum view, :class:`~sparsemodel.objective.design.Design`);
* the sample data nodes (every data node with n rows, :func:`~sparsemodel.model.samples.sample_nodes`)
  and the *data term* (the objective's additive terms that read them,
  :func:`~sparsemodel.model.samples.split_data_term`): what :meth:`SampleView.train` and
  :meth:`SampleView.held_out` take rows of;
* how the data term reads as a likelihood (:class:`DataTerm`: its scale c in c * sum_i l_i, Gaussian
  or not, the observations the criteria count).

:func:`sample_view` builds the composite form as the lowering does (the same
:func:`~sparsemodel.objective.structure.decompose` and :class:`~sparsemodel.objective.design.Design`,
so the counts are the lowering's) and nothing else; given a lowered problem's layout and design it
reuses them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelError
from ..model.forms import sparse_pca
from ..model.objective import Objective
from ..model.problem import Model
from ..model.samples import rebind_rows, sample_nodes, split_data_term, subset_scale
from .design import Design
from .evaluator import Layout
from .precision import logdet_form
from .structure import decompose

if TYPE_CHECKING:
    from ..model.expr import Data, Expr


class SelectionError(ModelError):
    """What choosing k, or splitting the samples, cannot do with this model (located, with a hint)."""

    kind = "selection error"


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
    rest: Expr | None = None  # the objective's other terms (a ridge), None when the data term is all of it
    subset: int | None = None  # how the term on a subset of the rows follows from its samples' values (subset_scale)


class SampleView:
    """The samples of one model: ``layout`` and ``design`` (None without a composite form), ``n``
    (None when the objective is no sum over samples) and, through :meth:`term`, its data term."""

    def __init__(self, problem: Model, layout: Layout, design: Design | None):
        self.problem = problem
        self.layout = layout
        self.design = design
        d = design
        self.n: int | None = d.n_samples if d is not None and d.sample_terms else None
        self._term: DataTerm | None = None

    @property
    def has_samples(self) -> bool:
        return self.n is not None

    def term(self) -> DataTerm:
        """The data term (:class:`DataTerm`), or a :class:`SelectionError` saying why there is none."""
        if self._term is None:
            self._term = self._data_term()
        return self._term

    def _data_term(self) -> DataTerm:
        d, n = self.design, self.n
        if d is None or n is None:
            raise SelectionError(
                f"choosing k needs a loss that is a sum over samples (rows of data), and this objective is a {_form(self.problem, d)}",
                hint="write the loss as mean(...) or sum(...) of a per-sample loss of affine maps of the data",
            )
        expr = self.problem.objective.expr
        nodes = sample_nodes(expr, n)
        terms = [d.terms[i] for i in d.sample_terms]
        # observations: one per loss value (an entry of an elementwise loss -- n m of them for a
        # multi-response Y --, a row of a row-wise loss, a sample of a whole-vector loss), or the sum of
        # their frequency weights; the rows (for the largest k tried) scale the same way
        obs = [float(np.sum(t.weights)) if t.weights is not None else t.observations for t in terms]
        per_row = [(float(np.sum(t.weights)) * n / t.out_size) if t.weights is not None else float(n) for t in terms]
        agree = _all_close(obs, 1e-10, 1e-8)
        n_obs = obs[0] if agree else float(n)
        units = {t.observations_unit for t in terms}
        unit = units.pop() if agree and len(units) == 1 else "samples"
        n_eff = per_row[0] if _all_close(per_row, 1e-10, 1e-8) else float(n)
        term, rest = split_data_term(expr, nodes)
        if term is None or not nodes:
            raise SelectionError("no term of the objective reads the sample data", hint="check the objective")
        coefs = [t.coef for t in terms]
        scale = coefs[0] if _all_close(coefs, 1e-12, 0.0) else None
        gaussian = all(t.quadratic for t in terms)
        subset = subset_scale(term, nodes, n)
        return DataTerm(term, nodes, n, scale, gaussian, n_eff, n_obs, unit, rest, subset)

    # ------------------------------------------------------------------ rows
    def train(self, rows: np.ndarray, made: dict[int, Data] | None = None) -> Model:
        """The model on rows ``rows`` of its sample data (every data node with n rows subset; the
        constraints, the source and the inputs kept: files are never written over). ``made``, when
        given, receives the new node of each sample node's uid (lowering/subsets.py rebinds them)."""
        p = self.problem
        obj = rebind_rows(p.objective.expr, self.term().nodes, rows, made)
        out = Model(Objective(obj, p.objective.span), p.constraints, source=p.source)
        out.symbols = p.symbols
        return out

    def held_out(self, rows: np.ndarray) -> Expr:
        """The data term on rows ``rows`` (a fold's or a split's held-out loss)."""
        dt = self.term()
        return rebind_rows(dt.expr, dt.nodes, rows)


def _all_close(vals: list[float], rtol: float, atol: float) -> bool:
    """``np.allclose(vals, vals[0], rtol, atol)`` for a few floats (NumPy's call costs more than the
    comparison): each within atol + rtol |vals[0]| of the first, infinities equal only to themselves,
    NaN to nothing."""
    ref = vals[0]
    fin = math.isfinite(ref)
    return all(v == ref or (fin and math.isfinite(v) and abs(v - ref) <= atol + rtol * abs(ref)) for v in vals)


def _form(problem: Model, design: Design | None) -> str:
    """The objective's form in a few words (why it has no samples)."""
    if design is not None:
        return design.describe()
    if sparse_pca(problem.objective, problem.constraints) is not None:
        return "sparse PCA objective (maximize w'Sw on a ball), which reads no samples"
    if logdet_form(problem.objective.expr, problem.variables) is not None:
        return "Gaussian log-likelihood of a precision matrix (-logdet + trace(S @ .)), which reads no samples"
    return "general smooth objective (no sum of losses of affine maps of the data)"


def sample_view(problem: Model, lowered: Any = None) -> SampleView:
    """The samples of ``problem`` (:class:`SampleView`). ``lowered``: the problem's lowering when
    one is at hand, whose layout and design are reused instead of recognised again."""
    if lowered is not None:
        return SampleView(problem, lowered.layout, lowered.design)
    layout = Layout(problem.variables)
    # sparse PCA's -w'Sw is no composite loss (a concave square): no design, as the lowering has none
    spca = sparse_pca(problem.objective, problem.constraints)
    comp = decompose(problem.objective.expr, layout) if spca is None else None
    return SampleView(problem, layout, Design(comp, layout) if comp is not None else None)


__all__ = ["DataTerm", "SampleView", "SelectionError", "sample_view"]
