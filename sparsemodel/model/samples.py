"""The rows of a model: the same objective on a subset of the samples, and its data term.

Cross-validation and the information criteria need two things from an objective written for all n
samples (:mod:`sparsemodel.workflows.select`):

* the same model on a subset of the rows -- :func:`rebind_rows` rebuilds the expression tree with
  every *sample* data node (a data node whose leading dimension is the number of samples n) replaced
  by its rows; means, weights and labels follow, params and other data stay;
* its data term -- :func:`split_data_term` separates the top-level additive terms that read sample
  data (the loss) from those that do not (a ridge ``lam * sum_squares(w)``, which belongs to
  training only): the held-out loss of a fold is the data term on the held-out rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ModelError, ShapeError
from . import atoms as A
from .arith import Add, Concat, Div, Index, MatMul, Mul, Neg, Transpose
from .expr import Data, Expr, Parameter, Variable


def sample_nodes(e: Expr, n: int) -> list[Data]:
    """The data nodes of ``e`` with n rows (their leading dimension is the sample axis)."""
    return [d for d in e.walk() if isinstance(d, Data) and d.ndim >= 1 and d.shape[0] == n]


def reads_samples(e: Expr, nodes: set[int]) -> bool:
    return any(d.uid in nodes for d in e.walk())


def rebuild(node: Expr, args: list[Expr]) -> Expr:
    """The node applied to new arguments (same operation, options and span)."""
    span = node.span
    if isinstance(node, A.Atom):  # every atom, with its parameters (huber's M, an axis, a func)
        return node.rebuild(args, span=span)
    if isinstance(node, Index):
        return Index(args[0], node.key, span=span)
    if isinstance(node, (Neg, Transpose)):
        return type(node)(args[0], span=span)
    if isinstance(node, (Add, Mul, MatMul)):  # Sub, Div: subclasses
        return type(node)(args[0], args[1], span=span)
    raise ModelError(f"cannot rebuild {type(node).__name__} on a subset of the samples")  # pragma: no cover


def rebind_rows(e: Expr, nodes: list[Data], rows: np.ndarray, made: dict[int, Data] | None = None) -> Expr:
    """``e`` with each data node of ``nodes`` replaced by its rows ``rows`` (the other leaves and
    every unchanged subtree shared; ``made``, when given, receives the new node of each uid). A
    shape error means that a node with n rows was not on the sample axis (for example weights of
    length p = n): it is reported with the node's name."""
    rows = np.asarray(rows, dtype=np.int64)
    new = {d.uid: d.take_rows(rows) for d in nodes}
    if made is not None:
        made.update(new)
    try:
        return replace_data(e, new)
    except ShapeError as exc:
        names = ", ".join(sorted({d.name or "a data value" for d in nodes}))
        raise ModelError(
            f"cannot take a subset of the samples of this model: with the rows of {names} subset, {exc.message}",
            exc.span,
            "every data value with as many rows as there are samples is taken as sample data; rename the "
            "problem so that other data (weights over coordinates, a square matrix) has another size, "
            "or choose k by an information criterion",
        ) from None


