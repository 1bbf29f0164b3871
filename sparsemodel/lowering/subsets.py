"""Lowerings of one model on subsets of its samples, without lowering each subset again.

A study fits one model on many subsets of its rows: cross-validation's folds, stability selection's
halves, a comparison's training splits. The subsets of one size give models of one shape, so the
first of each size is lowered and every other is rebound from that lowering
(:func:`~sparsemodel.lowering.rebind.rebind_nodes`: its sample data nodes, named or not, take the
subset's rows; the layout, the sets, the kernel problem and the relaxation are kept). A rebound
lowering solves exactly the model on its rows, as a fresh lowering of that model does
(tests/lowering/test_subsets.py); where rebinding does not apply (data a constraint reads, a form
read at lowering such as a precision matrix's, a dask array) the subset's model is lowered afresh.

The sample data nodes are the :class:`~sparsemodel.objective.sampleview.SampleView`'s (every data
node with n rows), the same ones ``SampleView.train`` subsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelError

if TYPE_CHECKING:
    from ..model.problem import Model
    from ..objective.sampleview import SampleView
    from .lowered import LoweredProblem


class SampleLowerings:
    """The lowerings of ``problem`` on subsets of its samples (:meth:`lower`): the first subset of
    each size lowered, the others of that size rebound from it. ``share``: the lowerings share one
    kernel problem, each solve writing its numbers in (for subsets solved one after the other:
    stability selection's halves); False, each builds its own at its first solve (subsets solved
    in turn: cross-validation's folds, one k at a time)."""

    def __init__(self, problem: Model, view: SampleView | None = None, share: bool = True):
        from ..objective.sampleview import sample_view

        self.problem = problem
        self.view = view if view is not None else sample_view(problem)
        self.share = share
        self._first: dict[
            int, tuple[Any, dict[int, int]] | None
        ] = {}  # size -> (lowering, uid map), None: lower afresh

    def lower(self, rows: np.ndarray) -> LoweredProblem:
        """The lowering of the model on the rows ``rows`` (its problem: ``.problem``)."""
        from .lowered import LoweredProblem
        from .rebind import rebind_nodes

        rows = np.asarray(rows, dtype=np.int64)
        nodes = self.view.term().nodes
        size = len(rows)
        first = self._first.get(size)
        if first is not None:
            base, uids = first
            try:
                return rebind_nodes(base, {uids[d.uid]: d.take_rows(rows) for d in nodes}, self.share)
            except ModelError:  # (data a constraint reads, a sign the convexity proof needs lost: afresh)
                pass
        subs: dict[int, Any] = {}
        lp = LoweredProblem(self.view.train(rows, subs))
        if size not in self._first:
            self._first[size] = (lp, {uid: node.uid for uid, node in subs.items()})
        return lp


__all__ = ["SampleLowerings"]
