"""The expression tree: the one model representation every front end produces.

Nodes know their shape (NumPy broadcasting rules), their source span (when they came from a
model file), their DCP curvature and sign, how to print themselves, and their numeric
semantics: ``forward`` (value from the children's values) and ``vjp`` (vector-Jacobian product,
for reverse-mode gradients). The evaluator in :mod:`sparsemodel.objective.evaluator` orchestrates
these over the tree; solvers never see nodes."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ConstraintError, DataError, ModelError, ShapeError, Span
from ..util import frame_names, is_dask_array
from .dcp import AFFINE, ANYSIGN, CONCAVE, CONSTANT, CONVEX, NONNEG, NONPOS, Shape, _ids, value_sign


def _operand(e: Expr, prec: int) -> str:
    return f"({e})" if e.precedence < prec else str(e)


def broadcast_shapes(a: Shape, b: Shape, op: str, left: Expr, right: Expr, span: Span | None) -> Shape:
    prec = 10 if op in "+-" else 20

    def text() -> str:  # only for a refusal: the text of a long chain costs its length at every link
        return f"{_operand(left, prec)} {op} {_operand(right, prec + 1)}"

    try:
        shape = tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise ShapeError(
            f"shapes {fmt_shape(a)} and {fmt_shape(b)} do not broadcast in {text()}",
            span,
            "elementwise operators follow NumPy broadcasting: trailing dimensions must match or be 1",
        ) from None
    refuse_vector_meets_line(left, right, text, span)
    return shape


def refuse_vector_meets_line(left: Expr, right: Expr, text: str | Callable[[], str], span: Span | None) -> None:
    """Refuse an elementwise combination of a vector (1-D, more than one entry) with a matrix of
    one row or one column (shape (m, 1), (1, m) or (1, 1)).

    NumPy broadcasting reads the vector as a row, so against a column ``y`` of shape (n, 1) the
    residual ``X @ w - y`` becomes the (n, n) matrix of every difference, and against a row the
    vector becomes a 1 x n matrix: either way a vector was meant and a matrix is made, which later
    stages either misread or cannot lower. Matrices with more than one row and column still take a
    vector as a row (``X - mu``: centering), and two matrices broadcast freely (a column times a row
    is the outer product). A :class:`ShapeError` naming both shapes and the fix otherwise."""
    vec, line = (left, right) if _is_line(right.shape) else (right, left)
    if not (_is_line(line.shape) and len(vec.shape) == 1 and vec.shape[0] > 1):
        return
    m = line.shape
    if m == (1, 1):
        what, fix, kind = "a 1 x 1 matrix", f"{_operand(line, 90)}[0, 0]", "scalar"
    elif m[1] == 1:
        what, fix, kind = "a column", f"{_operand(line, 90)}[:, 0]", "vector"
    else:
        what, fix, kind = "a row", f"{_operand(line, 90)}[0, :]", "vector"
    made = fmt_shape(tuple(np.broadcast_shapes(vec.shape, m)))
    numpy = "float(y)" if kind == "scalar" else "y[:, 0] or y.ravel()" if what == "a column" else "y[0, :] or y.ravel()"
    if isinstance(line, Data) and not line.name:  # an array handed to the Python builder
        hint = f"give it as a {kind} ({numpy} in NumPy)"
    else:
        hint = f"take it as a {kind}: {fix}"
        if isinstance(line, Data) and line.span is not None:  # declared in a model file
            hint += f", or declare it data {line.name} : {kind} (a file of one {'value' if kind == 'scalar' else 'column or row'} reads as a {kind})"
    if what == "a column" and span is None:
        hint += (
            "; to pair every entry of a column with every entry of a vector on purpose, give the vector as a row matrix"
        )
    if callable(text):
        text = text()
    raise ShapeError(
        f"{text} combines the vector {vec} of shape {fmt_shape(vec.shape)} with {what} {line} of shape "
        f"{fmt_shape(m)}: NumPy broadcasting would make a {made} matrix where a vector was meant",
        span,
        hint,
    )


def _is_line(shape: Shape) -> bool:
    """A matrix of one row or one column."""
    return len(shape) == 2 and 1 in shape


def fmt_shape(s: Shape) -> str:
    return "(" + ",".join(str(d) for d in s) + ("," if len(s) == 1 else "") + ")"


def unbroadcast(g: np.ndarray, shape: Shape) -> np.ndarray:
    """Sum a gradient of a broadcast result back to the operand's shape."""
    g = np.asarray(g)
    if g.shape == shape:
        return g
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for i, d in enumerate(shape):
        if d == 1 and g.shape[i] != 1:
            g = g.sum(axis=i, keepdims=True)
    return g.reshape(shape)