def subset_scale(e: Expr, nodes: list[Data], n: int) -> int | None:
    """How the data term ``e`` on a subset R of the rows follows from its per-sample values on all
    n rows (:class:`~sparsemodel.objective.samplewise.SampleValues` of ``e``: e = const + sum_i l_i):

    * 0 -- e on R (:func:`rebind_rows`) is const + sum_{i in R} l_i for every R: a sum over the samples
      with a fixed scale (``sum(w * square(X @ w - y)) / (2 * 100)``, as the estimators write theirs);
    * 1 -- it is const + (n / |R|) sum_{i in R} l_i: a mean over the samples (``mean(logistic(...))``);
    * None -- no such reading is proved from the tree (then the subset's term is rebuilt and read
      again).

    Proved from the tree alone, and conservatively: at the top, sums and differences of the terms,
    scaled by scalars that read no sample data, and constants that read none; each term a ``sum``,
    ``sum_squares`` or ``mean`` over every entry of a *sample-local* expression (:func:`row_local`:
    its leading axis the samples, its row i reading row i of the sample data only) that is not
    constant and has no additive constant inside (sum(z + 1) counts the rows); the sums all of
    one kind (sum or mean). Centring inside the loss (``X - mean(X, axis=0)``), a reduction or a
    transpose across the samples, weights that are not per sample, or anything else the rules do
    not know give None."""
    ids = {d.uid for d in nodes}
    kinds: set[int] = set()

    def reads(x: Expr) -> bool:
        return reads_samples(x, ids)

    def scalar(x: Expr) -> bool:
        return x.is_constant() and x.shape == () and not reads(x)

    def top(x: Expr) -> bool:
        if x.is_constant():
            return not reads(x)
        if isinstance(x, Add):  # Sub too
            return top(x.args[0]) and top(x.args[1])
        if isinstance(x, Neg):
            return top(x.args[0])
        if isinstance(x, Div):
            return scalar(x.args[1]) and top(x.args[0])
        if isinstance(x, Mul):
            a, b = x.args
            return (scalar(a) and top(b)) or (scalar(b) and top(a))
        if isinstance(x, A.sum_squares):
            kinds.add(0)
            return _rows_of(x.args[0], n) and row_local(x.args[0], ids, n)
        if isinstance(x, A.sum) and x.axis is None:  # (mean: a subclass)
            kinds.add(1 if isinstance(x, A.mean) else 0)
            return _rows_of(x.args[0], n) and entries(x.args[0])
        return False

    def entries(x: Expr) -> bool:
        """x, summed over every entry, is a sum over its rows of per-row values: not constant, no
        additive constant, each loss or linear piece sample-local."""
        if x.is_constant():
            return False
        if isinstance(x, Add):
            a, b = x.args
            return not a.is_constant() and not b.is_constant() and entries(a) and entries(b)
        if isinstance(x, Neg):
            return entries(x.args[0])
        if isinstance(x, Div):
            return scalar(x.args[1]) and entries(x.args[0])
        if isinstance(x, Mul):  # a per-sample weight (or a scalar) times a piece
            a, b = x.args
            c, v = (a, b) if a.is_constant() else (b, a)
            return c.is_constant() and _broadcasts_per_row(c, v, n, reads(c)) and row_local(c, ids, n) and entries(v)
        return row_local(x, ids, n)  # a loss of a sample-local argument, or an affine piece

    kinds_ok = top(e)
    return kinds.pop() if kinds_ok and len(kinds) == 1 else None


def row_local(x: Expr, ids: set[int], n: int) -> bool:
    """Whether row i of ``x`` reads row i of the sample data (the data nodes of uids ``ids``, n rows)
    and no other row, for every i: ``x`` reads no sample data, or its leading axis is the samples and
    it is built of sample data nodes; sums, products and elementwise atoms whose operands are either
    sample-local with the same axes or free of sample data and broadcast the same values to every
    row; ``A @ B`` with A a sample-local matrix and B free of sample data; indexing that keeps every
    row; negation; reductions along a later axis."""
    reads: dict[int, bool] = {}
    local: dict[int, bool] = {}
    for node in x.walk():  # (children before their parents)
        if node.uid in reads:
            continue
        r = node.uid in ids if isinstance(node, Data) else any(reads[a.uid] for a in node.args)
        reads[node.uid] = r
        local[node.uid] = not r or (
            _rows_of(node, n) and all(local[a.uid] for a in node.args) and _local_node(node, ids, n, reads)
        )
    return local[x.uid]


def _local_node(node: Expr, ids: set[int], n: int, reads: dict[int, bool]) -> bool:
    """One node that reads sample data, has n rows and whose arguments are sample-local: local itself."""
    if isinstance(node, Data):
        return True  # (a sample node)
    if isinstance(node, (Add, Mul, A.Elementwise)):  # Sub, Div; an elementwise atom of its arguments
        return all(_broadcasts_per_row(a, node, n, reads[a.uid]) for a in node.args)
    if isinstance(node, Neg):
        return True
    if isinstance(node, MatMul):
        a, b = node.args
        return a.ndim == 2 and reads[a.uid] and not reads[b.uid]
    if isinstance(node, Index):
        first = node.key[0] if node.key else slice(None)
        return isinstance(first, slice) and range(*first.indices(n)) == range(n)
    if isinstance(node, (A.sum, A.logsumexp)):  # (mean: a subclass of sum)
        return node.axis is not None and node.axis % node.args[0].ndim >= 1
    return False


def _rows_of(x: Expr, n: int) -> bool:
    """x has the sample axis first (n rows)."""
    return x.ndim >= 1 and x.shape[0] == n


def _broadcasts_per_row(c: Expr, x: Expr, n: int, sample: bool) -> bool:
    """c, combined with x (n rows) entry by entry (a product, a sum, an elementwise atom's argument),
    meets each row of x with its own row (``sample``: c reads the sample data, and has the rows on the
    same axes) or with the same values for every row (c free of sample data, with fewer axes than x
    or one row)."""
    if sample:
        return _rows_of(c, n) and c.ndim == x.ndim
    return c.ndim < x.ndim or c.shape[0] == 1


