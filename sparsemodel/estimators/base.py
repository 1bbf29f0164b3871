"""The one base of the scikit-learn estimators: an estimator is a model and a few conventions.

A subclass states

* its parameters (an explicit ``__init__``, as scikit-learn requires) and its ``fit`` signature
  (``sample_weight`` only where the loss has weights: scikit-learn's checks key off it);
* ``_model(...)`` -> :class:`Spec`: the model it writes with the Python builder (the objective, the
  structural constraint at a bound k, the other constraints, the number of selectable units,
  solver options the model implies), and, for a model whose objective is a function of a
  covariance rather than a sum over samples (sparse and robust PCA, precision matrices), its
  likelihood at a solution, which the information criteria read;
* the fitted attributes it reads from the solution, and its ``predict`` / ``transform`` / ``score``.

The base does the rest, the same way for every estimator: validation of ``k``, ``k_max`` and the
solver, the refusal at ``fit`` of a solver that cannot take the model (``Problem.solver_errors``,
the test ``check`` and ``solve`` use), the solve at an integer k or the choice of k
(``Problem.select``: EBIC by default, ``k="cv"``; or, for the covariance models, the criterion on
the model's likelihood over ``Problem.path``), the ``ConvergenceWarning``, the refusal of a
diverged solve, and ``k_``, ``curve_``, ``result_``, ``n_iter_``, ``gap_``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ..errors import EstimatorError, ModelError, SolverError
from ..model.objective import Objective
from ..problem import Problem

CHOOSERS = ("ebic", "cv", "bic", "aic", "ebic_cc", "gic")
DEFAULT_K = "ebic"  # = sparsemodel.workflows.select.DEFAULT_BY (tested): the estimators import only the builder
CHUNK = 5  # k per path call when the estimator reads the criterion itself (the early stop's patience)


def _plain_matrix(X: Any) -> bool:
    """X is a finite float64 NumPy matrix with a row and a column at least: what scikit-learn's
    ``check_array(X, dtype=np.float64)`` returns as it is."""
    return (
        type(X) is np.ndarray
        and X.dtype == np.float64
        and X.ndim == 2
        and X.shape[0] >= 1
        and X.shape[1] >= 1
        and bool(np.isfinite(X).all())
    )


def _plain_vector(y: Any, n: int) -> bool:
    """y is a NumPy vector of n numbers (finite where floating): what ``check_X_y`` returns as it is."""
    if type(y) is not np.ndarray or y.ndim != 1 or y.shape[0] != n or y.dtype.kind not in "fiu":
        return False
    return y.dtype.kind != "f" or bool(np.isfinite(y).all())


@dataclass
class Likelihood:
    """A model's fit at one solution, as the information criteria read it: the negative
    log-likelihood (up to a constant that does not depend on k), the observations n, the degrees of
    freedom (what AIC, BIC, GIC and EBIC price), and the units used (features, edges: EBIC_CC's
    binomial)."""

    loss: float
    n: float
    df: int
    used: int
    gaussian: bool = False  # True: ``loss`` is a residual sum of squares (deviance n log(RSS / n))


@dataclass
class Spec:
    """An estimator's model: ``objective`` subject to ``bound(k)`` and ``constraints``; ``units`` the
    largest k (every unit allowed); ``options`` the solver options the model implies;
    ``likelihood(result)`` for a model that ``Problem.select`` cannot read (its objective is not a
    sum over samples), with the default range of k (``k_min``..``k_max``)."""

    objective: Objective
    bound: Callable[[int], Any]
    units: int
    constraints: list[Any] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    likelihood: Callable[[Any], Likelihood] | None = None
    k_min: int = 0
    k_max: int | None = None
    label: Callable[[int], Any] = int  # k as Problem.path takes it ({"S": k} for one bound of several)
    select_cv: bool = False  # k="cv" through Problem.select (the objective is a sum over samples)

    def at(self, k: int) -> Problem:
        return Problem(self.objective, [self.bound(k), *self.constraints])


class SparseEstimator(BaseEstimator):
    """What every estimator shares: ``k``, ``solver``, ``solver_options``, ``k_max``, ``cv``,
    ``random_state`` (the subclasses add their own parameters), and fitting a :class:`Spec`."""

    def _expected_failures(self) -> dict[str, str]:
        """The checks of scikit-learn's ``check_estimator`` this instance fails by design, each with
        the reason (:func:`sparsemodel.estimators.expected_failed_checks` hands them over)."""
        return {}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------ parameters
    def _check_k(self) -> None:
        k = self.k
        if isinstance(k, str):
            if k not in CHOOSERS:
                raise ValueError(f"k={k!r}: give an int or one of {', '.join(CHOOSERS)}")
        elif not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 0:
            raise ValueError(f"k={k!r}: {self._k_words} must be an integer >= 0")
        if self.k_max is not None and (
            not isinstance(self.k_max, numbers.Integral) or isinstance(self.k_max, bool) or self.k_max < 0
        ):
            raise ValueError(f"k_max={self.k_max!r} must be an integer >= 0")

    _k_words = "the number of nonzero coefficients"

    @staticmethod
    def _weights(sample_weight: Any, X: Any) -> np.ndarray:
        if sample_weight is None:  # (what _check_sample_weight gives for None, without its 40 us)
            return np.ones(X.shape[0])
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        if not sw.sum() > 0:
            raise ValueError("the sample weights sum to zero")
        return sw

    def _validate_predict(self, X: Any, sparse: bool = True) -> Any:
        check_is_fitted(self)
        if _plain_matrix(X) and X.shape[1] == self.n_features_in_ and not hasattr(self, "feature_names_in_"):
            return X  # (what validate_data(reset=False) returns for it, without its cost)
        return validate_data(self, X, accept_sparse="csr" if sparse else False, dtype=np.float64, reset=False)

    def _validate_xy(self, X: Any, y: Any, **check: Any) -> tuple[Any, Any]:
        """``validate_data(self, X, y, reset=True, **check)``; for a finite float64 matrix and a finite
        numeric vector of as many rows (what it returns unchanged) the same result and attributes
        without its checks' cost: 0.29 ms of a 2 ms fit at 100 x 20, more than half of abess's whole
        fit there (narwhals' and pandas' probes of the input's type, mostly). Anything else, and
        every bad input, goes through scikit-learn's checks and messages."""
        if _plain_matrix(X) and _plain_vector(y, X.shape[0]):
            self.n_features_in_ = X.shape[1]
            if hasattr(self, "feature_names_in_"):  # (validate_data's reset for input without names)
                del self.feature_names_in_
            return X, y
        return validate_data(self, X, y, **check)

    def _feature_names(self) -> np.ndarray:
        """The names of the features: ``feature_names_in_`` (a DataFrame's columns), else x0, x1, ...
        (scikit-learn's default output names)."""
        names = getattr(self, "feature_names_in_", None)
        if names is not None:
            return np.asarray(names, dtype=object)
        return np.asarray([f"x{i}" for i in range(self.n_features_in_)], dtype=object)

    # ------------------------------------------------------------------ fitting
    def _fit_spec(self, spec: Spec, folds_data: tuple[Any, Any] | None = None) -> Any:
        """Solve the model at the integer k, or choose k; set ``k_``, ``curve_``, ``result_``,
        ``n_iter_``, ``gap_`` and return the Result. ``folds_data`` = (X, y) for a scikit-learn
        splitter's ``split``."""
        self._check_k()
        opts = {**spec.options, **(self.solver_options or {})}
        try:
            # a solver that cannot take the model refuses here, whatever k (an int k at least the
            # number of units and the ends of a path are answered without the solver): the same
            # test as everywhere (Solver.takes), naming those that can
            # (auto without options takes every model: no problem is built for the test)
            first = spec.at(min(spec.k_min, spec.units)) if self.solver != "auto" or opts else None
            refused = first.solver_errors(self.solver, **opts) if first is not None else []
            if refused:
                raise refused[0]
            self.curve_ = None
            if isinstance(self.k, str):
                res, self.k_ = self._choose(spec, opts, folds_data)
            else:
                self.k_ = int(min(self.k, spec.units))
                res = spec.at(self.k_).solve(self.solver, **opts)
        except ModelError as exc:
            raise EstimatorError.of(exc) from exc
        if res.status == "max_iter":
            warnings.warn(
                f"{res.solver} stopped after {res.iterations} iterations (its max_iter) before converging; "
                "raise it with solver_options={'max_iter': ...}",
                ConvergenceWarning,
                stacklevel=3,
            )
        elif res.status in ("diverged", "infeasible", "unbounded"):  # no answer: never returned as a fit
            first = first if first is not None else spec.at(min(spec.k_min, spec.units))
            others = [name for name, _ in first.check().solvers if name != res.solver]
            raise EstimatorError.of(
                SolverError(
                    res.message or f"{res.solver} {res.status}",
                    hint=f"solvers that take this model: {', '.join(others)}" if others else None,
                )
            )
        self.result_ = res
        self.n_iter_ = int(res.iterations)
        self.gap_ = res.gap
        return res

    def _choose(self, spec: Spec, opts: dict[str, Any], folds_data: tuple[Any, Any] | None) -> tuple[Any, int]:
        top = None if self.k_max is None else min(spec.units, int(self.k_max))
        if spec.likelihood is not None and not (self.k == "cv" and spec.select_cv):
            return self._choose_by_likelihood(spec, opts, top)
        prob = spec.at(0 if top is None else top)
        split: dict[str, Any] = {}
        if self.k == "cv":
            folds = self.cv
            if hasattr(folds, "split"):  # a scikit-learn splitter
                folds = list(folds.split(*(folds_data or ())))
            elif not isinstance(folds, numbers.Integral):  # an iterable of (train, test) splits
                folds = list(folds)
            split = {"folds": folds, "seed": self.random_state}
        # k_max None: Problem.select's default range, 0..min(units, n / (log(log n) log p))
        ks = None if top is None else range(0, top + 1)
        sel = prob.select(k=ks, by=self.k, solver=self.solver, **split, **opts)
        self.curve_ = sel.curve
        return sel.result, int(sel.k)

    def _choose_by_likelihood(self, spec: Spec, opts: dict[str, Any], top: int | None) -> tuple[Any, int]:
        """The information criterion on the model's likelihood over a warm path (``Problem.path`` in
        chunks of :data:`CHUNK` k, stopped by ``Problem.select``'s rule once the criterion has clearly
        turned): the covariance models, whose objective ``Problem.select`` cannot read as a sum over
        samples. The formulas are select's (``workflows.criteria.criterion``)."""
        from ..workflows.criteria import criterion
        from ..workflows.select import IC_MARGIN, IC_PATIENCE, EarlyStop

        if self.k == "cv":
            raise ValueError(
                f"k='cv' reads a held-out loss per sample, and {type(self).__name__}'s objective is a function of "
                "the covariance, which cannot be split by rows: use an information criterion (k='ebic', the "
                "default, or 'bic', 'aic', 'ebic_cc', 'gic'), or GridSearchCV over k, which scores the held-out "
                "log-likelihood (score)"
            )
        last = spec.units if top is None else top
        if spec.k_max is not None and top is None:
            last = min(last, spec.k_max)
        ks = list(range(min(spec.k_min, last), last + 1))
        stop = EarlyStop(IC_PATIENCE, IC_MARGIN, cv=False)
        curve: list[dict[str, Any]] = []
        results: dict[int, Any] = {}
        for start in range(0, len(ks), CHUNK):
            chunk = ks[start : start + CHUNK]
            path = spec.at(chunk[-1]).path(k=[spec.label(v) for v in chunk], solver=self.solver, start="warm", **opts)
            for kv, pt in zip(chunk, path.points):
                row: dict[str, Any] = {"k": kv, "value": math.inf, "status": "error", "objective": None}
                if pt.usable:
                    lik = spec.likelihood(pt.result)
                    value = criterion(self.k, lik.loss, lik.n, lik.df, spec.units, lik.used, lik.gaussian)
                    row.update(
                        value=float(value),
                        status=pt.result.status,
                        objective=float(pt.result.objective),
                        loss=lik.loss,
                        df=lik.df,
                        nnz=lik.used,
                    )
                    results[kv] = pt.result
                curve.append(row)
            if stop.check(curve) and start + CHUNK < len(ks):
                break
        good = [r for r in curve if math.isfinite(r["value"])]
        if not good:
            raise EstimatorError(f"no k could be evaluated by {self.solver}", hint="try another solver")
        best = min(good, key=lambda r: (r["value"], r["k"]))
        self.curve_ = curve
        return results[best["k"]], best["k"]


def default_k_max(n: float, units: int, free: int = 0) -> int:
    """``Problem.select``'s default largest k, min(units, n / (log(log n) log p)) (abess's default)."""
    from ..workflows.criteria import default_k_max as rule

    return rule(n, units, free)


def support_names(names: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The names of the selected features (``mask`` over the features)."""
    return names[np.asarray(mask, dtype=bool)]


__all__ = ["CHOOSERS", "DEFAULT_K", "Likelihood", "Spec", "SparseEstimator", "support_names"]