def as_expr(v: Any, span: Span | None = None) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, (bool, np.bool_)):
        raise ModelError(f"a boolean ({v}) cannot be used in an expression", span)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return Constant(float(v), span=span)
    if sp.issparse(v) or isinstance(v, np.ndarray) or isinstance(v, (list, tuple)) or is_dask_array(v):
        return Data(v, span=span)
    if type(v).__module__.split(".")[0] == "pandas" and hasattr(v, "to_numpy"):  # a DataFrame or Series
        return Data(v, span=span)
    raise ModelError(f"cannot use a value of type {type(v).__name__} in a model expression", span)


def dense(v: Any) -> np.ndarray:
    return v.toarray() if sp.issparse(v) else np.asarray(v, dtype=float)


# ---------------------------------------------------------------------- what the operators build
OPERATORS: dict[str, Callable[..., Any]] = {}
"""The constructors behind Expr's operators, by name: ``add sub mul div matmul neg index transpose``
(+ - * / @, unary minus, indexing and .T: the arithmetic nodes of model/arith.py), ``square``
(x ** 2: the atom), ``equality`` and ``bound`` (== and <= / >=: model/constraints). They are defined
above this module, each puts its entries here when it is imported, and the model package imports all
of them (model/__init__.py) before anything builds an expression: expr.py, the floor every node
stands on, imports nothing above it."""


