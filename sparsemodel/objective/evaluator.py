"""NumPy lowering: value and gradient of an expression by reverse mode over the tree.

All variables of a problem live in one flat vector ``x`` (see :class:`Layout`). The evaluator
visits the tree once forward (values) and once backward (vector-Jacobian products). Two things
keep the hot loops cheap:

* ``data @ v`` where ``v`` is a variable (or a slice of one) goes through
  :class:`~sparsemodel.objective.operators.DataOperator`, which multiplies only the columns where the
  iterate is nonzero;
* a restricted gradient (``coords=``) asks such products for only the needed columns of
  ``data' @ g``, so a restricted solve on s coordinates costs O(n s), not O(n p).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.arith import Index, MatMul
from ..model.expr import Data, Expr, Variable
from .data import as_operator
from .operators import DataOperator


class Layout:
    """Where each variable sits in the flat vector x (C order within each variable)."""

    def __init__(self, variables: list[Variable]):
        self.variables = list(variables)
        self.offsets: dict[int, int] = {}
        self.slices: dict[int, slice] = {}
        off = 0
        for v in self.variables:
            self.offsets[v.uid] = off
            self.slices[v.uid] = slice(off, off + v.size)
            off += v.size
        self.n = off

    def slice(self, v: Variable) -> slice:
        return self.slices[v.uid]

    def coords(self, v: Variable, local: np.ndarray | None = None) -> np.ndarray:
        """Flat positions in x of (some coordinates of) variable v."""
        o = self.offsets[v.uid]
        return o + (np.arange(v.size) if local is None else np.asarray(local))

    def complement(self, coords: np.ndarray) -> np.ndarray:
        """The flat positions not in ``coords`` (a set's free coordinates), in order."""
        mask = np.ones(self.n, dtype=bool)
        mask[coords] = False
        return np.flatnonzero(mask)

    def locate(self, j: int) -> tuple[str, str]:
        """The variable name and the index (as the language writes it) of flat coordinate j."""
        for v in self.variables:
            sl = self.slices[v.uid]
            if sl.start <= j < sl.stop:
                if not v.shape:
                    return v.name, ""
                idx = np.unravel_index(j - sl.start, v.shape)
                return v.name, "[" + ", ".join(str(int(i)) for i in idx) + "]"
        raise IndexError(j)

    def get(self, x: np.ndarray, v: Variable) -> np.ndarray | float:
        s = x[self.slice(v)]
        return s.reshape(v.shape) if v.shape else float(s[0])

    def unpack(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {v.name: np.array(self.get(x, v)) for v in self.variables}

    def pack(self, values: dict[str, Any]) -> np.ndarray:
        x = np.zeros(self.n)
        for v in self.variables:
            if v.name in values and values[v.name] is not None:
                x[self.slice(v)] = np.asarray(values[v.name], dtype=float).ravel()
        return x

    def symmetrize_grad(self, g: np.ndarray) -> np.ndarray:
        """Project gradient blocks of symmetric variables onto symmetric matrices."""
        for v in self.variables:
            if v.symmetric:
                G = g[self.slice(v)].reshape(v.shape)
                g[self.slice(v)] = ((G + G.T) / 2).ravel()
        return g


def _var_view(e: Expr) -> tuple[Variable, np.ndarray] | None:
    """If e is a variable or a chain of indexing of one: (variable, its flat positions viewed)."""
    if isinstance(e, Variable):
        return e, np.arange(e.size)
    if isinstance(e, Index):
        inner = _var_view(e.args[0])
        if inner is not None:
            return inner[0], inner[1][e.flat_indices()]
    return None


class Evaluator:
    """Value and gradient of ``root`` (any shape) as a function of the flat vector x; ``values``:
    the values of some of its constant nodes by uid (a rebinding's new data,
    :class:`~sparsemodel.model.samples.Binding`), which stand for them."""

    def __init__(self, root: Expr, layout: Layout, values: dict[int, Any] | None = None):
        self.root = root
        self.layout = layout
        self._const_vals: dict[int, Any] = {}
        self.values = values or {}

    def __getattr__(self, name: str) -> Any:
        # the walk of the tree is read on first use: a lowering whose solves run on its design (or a
        # compiled kernel) never evaluates through the tree
        if name in ("order", "pos", "args", "const", "ops"):
            self._walk()
            return self.__dict__[name]
        raise AttributeError(name)

    def _walk(self) -> None:
        root, layout = self.root, self.layout
        self.order = list(root.walk())
        self.pos = {n.uid: i for i, n in enumerate(self.order)}
        self.args = [[self.pos[a.uid] for a in n.args] for n in self.order]
        self.const = [n.is_constant() for n in self.order]
        # products data @ (variable view): evaluated through the data interface
        self.ops: dict[int, tuple[DataOperator, Variable, np.ndarray]] = {}
        for i, n in enumerate(self.order):
            if isinstance(n, MatMul) and isinstance(n.args[0], Data) and n.args[0].ndim == 2:
                view = _var_view(n.args[1])
                if view is not None and n.args[1].ndim == 1:
                    D = self.values.get(n.args[0].uid, n.args[0].value)
                    self.ops[i] = (as_operator(D), view[0], layout.coords(view[0], view[1]))

    def _forward(self, x: np.ndarray) -> list[Any]:
        vals: list[Any] = [None] * len(self.order)
        for i, n in enumerate(self.order):
            if self.const[i] and i in self._const_vals:
                vals[i] = self._const_vals[i]
                continue
            if n.uid in self.values:
                vals[i] = self._const_vals[i] = self.values[n.uid]
                continue
            if isinstance(n, Variable):
                vals[i] = self.layout.get(x, n)
            elif i in self.ops:
                op, _, coords = self.ops[i]
                vals[i] = op.matvec(x[coords])
            else:
                vals[i] = n.forward([vals[j] for j in self.args[i]])
            if self.const[i] and not isinstance(n, Variable):
                self._const_vals[i] = vals[i]
        return vals

    def value(self, x: np.ndarray) -> Any:
        v = self._forward(x)[-1]
        return v

    def vjp(
        self, x: np.ndarray, cot: Any, coords: np.ndarray | None = None, vals: list[Any] | None = None
    ) -> np.ndarray:
        """cot' J(x) as a flat vector of length n (only entries ``coords`` are meaningful if given)."""
        if vals is None:
            vals = self._forward(x)
        n = len(self.order)
        grads: list[Any] = [None] * n
        grads[n - 1] = np.asarray(cot, dtype=float) if np.ndim(cot) else float(cot)
        out = np.zeros(self.layout.n)
        want = None
        if coords is not None:
            want = np.zeros(self.layout.n, dtype=bool)
            want[coords] = True
        for i in range(n - 1, -1, -1):
            g = grads[i]
            if g is None or self.const[i]:
                continue
            node = self.order[i]
            if isinstance(node, Variable):
                sl = self.layout.slice(node)
                out[sl] += np.asarray(g, dtype=float).ravel()
                continue
            if i in self.ops:
                op, var, vcoords = self.ops[i]
                if want is None:
                    out[vcoords] += op.rmatvec(g)
                else:
                    sel = np.flatnonzero(want[vcoords])
                    if sel.size:
                        out[vcoords[sel]] += op.rmatvec(g, sel)
                continue
            child = self.args[i]
            needs = [not self.const[j] for j in child]
            cg = node.vjp(g, [vals[j] for j in child], vals[i], needs)
            for j, gj in zip(child, cg):
                if gj is None or self.const[j]:
                    continue
                grads[j] = gj if grads[j] is None else grads[j] + gj
        return self.layout.symmetrize_grad(out)

    def value_and_grad(self, x: np.ndarray, coords: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        vals = self._forward(x)
        f = float(vals[-1])
        if not np.isfinite(f):
            return f, np.full(self.layout.n, np.nan)
        return f, self.vjp(x, 1.0, coords=coords, vals=vals)
