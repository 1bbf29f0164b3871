"""Solve again without lowering again: a lowered problem with other data of the same shape bound to
its names (splits, replications, bootstrap samples), the way cvxpy's parameters avoid recompiling.

:func:`rebind` keeps what does not depend on the data -- the layout, the constraint sets with their
bounds, the tree the design was made from -- and replays only the numbers the new data feed:

* the composite form is read again from the same tree with the new values standing for the data
  nodes (``decompose(..., binding.value)``: coefficients, weights and constants; no tree is built);
* the design keeps every term's map whose expression reads nothing that changed and makes the
  others again from their blocks' recipes (which constant expression each operator holds, which
  factors each scale was multiplied by; :meth:`~sparsemodel.objective.design.Design.rebound`), so
  a data matrix is taken as it is and a scale or offset is computed by the steps that made it;
* the lean kernel's arrays are written in place from the new design (:func:`.lean.move`: no
  allocation, the compiled problem object reused; its Gram rows and start forgotten), and the
  plain relaxation of the bound is carried while the ridges are unchanged;
* the evaluator reads the old tree with the new values (:class:`~sparsemodel.objective.evaluator.Evaluator`'s
  ``values``); the model's new tree (``problem.objective``, ``lp.objective``, coordinate names) is
  built only when something reads it (:class:`_BoundObjective`).

Where the replay does not apply -- the precision-matrix and sparse PCA forms (they read their
matrix at lowering), a form that is no longer the old one term by term, a loss that reads the new
data beside its affine argument (cox's times), a dask array -- the model with the new data is
lowered again through the general path, its kernel arrays still written in place. Either way the
rebound lowering solves exactly the model with the new data (tests/lowering/test_rebind.py: the
same answers as lowering that model afresh).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError
from ..model.dcp import NONNEG, NONPOS, value_sign
from ..model.expr import Data, Expr, data_value
from ..model.objective import Objective
from ..model.samples import Binding, data_named, rebound_node, replace_data
from ..objective.design import Design
from ..objective.evaluator import Evaluator
from ..objective.oracle import Oracle
from ..objective.structure import decompose
from ..util import frame_names, is_dask_array, shallow_copy
from . import lean
from .bound import carry_relaxations

if TYPE_CHECKING:
    from .data import LoweredData


@dataclass
class _Tree:
    """What rebinding reads of the tree a lowering's design was made from, once per tree (shared by
    every lowering rebound from it): the objective minimized (``root``) and as the model states it,
    its data nodes by name, the names the constraints read, and per node the data below it."""

    root: Expr
    objective: Objective
    named: dict[str, list[Data]]
    in_constraints: set[str]
    nodes: dict[int, Data] = field(default_factory=dict)  # every data node by uid (named or not)
    read_by_constraints: set[int] = field(default_factory=set)  # the uids of the data nodes a constraint reads
    leaves: dict[int, Any] = field(default_factory=dict)
    plans: dict[int, Any] = field(default_factory=dict)  # per affine argument, its offset's evaluation order
    # what the lowerings of this tree share across rebindings: the kernel problems (lean.py, per set
    # layout: the dict of the lowering the tree was read from), and the latest lowering rebound from
    # it, whose relaxations the next one carries (a study rebinds every sample from one first lowering)
    kernels: dict[Any, Any] = field(default_factory=dict)
    latest: Any = None  # (a weak reference)


@dataclass
class _Bound:
    """A lowering's data relative to its tree: every data name rebound so far as the user gave it
    (the tree built on demand reads these), and per data node its numbers and what was given."""

    tree: _Tree
    by_name: dict[str, Any]
    values: dict[int, Any]
    given: dict[int, tuple[Data, Any]]


class _BoundObjective(Objective):
    """A rebound model's objective: its sense and place at once, its tree (the model's with the new
    data in place of each data node rebound, :func:`~sparsemodel.model.samples.rebound_node`) on
    first use -- a solve on the design never reads it."""

    def __init__(self, base: Objective, given: dict[int, tuple[Data, Any]]):
        self.sense, self.span = base.sense, base.span
        self._base, self._given = base, given

    def __getattr__(self, name: str) -> Any:
        if name in ("stated", "expr"):
            new = {uid: rebound_node(d, value) for uid, (d, value) in self._given.items()}
            made = Objective(replace_data(self._base.stated, new), self._base.span, self._base.sense)
            self.stated, self.expr = made.stated, made.expr
            return self.__dict__[name]
        raise AttributeError(name)


def rebind(lp: LoweredData, values: dict[str, Any]) -> LoweredData:
    """``lp``'s lowering of its model with the objective's data named in ``values`` replaced by
    arrays of the same shapes. Located errors for an unknown name, a name the constraints read
    (their sets are kept: lower the new model instead), another shape, or a value that is not finite.
    The model's other lowerings are left as they were, and nothing given is modified; ``lp`` itself
    should not be solved again (its kernel arrays now hold the new data: it is rebuilt if it is)."""
    state = _state(lp)
    tree = state.tree
    items = []
    for name, value in values.items():
        nodes = tree.named.get(name)
        if not nodes:
            raise ModelError(
                f"the objective reads no data named {name!r}",
                hint=f"data of the objective: {', '.join(sorted(tree.named)) or '(none named)'}",
            )
        if name in tree.in_constraints:
            raise ModelError(
                f"{name!r} is read by a constraint: its set was built from it, so new values need a new lowering",
                nodes[0].span,
                "lower the model with the new data instead (problem.lower())",
            )
        items.append((name, nodes, value))
    return _rebind(lp, state, items, values)


def rebind_nodes(lp: LoweredData, values: dict[int, Any], share: bool = True) -> LoweredData:
    """:func:`rebind` by data node: ``values`` maps the uid of a data node of ``lp``'s objective
    (named or not: a study's rows of data given as arrays) to its new numbers. The same checks and
    errors; a node a constraint reads is refused. ``share=False``: the new lowering builds its own
    kernel problem at its first solve instead of joining the family's (lowerings solved in turn,
    cross-validation's folds one k at a time, would otherwise write their numbers into one problem
    at every solve)."""
    state = _state(lp)
    tree = state.tree
    items = []
    for uid, value in values.items():
        node = tree.nodes.get(uid)
        if node is None:
            raise ModelError("the objective reads no such data node (it belongs to another lowering's tree)")
        label = node.name or "a data value"
        if uid in tree.read_by_constraints or (node.name and node.name in tree.in_constraints):
            raise ModelError(
                f"{label} is read by a constraint: its set was built from it, so new values need a new lowering",
                node.span,
                "lower the model with the new data instead",
            )
        items.append((node.name, [node], value))
    return _rebind(lp, state, items, {}, share)


def _rebind(
    lp: LoweredData,
    state: _Bound,
    items: list[tuple[str | None, list[Data], Any]],
    values: dict[str, Any],
    share: bool = True,
) -> LoweredData:
    """The rebinding of ``items`` (a name or None, the data nodes it replaces, the new value) in
    ``lp`` (its state relative to its tree ``state``); ``values``: the names given, for messages."""
    tree = state.tree
    by_name, given, numbers = dict(state.by_name), dict(state.given), dict(state.values)
    fresh: set[int] = set()
    renamed, replayable, signs_changed = False, True, False
    for name, nodes, value in items:
        label = repr(name) if name else "a data value"
        arr = _numbers(value, nodes[0])
        if arr is None:  # (a dask array: the general path reads it in row blocks)
            replayable = False
            arr = value
        if tuple(arr.shape) != tuple(nodes[0].shape):
            raise ModelError(
                f"new data for {label} has shape {tuple(arr.shape)}; the lowering was built for {nodes[0].shape}",
                nodes[0].span,
                "rebind data of the same shape, or lower the model with the new data",
            )
        if replayable and not _finite(arr):
            raise ModelError(f"new data for {label} has NaN or infinite entries", nodes[0].span)
        if replayable and any(_sign_lost(d, arr) for d in nodes):
            signs_changed = True
        renamed = renamed or frame_names(value)[1] is not None
        if name:
            by_name[name] = value  # (a DataFrame keeps its column names)
        for d in nodes:
            numbers[d.uid], given[d.uid] = arr, (d, value)
            fresh.add(d.uid)
    problem = shallow_copy(lp.problem)
    problem.objective = _BoundObjective(tree.objective, given)
    if renamed:  # the coordinates' names are read again from the new data's
        problem.__dict__.pop("_coordinate_names", None)
    if signs_changed:  # the convexity proof may have read a sign the new data no longer has
        why = problem.convexity_error()
        if why is not None:
            names = ", ".join(repr(n) for n in values) or "the rebound data"
            raise type(why)(
                f"with the new data for {names}, {why.message}",
                why.span,
                "the lowering's convexity rests on the sign of its data (weights >= 0, say): rebind data of the same "
                "sign, or lower the model with the new data to see where it fails",
            )
    if lp.precision is not None or getattr(lp, "spca", None) is not None or lp.design is None:
        return type(lp)(problem, lp.budget)  # the forms read their matrix at lowering: lower again
    binding = Binding(numbers, fresh, given, tree.leaves, tree.plans)
    comp = decompose(tree.root, lp.layout, binding.value) if replayable else None
    design = lp.design.rebound(comp, binding) if comp is not None else None
    if design is None:
        return _lowered_again(lp, problem)
    out = shallow_copy(lp)
    out.problem = problem
    out.__dict__.pop("objective", None)  # (the new tree, on first use: LoweredData.__getattr__)
    out.ev = Evaluator(tree.root, lp.layout, binding.memo)
    out._bound = _Bound(tree, by_name, numbers, given)
    _new_numbers(lp, out, design, tree, share)
    return out


def _sign_lost(node: Data, arr: Any) -> bool:
    """Whether the new numbers lack the sign the node's old ones had (nonnegative or nonpositive: what
    a convexity proof reads of data, model/dcp.value_sign); a node of unknown sign has none to lose.
    (A dense array: one reduction, the one side the old sign needs.)"""
    old = node.sign
    if old not in (NONNEG, NONPOS):
        return False
    if type(arr) is np.ndarray and arr.size:
        return not (arr.min() >= 0.0 if old == NONNEG else arr.max() <= 0.0)
    return value_sign(arr) != old


def _finite(arr: Any) -> bool:
    """Whether every entry is finite (a sparse matrix: its stored entries)."""
    return bool(np.isfinite(arr.data if sp.issparse(arr) else arr).all())


def _numbers(value: Any, node: Data) -> Any:
    """The numbers a new value gives a data node (as :class:`Data` holds them: float64, a sparse
    matrix in CSR, a frame's values), or None for a dask array (read in row blocks)."""
    if type(value) is np.ndarray and value.dtype == np.float64:  # (as Data holds it already)
        return value
    if isinstance(value, Data):
        value = value.value
    value = frame_names(value)[0]
    if is_dask_array(value):
        return None
    return data_value(value, node.name, node.span)


def _state(lp: LoweredData) -> _Bound:
    """``lp``'s data relative to the tree its design was made from (for a lowering made from a
    model: its own tree, read here once)."""
    got = lp.__dict__.get("_bound")
    if got is None:
        model = lp.problem
        in_constraints: set[str] = set()
        for c in model.constraints:
            for v in vars(c).values():
                if isinstance(v, Expr):
                    in_constraints |= set(data_named(v))
        read: set[int] = set()
        for c in model.constraints:
            for v in vars(c).values():
                if isinstance(v, Expr):
                    read |= {d.uid for d in v.walk() if isinstance(d, Data)}
        nodes = {d.uid: d for d in lp.objective.walk() if isinstance(d, Data)}
        tree = _Tree(
            lp.objective,
            model.objective,
            data_named(lp.objective),
            in_constraints,
            nodes,
            read,
            kernels=lean.family(lp),
        )
        got = lp._bound = _Bound(tree, {}, {}, {})
    return got


def _lowered_again(lp: LoweredData, problem: Any) -> LoweredData:
    """The general path: the model with the new data lowered again on ``lp``'s layout and sets."""
    expr = problem.objective.expr
    comp = decompose(expr, lp.layout)
    if comp is None:  # (the same tree with other numbers has the same form)  # pragma: no cover
        return type(lp)(problem, lp.budget)
    out = shallow_copy(lp)
    out.problem = problem
    out.objective = expr
    out.ev = Evaluator(expr, lp.layout)
    out.__dict__.pop("_bound", None)  # (its own tree: read at its next rebinding)
    _new_numbers(lp, out, Design(comp, lp.layout))
    return out


def _new_numbers(
    lp: LoweredData, out: LoweredData, design: Design, tree: _Tree | None = None, share: bool = True
) -> None:
    """``out`` takes ``design``: a new oracle, empty caches of the numbers, the relaxation carried
    and the kernel's arrays rewritten in place. With the ``tree`` of a replayed rebinding, from what
    the lowerings rebound from it share: the kernel problems of the family, and the relaxations of
    the latest one when ``lp`` has none (``lp`` rebound again and again, never solved itself)."""
    out.design = design
    out.oracle = Oracle(out.ev, design, lp.layout)
    out.forget_numbers()
    latest = tree.latest() if tree is not None and tree.latest is not None else None
    carry_relaxations(lp if lp.bound_cache or latest is None else latest, out)
    if share:
        lean.move(lp, out, tree.kernels if tree is not None else None)
    if tree is not None:
        tree.latest = weakref.ref(out)