def data_named(e: Expr) -> dict[str, list[Data]]:
    """The data nodes of ``e`` by name (unnamed data is left out)."""
    out: dict[str, list[Data]] = {}
    for d in e.walk():
        if isinstance(d, Data) and d.name:
            out.setdefault(d.name, []).append(d)
    return out


def rebind_data(e: Expr, values: dict[str, object]) -> Expr:
    """``e`` with every data node named in ``values`` replaced by that value (another sample of the
    same columns: a held-out set, a new replication's draw). Constants stay as written: a
    ``/ (2 * n)`` written with the n of the original data keeps it."""
    named = data_named(e)
    new: dict[int, Data] = {}
    for name, value in values.items():
        for d in named.get(name, []):
            new[d.uid] = rebound_node(d, value)
    try:
        return replace_data(e, new)
    except ShapeError as exc:
        raise ModelError(
            f"the model does not fit the new values of {', '.join(sorted(values))}: {exc.message}",
            exc.span,
            "give data with the columns (trailing dimensions) of the data the model was written for",
        ) from None


def rebound_node(d: Data, value: object) -> Data:
    """The data node that takes ``d``'s place with ``value`` (name, place and kind kept; a
    :class:`Data` given is used as it is, named after ``d`` when it has no name)."""
    if isinstance(value, Data):
        value.name = value.name or d.name
        return value
    return Data(value, name=d.name, span=d.span, kind=d.kind)


class Binding:
    """New values of some data nodes of one tree (a rebinding, lowering/rebind.py), by the nodes'
    uids: ``values`` every node rebound so far, the numbers its computations read (a sparse matrix
    in CSR, a frame's values); ``fresh`` the nodes this rebinding changed; ``given`` what the user
    passed for each node (a frame keeps its column names). Parameters count as changed (their
    values may have moved since the lowering). :meth:`value` gives a constant sub-expression's
    value with the new data (each computed once), :meth:`reads` whether a sub-expression reads
    what changed, :meth:`tree` the sub-expression rebuilt with new data nodes. ``leaves`` caches,
    per node, the data nodes below it and whether a parameter is (shared by every rebinding of the
    tree)."""

    def __init__(
        self,
        values: dict[int, Any],
        fresh: set[int],
        given: dict[int, tuple[Data, Any]],
        leaves: dict[int, tuple[frozenset[int], bool]],
        plans: dict[int, list[tuple[Expr, bool]]] | None = None,
    ):
        self.values = values
        self.fresh = fresh
        self.given = given
        self.memo: dict[int, Any] = dict(values)  # uid -> value of a node with the new data
        self._leaves = leaves
        self._plans = plans if plans is not None else {}
        self._nodes: dict[int, Data] = {}

    def leaves(self, e: Expr) -> tuple[frozenset[int], bool]:
        got = self._leaves.get(e.uid)
        if got is None:
            nodes = list(e.walk())
            got = (frozenset(n.uid for n in nodes if isinstance(n, Data)), any(isinstance(n, Parameter) for n in nodes))
            self._leaves[e.uid] = got
        return got

    def reads(self, e: Expr) -> bool:
        """Whether ``e`` reads data this rebinding changed (or a parameter)."""
        data, param = self.leaves(e)
        return param or not self.fresh.isdisjoint(data)

    def value(self, e: Expr) -> Any:
        """The value of the constant sub-expression ``e`` with the new data."""
        got = self.memo.get(e.uid, _MISSING)
        if got is _MISSING:
            got = self.memo[e.uid] = e.constant_value(self.memo)
        return got

    def at_zero(self, e: Expr) -> Any:
        """The value of ``e`` (affine: an offset) with every variable at zero and the new data. A
        subtree that is zero at the origin whatever its data (:func:`zero_at_origin`: ``X @ w``,
        ``w[0]``, their sums) is not evaluated: its value is zeros of its shape; the order of the
        rest is made once per tree (``plans``, shared by every rebinding)."""
        plan = self._plans.get(e.uid)
        if plan is None:
            plan = self._plans[e.uid] = _zero_plan(e)
        vals: dict[int, Any] = {}
        memo = self.memo
        for n, zero in plan:
            if n.uid in memo:
                vals[n.uid] = memo[n.uid]
            elif zero:
                vals[n.uid] = np.zeros(n.shape) if n.shape else 0.0
            else:
                vals[n.uid] = n.forward([vals[a.uid] for a in n.args])
        return vals[e.uid]

    def tree(self, e: Expr) -> Expr:
        """``e`` with every rebound data node below it replaced by a node of its new value."""
        new = {}
        for uid in self.leaves(e)[0] & self.given.keys():
            if uid not in self._nodes:
                self._nodes[uid] = rebound_node(*self.given[uid])
            new[uid] = self._nodes[uid]
        return replace_data(e, new)