class Expr:
    """Base class of every expression node."""

    # make numpy defer to our reflected operators (ndarray @ Expr -> Expr.__rmatmul__)
    __array_ufunc__ = None
    __array_priority__ = 1000
    precedence = 100  # binding strength for printing; leaves and calls bind tightest

    def __init__(self, args: Iterable[Expr], shape: Shape, span: Span | None = None):
        self.args: tuple[Expr, ...] = tuple(args)
        self.shape: Shape = tuple(int(d) for d in shape)
        self.size = math.prod(self.shape)
        self.span = span
        self.uid = next(_ids)
        self._curv: str | None = None
        self._sign: str | None = None
        self._text: str | None = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (a model sent to a worker): its number stays, this process's counter moves past."""
        self.__dict__.update(state)
        _ids.at_least(self.uid)

    # ---------- structure ----------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def walk(self) -> Iterable[Expr]:
        """All nodes of the subtree, each once, children before parents."""
        seen: set[int] = set()
        order: list[Expr] = []
        stack: list[tuple[Expr, bool]] = [(self, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if node.uid in seen:
                continue
            seen.add(node.uid)
            stack.append((node, True))
            for a in reversed(node.args):
                if a.uid not in seen:
                    stack.append((a, False))
        return order

    def variables(self) -> list[Variable]:
        return [n for n in self.walk() if isinstance(n, Variable)]

    def is_constant(self) -> bool:
        return self.curvature == CONSTANT

    # ---------- DCP ----------
    def _fill(self, attr: str, compute: Any, deps: Any = None) -> Any:
        """A cached per-node attribute, computed bottom-up without recursion (a sum of 10,000
        terms is a chain 10,000 deep), descending only into nodes where it is still missing;
        ``deps(node)`` names the children a node's value reads (default: all)."""
        stack: list[tuple[Expr, bool]] = [(self, False)]
        while stack:
            node, ready = stack.pop()
            if getattr(node, attr) is not None:
                continue
            if ready:
                setattr(node, attr, compute(node))
                continue
            stack.append((node, True))
            for a in node.args if deps is None else deps(node):
                if getattr(a, attr) is None:
                    stack.append((a, False))
        return getattr(self, attr)

    @property
    def curvature(self) -> str:
        if self._curv is None:
            self._fill("_curv", lambda n: n._curvature())
        return self._curv

    @property
    def sign(self) -> str:
        if self._sign is None:
            self._fill("_sign", lambda n: n._sign_of())
        return self._sign

    def __str__(self) -> str:
        """The expression as the model language writes it (computed once per node, bottom-up)."""
        if self._text is None:
            self._fill("_text", lambda n: n._render(), lambda n: n._text_deps())
        return self._text

    def _text_deps(self) -> tuple[Expr, ...]:
        return self.args

    def _render(self) -> str:  # pragma: no cover - every subclass defines it
        raise TypeError(type(self).__name__)

    def _curvature(self) -> str:  # pragma: no cover - every subclass defines it
        raise TypeError(type(self).__name__)

    def _sign_of(self) -> str:
        return ANYSIGN

    def is_convex(self) -> bool:
        return self.curvature in (CONSTANT, AFFINE, CONVEX)

    def is_concave(self) -> bool:
        return self.curvature in (CONSTANT, AFFINE, CONCAVE)

    def curvature_reason(self) -> str:
        """Why this node has the curvature it has (used to explain a refused objective)."""
        return f"{self} is {self.curvature}"

    # ---------- numerics ----------
    def forward(self, vals: list[Any]) -> Any:  # pragma: no cover
        raise TypeError(type(self).__name__)

    def vjp(self, g: np.ndarray, vals: list[Any], out: Any, needs: list[bool]) -> list[np.ndarray | None]:
        """Gradients w.r.t. each argument given the output cotangent ``g`` (None where not needed)."""
        raise TypeError(type(self).__name__)  # pragma: no cover

    def constant_value(self, values: dict[int, Any] | None = None) -> Any:
        """Numeric value of a constant subtree (parameters at their current values); ``values``:
        the value of some of its nodes by uid (a rebinding's new data), which stand for them."""
        if not self.is_constant():
            raise ModelError(f"{self} depends on a variable; a constant was expected here", self.span)
        vals: dict[int, Any] = {}
        for n in self.walk():
            if values is not None and n.uid in values:
                vals[n.uid] = values[n.uid]
                continue
            vals[n.uid] = n.forward([vals[a.uid] for a in n.args])
        return vals[self.uid]

    # ---------- printing ----------
    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self} shape={fmt_shape(self.shape)}>"

    def wrap(self, child: Expr, prec: int | None = None) -> str:
        p = self.precedence if prec is None else prec
        s = str(child)
        return f"({s})" if child.precedence < p else s

    # ---------- operators ----------
    def __add__(self, other: Any) -> Expr:
        return OPERATORS["add"](self, as_expr(other))

    def __radd__(self, other: Any) -> Expr:
        return OPERATORS["add"](as_expr(other), self)

    def __sub__(self, other: Any) -> Expr:
        return OPERATORS["sub"](self, as_expr(other))

    def __rsub__(self, other: Any) -> Expr:
        return OPERATORS["sub"](as_expr(other), self)

    def __mul__(self, other: Any) -> Expr:
        return OPERATORS["mul"](self, as_expr(other))

    def __rmul__(self, other: Any) -> Expr:
        return OPERATORS["mul"](as_expr(other), self)

    def __truediv__(self, other: Any) -> Expr:
        return OPERATORS["div"](self, as_expr(other))

    def __rtruediv__(self, other: Any) -> Expr:
        return OPERATORS["div"](as_expr(other), self)

    def __matmul__(self, other: Any) -> Expr:
        return OPERATORS["matmul"](self, as_expr(other))

    def __rmatmul__(self, other: Any) -> Expr:
        return OPERATORS["matmul"](as_expr(other), self)

    def __neg__(self) -> Expr:
        return OPERATORS["neg"](self)

    def __pos__(self) -> Expr:
        return self

    def __pow__(self, p: Any) -> Expr:
        if p == 2:
            return OPERATORS["square"](self)
        if p == 1:
            return self
        raise ModelError(f"only the power 2 is supported ({self} ** {p}); use exp/log or a func for others")

    def __getitem__(self, key: Any) -> Expr:
        return OPERATORS["index"](self, key)

    @property
    def T(self) -> Expr:
        return OPERATORS["transpose"](self)

    def __hash__(self) -> int:
        return self.uid

    # comparison operators build constraints (see model/constraints)
    def __eq__(self, other: object) -> Any:
        """``sum(w) == 1``: a linear equality, checked when a model takes it. Its truth value is the
        identity test (``a == b`` is true only for one node), so expressions stay usable as
        dictionary keys, set members and in ``in`` / ``list.index`` (model/constraints/linear.py)."""
        if isinstance(other, (bool, np.bool_)) or not isinstance(
            other, (Expr, int, float, np.integer, np.floating, np.ndarray, list, tuple)
        ):
            return NotImplemented
        return OPERATORS["equality"](self, other)

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __le__(self, other: Any) -> Any:
        """``w <= hi`` (or ``lo <= w``, reflected): a box constraint on a variable or a slice of one."""
        return _bound(self, other, "<=")

    def __ge__(self, other: Any) -> Any:
        """``w >= lo``: a box constraint on a variable or a slice of one."""
        return _bound(self, other, ">=")

    def __lt__(self, other: Any) -> Any:
        return refuse_strict(self, "<", other, "<=")

    def __gt__(self, other: Any) -> Any:
        return refuse_strict(self, ">", other, ">=")

    def __bool__(self) -> bool:
        return True


class Leaf(Expr):
    precedence = 100

    @property
    def _text(self) -> str:  # a leaf's text is live: a front end may name it after creation
        return self.__str__()

    @_text.setter
    def _text(self, value: str | None) -> None:
        pass

    def __init__(self, shape: Shape, name: str | None, span: Span | None):
        super().__init__((), shape, span)
        if name is not None and not isinstance(name, str):
            raise ModelError(f"a name is a string; got {name!r}", span, f'write name="{name}"')
        self.name = name

    def __str__(self) -> str:
        return self.name or f"<{type(self).__name__.lower()} {fmt_shape(self.shape)}>"


class Variable(Leaf):
    """An optimization variable: a vector, a matrix, or a symmetric matrix."""

    def __init__(
        self,
        shape: int | Iterable[int] = (),
        name: str | None = None,
        symmetric: bool = False,
        span: Span | None = None,
    ):
        shp = _dims(shape, name, span)
        if any(d <= 0 for d in shp):
            raise ShapeError(f"variable {name or ''} has dimensions {fmt_shape(shp)}; each must be positive", span)
        if symmetric and (len(shp) != 2 or shp[0] != shp[1]):
            raise ShapeError(f"a symmetric variable must be square; {name} has shape {fmt_shape(shp)}", span)
        super().__init__(shp, name or f"x{next(_ids)}", span)
        self.symmetric = symmetric
        self.value: np.ndarray | None = None

    def _curvature(self) -> str:
        return AFFINE

    def forward(self, vals: list[Any]) -> Any:  # values are injected by the evaluator
        raise TypeError("variables are evaluated by the evaluator")


def _dims(shape: Any, name: str | None, span: Span | None) -> tuple[int, ...]:
    """A variable's shape from an int or a sequence of ints (a ShapeError otherwise)."""
    items = shape if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for d in items:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise ShapeError(
                f"variable {name or ''} has the dimension {d!r}; dimensions are positive integers",
                span,
                "write Variable(5), Variable((3, 4)) or Variable([3, 4])",
            )
        out.append(int(d))
    return tuple(out)


class Data(Leaf):
    """Data bound to a name (a matrix, vector or scalar; dense or scipy.sparse; a pandas DataFrame
    is taken as its values with its column names).

    ``axis_names``: per axis, the names of its positions (a CSV header names a matrix's columns)
    or None; they label results (:mod:`sparsemodel.model.names`) and never change a solve."""

    def __init__(
        self,
        value: Any,
        name: str | None = None,
        span: Span | None = None,
        kind: str | None = None,
        names: Any = None,
    ):
        if type(value).__module__.split(".")[0] == "pandas":
            value, got = frame_names(value)
            names = names if names is not None else got
        if is_dask_array(value):
            if value.ndim >= 2:  # a chunked matrix stays lazy: checked in one pass, never loaded whole
                self._init_dask(value, name, span, kind)
                return
            value = value.compute()  # a vector of length n lives in memory (the driver's residuals)
        v = data_value(value, name, span)
        vals = v.data if sp.issparse(v) else v
        bad = ~np.isfinite(vals)
        if bad.any():
            nan, inf = int(np.isnan(vals).sum()), int(bad.sum() - np.isnan(vals).sum())
            what = " and ".join(t for t in (f"{nan} NaN" if nan else "", f"{inf} infinite" if inf else "") if t)
            raise DataError(
                f"data {name or f'of shape {fmt_shape(v.shape)}'} holds {what} value(s) (first at index "
                f"{tuple(int(i) for i in np.argwhere(bad)[0])})",
                span,
                "remove or impute the missing values before building the model",
            )
        super().__init__(v.shape, name, span)
        self.value = v
        self.kind = kind
        self.axis_names = _axis_names(names, v.shape)

    def _init_dask(self, value: Any, name: str | None, span: Span | None, kind: str | None) -> None:
        """A dask matrix: float64, NaN/inf and the sign from one lazy pass (no copy in memory)."""
        import dask
        import dask.array as da

        if value.dtype.kind not in "biuf":
            raise DataError(
                f"data {name or ''} is a dask array of {value.dtype} values, not numbers",
                span,
                "give a numeric dask array",
            )
        v = value.astype(float) if value.dtype != np.float64 else value
        parts = dask.compute(*[dask.delayed(_block_summary)(b) for b in v.to_delayed().ravel()])
        n_nan, n_bad = sum(r[0] for r in parts), sum(r[1] for r in parts)  # one pass, one task per block
        lo, hi = min(r[2] for r in parts), max(r[3] for r in parts)
        if n_bad:
            row = int(np.argmax(np.asarray((~da.isfinite(v)).any(axis=1).compute())))
            col = int(np.argmax(~np.isfinite(np.asarray(v[row].compute()))))
            first = [(row, col)]
            what = " and ".join(
                t for t in (f"{n_nan} NaN" if n_nan else "", f"{n_bad - n_nan} infinite" if n_bad > n_nan else "") if t
            )
            raise DataError(
                f"data {name or f'of shape {fmt_shape(v.shape)}'} holds {what} value(s) (first at index "
                f"{tuple(int(i) for i in first[0])})",
                span,
                "remove or impute the missing values before building the model",
            )
        super().__init__(v.shape, name, span)
        self.value = v
        self.kind = kind
        self.axis_names = (None,) * v.ndim
        lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
        self._sign = NONNEG if lo >= 0 else NONPOS if hi <= 0 else ANYSIGN

    def take_rows(self, rows: np.ndarray) -> Data:
        """The same data on the rows ``rows`` (a training split, a fold, held-out rows): name, place,
        kind and the names of every axis kept (the row names, when there are any, subset too), so
        that a result on a subset of the samples names its coordinates as one on all of them."""
        names = [
            None if n is None else (tuple(np.asarray(n, dtype=object)[rows]) if i == 0 else n)
            for i, n in enumerate(self.axis_names)
        ]
        v = self.value
        if type(v) is np.ndarray and v.dtype == np.float64:  # (its numbers were checked: their rows need not be)
            out = Data.__new__(Data)
            sub = v[rows]
            Leaf.__init__(out, sub.shape, self.name, self.span)
            out.value, out.kind, out.axis_names = sub, self.kind, _axis_names(names, sub.shape)
        else:
            out = Data(v[rows], name=self.name, span=self.span, kind=self.kind, names=names)
        for attr in ("path", "label_text"):  # what a data line added (its file, the text of its codes)
            if hasattr(self, attr):
                setattr(out, attr, getattr(self, attr))
        return out

    @property
    def chunked(self) -> bool:
        """The value is a dask array (held in row blocks, on disk or on a cluster)."""
        return is_dask_array(self.value)

    def _curvature(self) -> str:
        return CONSTANT

    def _sign_of(self) -> str:
        return value_sign(self.value)

    def forward(self, vals: list[Any]) -> Any:
        return self.value


def data_value(value: Any, name: str | None = None, span: Span | None = None) -> Any:
    """An in-memory value as :class:`Data` holds it (float64; a sparse matrix in CSR, a pandas
    frame already taken as its values): a located DataError for complex or non-numeric values."""
    try:
        if np.iscomplexobj(value.data if sp.issparse(value) else value):  # float() would drop the imaginary parts
            raise DataError(f"data {name or ''} holds complex numbers", span, "give real numbers")
        if sp.issparse(value):
            return value.tocsr().astype(float)
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise DataError(
            f"data {name or ''} of type {type(value).__name__} is not numeric",
            span,
            "give numbers: an array or a scipy.sparse matrix",
        ) from None


def _axis_names(names: Any, shape: Shape) -> tuple[tuple[str, ...] | None, ...]:
    """Per axis, the names that fit it (one string per position) or None."""
    out: list[tuple[str, ...] | None] = [None] * len(shape)
    if names is None:
        return tuple(out)
    for i, n in enumerate(list(names)[: len(shape)]):
        if n is not None and len(n) == shape[i]:
            out[i] = tuple(str(x) for x in n)
    return tuple(out)


def _block_summary(B: np.ndarray) -> tuple[int, int, float, float]:
    """(NaN count, non-finite count, min, max) of one block of a dask matrix."""
    B = np.asarray(B, dtype=float)
    if B.size == 0:
        return 0, 0, 0.0, 0.0
    fin = np.isfinite(B)
    if fin.all():
        return 0, 0, float(B.min()), float(B.max())
    vals = B[fin]
    lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 0.0)
    return int(np.isnan(B).sum()), int(B.size - fin.sum()), lo, hi


