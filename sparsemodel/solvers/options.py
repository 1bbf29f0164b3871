"""A solver's options: each declared with its default, help, type and range (:class:`Option`),
checked once when the solver is made (``Solver.validate``); the options several solvers share
(the restricted solve's method, the precision-matrix subproblem (13))."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SolverError
from ..lowering.restricted import RESTRICTED_METHODS


@dataclass
class Option:
    default: Any
    help: str
    type: Callable[[Any], Any] | str = float
    choices: tuple[Any, ...] | None = None
    low: float | None = None  # numeric values must be >= low (> low with open_low)
    high: float | None = None  # and <= high (< high with open_high)
    open_low: bool = False
    open_high: bool = False

    def convert(self, name: str, solver: str, value: Any) -> Any:
        t = self.type
        try:
            if value is None:
                v = None
            elif t == "float_or_auto":
                v = value if isinstance(value, str) and value in ("auto", "rss") else float(value)
            elif t == "float_or_name":  # a number, or one of the names in choices
                v = value if isinstance(value, str) and value in (self.choices or ()) else float(value)
            elif t == "int_or_none":
                v = None if isinstance(value, str) and value.lower() == "none" else _int(value)
            elif t is bool:
                v = _bool(value)
            elif t is int:
                v = _int(value)
            elif t == "any":
                v = value
            else:
                v = t(value)  # type: ignore[operator]
        except (TypeError, ValueError):
            raise SolverError(
                f"option {name}={value!r} of {solver} is not a valid {_type_name(t)}",
                hint=f"{name}: {self.help}",
            ) from None
        if self.choices is not None and v not in self.choices and not (t == "float_or_name" and isinstance(v, float)):
            raise SolverError(
                f"option {name}={value!r} of {solver} is not one of {', '.join(map(str, self.choices))}",
                hint=f"{name}: {self.help}",
            )
        if isinstance(v, float) and not math.isfinite(v):
            raise SolverError(f"option {name}={value!r} of {solver} must be finite")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            lo_bad = self.low is not None and (v <= self.low if self.open_low else v < self.low)
            hi_bad = self.high is not None and (v >= self.high if self.open_high else v > self.high)
            if lo_bad or hi_bad:
                raise SolverError(
                    f"{solver}: option {name} must be {self.range_text()}; got {name}={value!r}",
                    hint=f"{name}: {self.help}",
                )
        return v

    def range_text(self) -> str:
        if self.low == 0 and self.high is None:
            return "positive" if self.open_low else "nonnegative"
        lo = "" if self.low is None else f"{'>' if self.open_low else '>='} {self.low:g}"
        hi = "" if self.high is None else f"{'<' if self.open_high else '<='} {self.high:g}"
        return " and ".join(t for t in (lo, hi) if t)


def _type_name(t: Any) -> str:
    return {
        float: "number",
        int: "integer",
        bool: "boolean (true/false)",
        str: "string",
        "float_or_auto": "number (or 'auto'/'rss')",
        "float_or_name": "number (or one of the names listed)",
        "int_or_none": "integer (or none)",
    }.get(t, str(t))


def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError
    f = float(v)
    if not math.isfinite(f) or f != int(f):  # int(inf) would raise OverflowError
        raise ValueError
    return int(f)


def _bool(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "yes", "1", "on"):
        return True
    if isinstance(v, str) and v.lower() in ("false", "no", "0", "off"):
        return False
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    raise ValueError


def restricted_option(purpose: str = "the restricted solves") -> Option:
    """The ``restricted`` option every solver with restricted (debiasing) solves shares."""
    return Option(
        "auto",
        f"method of {purpose}: auto (QR/Cholesky for least squares, Newton for composite losses, "
        "L-BFGS otherwise; precision matrices: covsel, barrier Newton or the ADMM where the box is active), "
        "lstsq, newton (precision matrices: the barrier Newton method), lbfgs, cvxpy, admm (paper 000, App. D.2), "
        "covsel",
        str,
        RESTRICTED_METHODS,
    )


SUBPROBLEM13 = {  # option name -> key of LoweredProblem.subproblem (the argument of fresh) (precision matrices, paper 000 (13))
    "admm_tol": "tol",
    "admm_rho": "rho",
    "admm_max_iter": "max_iter",
    "admm_adaptive": "adaptive",
    "covsel_tol": "covsel_tol",
    "covsel_max_sweeps": "covsel_max_sweeps",
}


def subproblem13_options() -> dict[str, Option]:
    """The options of the precision-matrix restricted solve (13) every solver that handles the
    eigenvalue box shares (used only on that model; see docs/precision.md)."""
    return {
        "admm_tol": Option(
            1e-9, "(13) by ADMM: stop when both residuals <= admm_tol * (1 + ||O||_F)", float, low=0, open_low=True
        ),
        "admm_rho": Option(
            1.0,
            "(13) by ADMM: the initial penalty rho (later solves start from the last rho)",
            float,
            low=0,
            open_low=True,
        ),
        "admm_max_iter": Option(5000, "(13) by ADMM: iterations (eigen-decompositions) per solve", int, low=1),
        "admm_adaptive": Option(True, "(13) by ADMM: rescale rho to balance the residuals (false: fixed rho)", bool),
        "covsel_tol": Option(
            1e-6,
            "(13) by covsel: stop when a sweep moves no regression coefficient by more than covsel_tol",
            float,
            low=0,
            open_low=True,
        ),
        "covsel_max_sweeps": Option(100, "(13) by covsel: sweeps before falling back to the ADMM", int, low=1),
    }