_MISSING = object()

_LINEAR = (Add, Neg, Transpose, Index, Concat, A.sum, A.trace)  # zero at the origin when every argument is


def zero_at_origin(e: Expr, known: dict[int, bool] | None = None) -> bool:
    """Whether ``e`` is zero whatever its data when every variable is zero, read off its structure
    alone: a variable; a sum, negation, transpose, index, concatenation, ``sum``/``mean`` or trace
    of such; a product (``*``, ``@``, ``/``) whose other factors are constant and one factor such.
    False for anything else (its value is then computed)."""
    known = {} if known is None else known
    for n in e.walk():
        if n.uid in known:
            continue
        args = [known[a.uid] for a in n.args]
        if isinstance(n, Variable):
            z = True
        elif isinstance(n, Div):
            z = args[0] and n.args[1].is_constant()
        elif isinstance(n, (Mul, MatMul)):
            z = any(args) and all(a or x.is_constant() for a, x in zip(args, n.args))
        elif isinstance(n, _LINEAR) and n.args:
            z = all(args)
        else:
            z = False
        known[n.uid] = z
    return known[e.uid]


def _zero_plan(e: Expr) -> list[tuple[Expr, bool]]:
    """``e``'s nodes in the order :meth:`Binding.at_zero` computes them, each with whether it is zero
    at the origin (:func:`zero_at_origin`); the nodes below a zero one are left out."""
    known: dict[int, bool] = {}
    zero_at_origin(e, known)
    plan: list[tuple[Expr, bool]] = []
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, done = stack.pop()
        if done:
            plan.append((node, known[node.uid]))
            continue
        if node.uid in seen:
            continue
        seen.add(node.uid)
        stack.append((node, True))
        if not known[node.uid]:
            for a in reversed(node.args):
                if a.uid not in seen:
                    stack.append((a, False))
    return plan


def replace_data(e: Expr, new: dict[int, Data]) -> Expr:
    """``e`` with the data node of uid u replaced by ``new[u]`` (every unchanged subtree shared); a
    :class:`~sparsemodel.errors.ShapeError` when a replaced node does not fit its place."""
    ids = set(new)
    done: dict[int, Expr] = {}
    for node in e.walk():
        if node.uid in ids:
            done[node.uid] = new[node.uid]
            continue
        if not node.args:
            done[node.uid] = node
            continue
        args = [done[a.uid] for a in node.args]
        if all(a is b for a, b in zip(args, node.args)):
            done[node.uid] = node
            continue
        done[node.uid] = rebuild(node, args)
    return done[e.uid]


def split_data_term(e: Expr, nodes: list[Data]) -> tuple[Expr | None, Expr | None]:
    """(data term, the rest) of a scalar objective: its top-level additive terms (through +, -,
    unary -, and scaling by scalar constants) that read sample data, and the others."""
    ids = {d.uid for d in nodes}

    def scalar(x: Expr) -> bool:
        return x.is_constant() and x.shape == ()

    def combine(a: Expr | None, b: Expr | None, op: type) -> Expr | None:
        if a is None:
            return b if op is Add else (Neg(b) if b is not None else None)
        if b is None:
            return a
        return op(a, b)

    def go(x: Expr) -> tuple[Expr | None, Expr | None]:
        if isinstance(x, Add):  # Sub too
            op = type(x)
            (da, ra), (db, rb) = go(x.args[0]), go(x.args[1])
            return combine(da, db, op), combine(ra, rb, op)
        if isinstance(x, Neg):
            d, r = go(x.args[0])
            return (Neg(d) if d is not None else None), (Neg(r) if r is not None else None)
        if isinstance(x, Mul) and not isinstance(x, Div) and (scalar(x.args[0]) or scalar(x.args[1])):
            c, inner = (x.args[0], x.args[1]) if scalar(x.args[0]) else (x.args[1], x.args[0])
            d, r = go(inner)
            return (Mul(c, d) if d is not None else None), (Mul(c, r) if r is not None else None)
        if isinstance(x, Div) and scalar(x.args[1]):
            d, r = go(x.args[0])
            c = x.args[1]
            return (Div(d, c) if d is not None else None), (Div(r, c) if r is not None else None)
        return (x, None) if reads_samples(x, ids) else (None, x)

    return go(e)


__all__ = [
    "Binding",
    "data_named",
    "rebind_data",
    "rebind_rows",
    "rebound_node",
    "rebuild",
    "replace_data",
    "sample_nodes",
    "split_data_term",
]