class Parameter(Leaf):
    """A named constant whose value may change between solves (``param lam = 1e-5``)."""

    def __init__(self, value: Any, name: str | None = None, span: Span | None = None):
        v = _param_value(value, name, span)
        super().__init__(v.shape, name, span)
        self._value = v

    @property
    def value(self) -> np.ndarray:
        return self._value

    @value.setter
    def value(self, v: Any) -> None:
        a = _param_value(v, self.name, self.span)
        if a.shape != self.shape:
            raise ShapeError(f"parameter {self.name} has shape {fmt_shape(self.shape)}; got {fmt_shape(a.shape)}")
        self._value = a
        self._sign = None

    def _curvature(self) -> str:
        return CONSTANT

    def _sign_of(self) -> str:
        return value_sign(self._value)

    def forward(self, vals: list[Any]) -> Any:
        return self._value if self.shape else float(self._value)


def _param_value(value: Any, name: str | None, span: Span | None) -> np.ndarray:
    """A param's value as a float array, or a DataError: it must be finite numbers."""
    who = f"param {name}" if name else "a param"
    try:
        v = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise DataError(f"{who} is given {value!r}, which is not a number", span) from None
    if not np.all(np.isfinite(v)):
        raise DataError(f"{who} is {value!r}; a param must be finite", span)
    return v


