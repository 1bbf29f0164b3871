"""The escape hatch: ``custom_loss(fun, *args, hvp=None)``, a loss the user computes in Python.

``fun(*values)`` receives the current values of the arguments (each a NumPy array in its
expression's shape, a float for a scalar) and returns ``(value, gradient)``: the gradient as one
array in the shape of the single argument, or a tuple with one array per argument. ``hvp``
(optional) is the Hessian-vector product: ``hvp(*values, *directions)`` returns H times the
directions, in the same form as the gradient. As skscope's objective functions given with their
gradient (skscope's ``test_no_autodiff``), nothing is differentiated for the user.

sparsemodel cannot look inside the function: it takes it as smooth and convex (a nonconvex one gets
a local answer: where its Hessian is indefinite the step sizes use the magnitude of the curvature,
``LoweredProblem.safe_curvature``), and every fact it has is what the two callables give.

* Without ``hvp`` the objective is a general smooth function (no composite form): the first-order
  solvers run on it (``grahtp``, ``fgrahtp``, ``iht``, ``omp``, ``ompr``, ``els``, ``grasp``,
  ``foba``, ``arht``, ``auto`` as its GraHTP start) with L-BFGS restricted solves, and curvature
  estimates (step sizes) from differences of gradients.
* With ``hvp``, and every argument affine, it is a whole-vector loss
  (:class:`~.base.WholeLoss`) of the composite form: Newton restricted solves, and ``auto``'s swap
  search, which reads Hessians.

Neither form is a finite sum over rows (the stochastic solvers refuse it) nor has a cvxpy
counterpart (no ``cvxpy`` restricted method, no ``lasso`` / ``nuclear`` relaxation). A model file
cannot call it (a model file holds no Python code): write the model in Python, or in a Python
model module that the command line loads (``sparsemodel solve model.py``, docs/language.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import ModelError, Span
from ..dcp import CONVEX, NONMONOTONE
from ..expr import fmt_shape
from .base import WholeLoss


class custom_loss(WholeLoss):  # noqa: N801 - the builder's name, like every atom
    """A loss given as Python callables (module docstring): ``custom_loss(fun, w)``,
    ``custom_loss(fun, w, b, hvp=hvp, name="my loss")``."""

    name = "custom_loss"
    curvature_kind = CONVEX
    curvature_assumed = True

    def __init__(
        self,
        fun: Callable[..., Any],
        *args: Any,
        hvp: Callable[..., Any] | None = None,
        name: str | None = None,
        span: Span | None = None,
    ):
        if not callable(fun):
            raise ModelError(
                f"custom_loss needs a function returning (value, gradient) first; got {type(fun).__name__}",
                span,
                "custom_loss(fun, w) with fun(w) -> (f, grad f)",
            )
        if hvp is not None and not callable(hvp):
            raise ModelError(f"custom_loss's hvp must be a function; got {type(hvp).__name__}", span)
        if not args:
            raise ModelError("custom_loss needs the expressions it is a function of", span, "custom_loss(fun, w)")
        self.fun, self.hvp, self.label = fun, hvp, name or getattr(fun, "__name__", "custom_loss")
        super().__init__(*args, span=span)
        self.loss_args = tuple(range(len(self.args)))
        self._last: tuple[bytes, float, np.ndarray] | None = None

    @property
    def params(self) -> dict[str, Any]:
        return {"hvp": self.hvp, "name": self.label}

    def rebuild(self, args: list[Any], span: Span | None = None) -> custom_loss:
        return custom_loss(self.fun, *args, span=span if span is not None else self.span, **self.params)

    def loss_key(self) -> tuple:
        return (type(self), self.fun, self.hvp)

    @property
    def loss_form(self) -> str | None:  # type: ignore[override]
        """A whole-vector loss (Newton, swap search) only when it can say its curvature (``hvp``)."""
        return "whole" if self.hvp is not None else None

    @property
    def sample_count(self) -> int | None:
        return None  # a black box: no rows of data the package knows of

    def monotonicity(self, i: int) -> str:
        return NONMONOTONE

    def _render(self) -> str:
        return f"custom_loss[{self.label}](" + ", ".join(str(a) for a in self.args) + ")"

    def no_conjugate_reason(self) -> str:
        return f"the custom loss {self.label} is a black box: it states no convex conjugate"

    # ------------------------------------------------------------------ calling the user's code
    def _values(self, z: np.ndarray) -> list[Any]:
        out, at = [], 0
        for a in self.args:
            part = z[at : at + a.size]
            at += a.size
            out.append(part.reshape(a.shape).copy() if a.shape else float(part[0]))
        return out

    def _flat(self, parts: Any, what: str) -> np.ndarray:
        """The user's gradient (or Hessian product) for every argument, checked and flattened."""
        if len(self.args) == 1 and not isinstance(parts, (tuple, list)):
            parts = (parts,)
        if not isinstance(parts, (tuple, list)) or len(parts) != len(self.args):
            raise ModelError(
                f"custom_loss {self.label}: its {what} must give one array per argument ({len(self.args)}); got {type(parts).__name__}",
                self.span,
            )
        flat = []
        for a, g in zip(self.args, parts):
            g = np.asarray(g, dtype=float)
            if g.size != a.size:
                raise ModelError(
                    f"custom_loss {self.label}: its {what} for {a} has shape {fmt_shape(g.shape)}, expected {fmt_shape(a.shape)}",
                    self.span,
                    "return the gradient in the shape of the argument",
                )
            flat.append(g.reshape(-1))
        return np.concatenate(flat)

    def _user(self, fn: Any, what: str, *args: Any) -> Any:
        """Call the user's ``fun`` or ``hvp``: an exception it raises becomes a ModelError that
        names the loss (the user's traceback stays attached as its cause), so that the command
        line reports it as the model's error, not as a bug in sparsemodel."""
        try:
            return fn(*args)
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(
                f"custom_loss {self.label}: its {what} raised {type(exc).__name__}: {exc}",
                self.span,
                f"the error is in the function given to custom_loss as {what} (its traceback is this error's cause)",
            ) from exc

    def _call(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        key = z.tobytes()
        if self._last is not None and self._last[0] == key:
            return self._last[1], self._last[2]
        out = self._user(self.fun, "fun", *self._values(z))
        try:
            value, grad = out
            v = float(np.asarray(value, dtype=float).reshape(()))
        except (TypeError, ValueError) as exc:
            raise ModelError(
                f"custom_loss {self.label}: fun did not return (value, gradient) with a number as the value: {exc}",
                self.span,
                "fun(*values) must return a pair (f, grad f)",
            ) from None
        g = self._flat(grad, "gradient") if np.isfinite(v) else np.full(z.shape[-1], np.nan)
        self._last = (key, v, g)
        return v, g

    def derivs(self, z: np.ndarray, order: int = 1) -> tuple[Any, Any, None]:
        z = np.asarray(z, dtype=float)
        if z.ndim == 1:
            v, g = self._call(z)
            return v, (g if order >= 1 else None), None
        rows = z.reshape(-1, z.shape[-1])
        vals = [self._call(r) for r in rows]
        v = np.array([a for a, _ in vals]).reshape(z.shape[:-1])
        g = np.stack([b for _, b in vals]).reshape(z.shape) if order >= 1 else None
        return v, g, None

    def hessian_apply(self, z: np.ndarray, U: np.ndarray) -> np.ndarray:
        if self.hvp is None:  # pragma: no cover - a custom loss without hvp is not a whole-vector loss
            raise ModelError(f"custom_loss {self.label} has no hvp", self.span)
        U = np.asarray(U, dtype=float)
        vals = self._values(np.asarray(z, dtype=float))
        cols = [U] if U.ndim == 1 else [U[:, j] for j in range(U.shape[1])]
        out = [self._flat(self._user(self.hvp, "hvp", *vals, *self._values(u)), "hvp") for u in cols]
        return out[0] if U.ndim == 1 else np.stack(out, axis=1)
