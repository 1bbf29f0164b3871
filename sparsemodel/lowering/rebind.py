"""Solve again without lowering again: a lowered problem with other data of the same shape bound to
its names (splits, replications, bootstrap samples), the way cvxpy's parameters avoid recompiling.

:func:`rebind` keeps what does not depend on the data -- the layout, the constraint sets with their
bounds, the recognized form of the objective -- reads the composite form's numbers from the new
data, and writes them into the lean kernel's arrays in place (no allocation, the compiled problem
object reused; its Gram rows and start forgotten). The rebound lowering solves exactly the model
with the new data (tests/lowering/test_rebind.py: the same answers as lowering that model afresh).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelError
from ..model.expr import Expr
from ..model.objective import Objective
from ..model.samples import data_named, rebind_data
from ..objective.design import Design
from ..objective.evaluator import Evaluator
from ..objective.oracle import Oracle
from ..objective.structure import decompose
from ..util import frame_names
from . import lean
from .bound import carry_relaxations

if TYPE_CHECKING:
    from .data import LoweredData


def rebind(lp: LoweredData, values: dict[str, Any]) -> LoweredData:
    """``lp``'s lowering of its model with the objective's data named in ``values`` replaced by
    arrays of the same shapes. Located errors for an unknown name, a name the constraints read
    (their sets are kept: lower the new model instead), another shape, or a value that is not finite.
    The model's other lowerings are left as they were; ``lp`` itself should not be solved again
    (its kernel arrays now hold the new data: it is rebuilt if it is)."""
    model = lp.problem
    named = data_named(model.objective.expr)
    in_constraints: set[str] = set()
    for c in model.constraints:
        for v in vars(c).values():
            if isinstance(v, Expr):
                in_constraints |= set(data_named(v))
    new: dict[str, Any] = {}
    renamed = False
    for name, value in values.items():
        nodes = named.get(name)
        if not nodes:
            raise ModelError(
                f"the objective reads no data named {name!r}",
                hint=f"data of the objective: {', '.join(sorted(named)) or '(none named)'}",
            )
        if name in in_constraints:
            raise ModelError(
                f"{name!r} is read by a constraint: its set was built from it, so new values need a new lowering",
                nodes[0].span,
                "lower the model with the new data instead (problem.lower())",
            )
        arr = np.asarray(value, dtype=float)
        old = nodes[0].value
        if arr.shape != np.shape(old):
            raise ModelError(
                f"new data for {name!r} has shape {arr.shape}; the lowering was built for {np.shape(old)}",
                nodes[0].span,
                "rebind data of the same shape, or lower the model with the new data",
            )
        if not np.all(np.isfinite(arr)):
            raise ModelError(f"new data for {name!r} has NaN or infinite entries", nodes[0].span)
        named_axes = frame_names(value)[1] is not None
        new[name] = value if named_axes else arr  # (a DataFrame keeps its column names)
        renamed = renamed or named_axes
    ob = model.objective
    objective = Objective(rebind_data(ob.stated, new), ob.span, ob.sense)
    problem = copy.copy(model)
    problem.objective = objective
    if renamed:  # the coordinates' names are read again from the new data's
        problem.__dict__.pop("_coordinate_names", None)
    if lp.precision is not None or getattr(lp, "spca", None) is not None or lp.design is None:
        return type(lp)(problem, lp.budget)  # the forms read their matrix at lowering: lower again
    expr = objective.expr
    out = copy.copy(lp)
    out.problem = problem
    out.objective = expr
    out.ev = Evaluator(expr, lp.layout)
    comp = decompose(expr, lp.layout)
    if comp is None:  # (the same tree with other numbers has the same form)  # pragma: no cover
        return type(lp)(problem, lp.budget)
    out.design = Design(comp, lp.layout)
    out.oracle = Oracle(out.ev, out.design, lp.layout)
    out.forget_numbers()
    carry_relaxations(lp, out)
    lean.move(lp, out)
    return out