class Constant(Leaf):
    def __init__(self, value: Any, span: Span | None = None, text: str | None = None):
        v = np.asarray(value, dtype=float)
        super().__init__(v.shape, None, span)
        self.value = v if v.shape else float(v)
        self.text = text

    def __str__(self) -> str:
        if self.text is not None:
            return self.text
        if not self.shape:
            v = self.value
            return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(v)
        return f"<constant {fmt_shape(self.shape)}>"

    def _curvature(self) -> str:
        return CONSTANT

    def _sign_of(self) -> str:
        return value_sign(self.value)

    def forward(self, vals: list[Any]) -> Any:
        return self.value


def _bound(a: Expr, other: Any, op: str) -> Any:
    if not isinstance(other, (Expr, int, float, np.integer, np.floating, np.ndarray, list, tuple)):
        return NotImplemented  # nnz(w), rank(W), eig(O) answer the reflected comparison
    b = as_expr(other)
    if a.is_constant() and not b.is_constant():
        a, b, op = b, a, (">=" if op == "<=" else "<=")
    return OPERATORS["bound"](a, op, b)


def _join(a: Expr, b: Expr) -> Span | None:
    """The span covering two operands (when both come from the same line of the same source)."""
    sa, sb = a.span, b.span
    if sa is None or sb is None or sa.source is not sb.source:
        return sa or sb
    return Span(sa.source, sa.line, sa.column, sb.end_line, sb.end_column)


def refuse_strict(target: Any, op: str, value: Any, instead: str) -> Any:
    """``nnz(w) < 3``, ``w > 0`` in Python: a constraint error naming the comparison to write
    (Python would otherwise raise a TypeError without a word about the model)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating, np.ndarray, list, tuple, Expr)
    ):
        return NotImplemented
    shown = value if isinstance(value, (int, float, np.integer, np.floating, Expr)) else "..."
    raise ConstraintError(
        f"{target} {op} {shown}: a strict inequality is not a constraint",
        getattr(target, "span", None),
        f"write {target} {instead} {shown} (constraints read nnz(w) <= k, rank(W) <= r, w >= 0, lo <= w <= hi)",
    )


__all__ = [
    "OPERATORS",
    "Expr",
    "Variable",
    "Data",
    "Parameter",
    "Constant",
    "as_expr",
    "data_value",
    "dense",
    "fmt_shape",
    "unbroadcast",
]
