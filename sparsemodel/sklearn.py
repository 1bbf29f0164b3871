"""scikit-learn estimators: sparse linear, logistic (binary and multinomial) and Poisson regression.

Each estimator builds its model with the Python builder (``sm.Variable``, ``sm.Data``, the atoms,
``sm.nnz``, ``sm.Problem``) and solves it with ``Problem.solve`` or chooses k with
``Problem.select``: the same code path as a model file, no second implementation. scikit-learn is an
optional extra (``pip install sparsemodel[sklearn]``).

Common parameters:

* ``k`` -- the number of nonzero coefficients (an int), or how to choose it over 0..``k_max``:
  ``"ebic"`` (default: the deviance + (log n + 2 log p) per coefficient, abess's default
  criterion), ``"cv"`` (K-fold cross-validation: ``cv`` is the number of folds, whose random split
  ``random_state`` fixes, a scikit-learn splitter, or an iterable of (train, test) splits),
  ``"bic"``, ``"aic"``, ``"ebic_cc"``, ``"gic"`` (docs/selection.md states every constant and why
  ebic is the default). The path over k stops once the criterion has clearly turned. An int at
  least the number of features fits every coefficient (no constraint).
* ``always_select`` -- feature indices that are always in the model and not counted by k
  (``nnz(w, free=always_select) <= k``; any index list).
* ``fit_intercept`` -- an intercept, never counted by k.
* ``solver`` -- a registered solver (``sparsemodel solvers``) or ``"auto"``; ``solver_options`` a
  dict of its options (``{"max_iter": 50}``).
* ``k_max`` -- the largest k tried when k is chosen (default: min(units, n / (log(log n) log p)),
  abess's default, n the sum of the sample weights).
* ``alpha`` -- a ridge alpha/2 ||w||^2 added to the summed loss (the objective is divided by the
  sum of the sample weights; the intercept is not penalized): 0 for the linear and Poisson
  estimators; for the logistic one ``"auto"``: 1e-4 with two classes (small enough not to move the
  choice of k, large enough that separable data has a minimizer), 0.1 with more (docs/selection.md).
  The value used is ``alpha_``.

Fitted attributes: ``coef_``, ``intercept_``, ``support_`` (boolean mask over the features: nonzero
coefficient, or always selected), ``k_`` (the k used), ``n_iter_`` (iterations of the final solve), ``gap_``
(the optimality gap of the answer, (f - lower bound) / max(|f|, 1), from the fast bound of the
perspective relaxation; None where no bound exists, docs/certify.md),
``result_`` (the :class:`~sparsemodel.solvers.result.Result`), ``curve_`` (the selection curve when k
was chosen), ``n_features_in_``. A solver that stops on its iteration limit raises a
``sklearn.exceptions.ConvergenceWarning``; a solver that cannot take the model (``Solver.takes``) is
refused at ``fit`` whatever k, and a diverged solve stops it, with
:class:`~sparsemodel.errors.EstimatorError` (a ``ModelError`` and a ``ValueError``). Sample weights multiply each sample's loss; the loss is
normalized by their sum.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
from scipy.special import expit, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import d2_tweedie_score
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .errors import EstimatorError, ModelError, SolverError
from .model import atoms as A
from .model.constraints import box, nnz
from .model.expr import Data, Variable
from .model.objective import minimize
from .problem import Problem

CHOOSERS = ("ebic", "cv", "bic", "aic", "ebic_cc", "gic")
DEFAULT_K = "ebic"  # = sparsemodel.workflows.select.DEFAULT_BY (tested): the estimators import only the builder


class _SparseModel(BaseEstimator):
    """What the three estimators share: parameters, fitting through the builder, k selection."""

    def __init__(
        self,
        k: int | str = DEFAULT_K,
        *,
        fit_intercept: bool = True,
        always_select: Any = None,
        solver: str = "auto",
        solver_options: dict[str, Any] | None = None,
        k_max: int | None = None,
        cv: Any = 5,
        random_state: int | None = 0,
        alpha: float = 0.0,
    ):
        self.k = k
        self.fit_intercept = fit_intercept
        self.always_select = always_select
        self.solver = solver
        self.solver_options = solver_options
        self.k_max = k_max
        self.cv = cv
        self.random_state = random_state
        self.alpha = alpha

    # ---- to define: the model (objective on data, the coefficient variable, the nnz target,
    # its group labels and always-selected positions, fixed coordinates)
    def _model(self, X: Any, y: np.ndarray, sw: np.ndarray) -> tuple[Any, Variable, Variable | None, list[Any]]:
        raise NotImplementedError

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # ---- fitting
    def _check_params(self, n_features: int) -> list[int]:
        k = self.k
        if isinstance(k, str):
            if k not in CHOOSERS:
                raise ValueError(f"k={k!r}: give an int or one of {', '.join(CHOOSERS)}")
        elif not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 0:
            raise ValueError(f"k={k!r}: the number of nonzero coefficients must be an integer >= 0")
        if self.k_max is not None and (not isinstance(self.k_max, numbers.Integral) or self.k_max < 0):
            raise ValueError(f"k_max={self.k_max!r} must be an integer >= 0")
        if self.always_select is None:
            return []
        idx = np.atleast_1d(np.asarray(self.always_select))
        if idx.dtype == bool:
            if idx.shape != (n_features,):
                raise ValueError(f"always_select as a mask needs {n_features} entries; got {idx.shape[0]}")
            idx = np.flatnonzero(idx)
        if idx.size and (not np.issubdtype(idx.dtype, np.integer) or idx.min() < 0 or idx.max() >= n_features):
            raise ValueError(f"always_select={self.always_select!r}: feature indices between 0 and {n_features - 1}")
        if len(np.unique(idx)) != len(idx):
            raise ValueError(f"always_select={self.always_select!r} lists a feature twice")
        return sorted(int(i) for i in idx)

    def _fit(self, X: Any, y: np.ndarray, sample_weight: Any) -> Any:
        n, p = X.shape
        if n < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 samples; got 1 sample")
        self._always = self._check_params(p)
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        if not sw.sum() > 0:
            raise ValueError("the sample weights sum to zero")
        self.alpha_ = self._alpha()
        if not (isinstance(self.alpha_, numbers.Real) and self.alpha_ >= 0):
            raise ValueError(f"alpha={self.alpha!r} must be a number >= 0")
        try:
            objective, coef, intercept, extra = self._model(X, y, sw)
            if self.alpha_:  # the ridge on the coefficients, on the scale of the summed loss
                objective = objective + float(self.alpha_) / (2.0 * float(sw.sum())) * A.sum_squares(coef)
            units, target = self._units(coef)
            cons = list(extra)
            free = self._free_positions(coef)
            with_nnz = lambda k: Problem(minimize(objective), [target(k, free)] + cons)  # noqa: E731
            opts = dict(self.solver_options or {})
            # a solver that cannot take the model refuses here, whatever k (an int k at least the
            # number of features drops the constraint, and the path answers its largest bound
            # without the solver): the same test as everywhere (Solver.takes), naming those that can
            refused = with_nnz(0).solver_errors(self.solver, **opts)
            if refused:
                raise refused[0]
            if isinstance(self.k, str):
                # k_max None: Problem.select's default range, 0..min(units, n / (log(log n) log p))
                top = None if self.k_max is None else min(units, self.k_max)
                prob = with_nnz(0 if top is None else top)
                split: dict[str, Any] = {}
                if self.k == "cv":
                    folds = self.cv
                    if hasattr(folds, "split"):  # a scikit-learn splitter
                        folds = list(folds.split(X, y))
                    elif not isinstance(folds, numbers.Integral):  # an iterable of (train, test) splits
                        folds = list(folds)
                    split = {"folds": folds, "seed": self.random_state}
                ks = None if top is None else range(0, top + 1)
                sel = prob.select(k=ks, by=self.k, solver=self.solver, **split, **opts)
                res, self.k_ = sel.result, sel.k
                self.curve_ = sel.curve
            elif self.k >= units:
                res = Problem(minimize(objective), cons).solve(self.solver, **opts)
                self.k_ = units
            else:
                res = with_nnz(int(self.k)).solve(self.solver, **opts)
                self.k_ = int(self.k)
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
            others = [name for name, _ in with_nnz(0).check().solvers if name != res.solver]
            raise EstimatorError.of(
                SolverError(
                    res.message or f"{res.solver} {res.status}",
                    hint=f"solvers that take this model: {', '.join(others)}" if others else None,
                )
            )
        self.result_ = res
        self.n_iter_ = int(res.iterations)
        self.gap_ = res.gap
        W = np.asarray(res.values[coef.name], dtype=float)
        b = np.asarray(res.values[intercept.name], dtype=float) if intercept is not None else None
        return W, b

    def _alpha(self) -> Any:
        """The ridge used (``alpha`` as given here; the logistic estimator reads ``"auto"``)."""
        return self.alpha

    def _units(self, coef: Variable) -> tuple[int, Any]:
        """(number of selectable units, target(k, free) -> the nnz constraint)."""
        p = coef.shape[0]
        units = p - len(self._always)
        return units, lambda k, free: nnz(coef, free=free if free else None) <= k

    def _free_positions(self, coef: Variable) -> list[int]:
        return list(self._always)

    def _support(self, coef: np.ndarray) -> np.ndarray:
        c = np.atleast_2d(coef)
        mask = np.any(c != 0, axis=0)
        mask[self._always] = True
        return mask

    def _validate_predict(self, X: Any) -> Any:
        check_is_fitted(self)
        return validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)


def _linear(X: Any, w: Variable, b: Variable | None) -> Any:
    z = X @ w
    return z + b if b is not None else z


class SparseLinearRegression(RegressorMixin, _SparseModel):
    """Least squares with at most k nonzero coefficients:
    min [sum_i s_i (x_i'w + b - y_i)^2 / 2 + alpha/2 ||w||^2] / sum_i s_i  s.t.  nnz(w, free=always_select) <= k."""

    def _model(self, X, y, sw):
        n, p = X.shape
        w = Variable(p, name="w")
        b = Variable((), name="b") if self.fit_intercept else None
        Xd, yd = Data(X, name="X"), Data(y, name="y")
        r = _linear(Xd, w, b) - yd
        obj = A.sum(Data(sw, name="sample_weight") * A.square(r)) / (2.0 * float(sw.sum()))
        return obj, w, b, []

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SparseLinearRegression:
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, y_numeric=True)
        w, b = self._fit(X, y, sample_weight)
        self.coef_ = w
        self.intercept_ = float(b) if b is not None else 0.0
        self.support_ = self._support(w)
        return self

    def predict(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        return np.asarray(X @ self.coef_).ravel() + self.intercept_


class SparsePoissonRegression(RegressorMixin, _SparseModel):
    """Poisson regression (log link) with at most k nonzero coefficients:
    min sum_i s_i (exp(z_i) - y_i z_i) / sum_i s_i, z = X w + b. ``score`` is D^2, the fraction of
    Poisson deviance explained (as scikit-learn's PoissonRegressor)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags

    def _model(self, X, y, sw):
        n, p = X.shape
        w = Variable(p, name="w")
        b = Variable((), name="b") if self.fit_intercept else None
        z = _linear(Data(X, name="X"), w, b)
        obj = A.sum(Data(sw, name="sample_weight") * (A.exp(z) - Data(y, name="y") * z)) / float(sw.sum())
        return obj, w, b, []

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SparsePoissonRegression:
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, y_numeric=True)
        if np.any(y < 0):
            raise ValueError("Poisson regression needs nonnegative targets (counts); some y are negative")
        w, b = self._fit(X, y, sample_weight)
        self.coef_ = w
        self.intercept_ = float(b) if b is not None else 0.0
        self.support_ = self._support(w)
        return self

    def predict(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        return np.exp(np.asarray(X @ self.coef_).ravel() + self.intercept_)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        return float(d2_tweedie_score(y, self.predict(X), sample_weight=sample_weight, power=1))


class SparseLogisticRegression(ClassifierMixin, _SparseModel):
    """Logistic regression with at most k nonzero coefficients.

    Two classes: min [sum_i s_i log(1 + exp(-v_i (x_i'w + b))) + alpha/2 ||w||^2] / sum_i s_i, v = +-1,
    k counts features. ``alpha="auto"`` is 1e-4 with two classes: on separable data (common when
    features outnumber samples) the unpenalized loss has no minimizer, and this ridge gives it one
    without moving the choice of k (scikit-learn's C = 1, alpha = 1, made k="cv" keep most of the 30
    features of the breast-cancer data, where alpha = 1e-4 keeps the best 3); alpha=0 removes the
    ridge. With three classes or more it is 0.1: the softmax separates few samples per class at
    small k (abess's multinomial test, 100 samples of which 8 in one class: at alpha = 1e-4 the
    deviance of 5 features is 2.7, of the true 3 35), and EBIC then chose noise features; 0.1 to 0.3
    chose the true features of abess's generator as often as abess or more (docs/selection.md).
    More classes, the softmax loss over scores Z = X W + b (W: features x classes), by ``multinomial``:

    * ``"groups"`` (default): every class has a column and the rows of W are groups: k counts
      features, each in or out for all classes (``nnz(W, groups=rows) <= k``). All classes free is
      unidentifiable without the ridge (a constant added to every column changes nothing);
    * ``"reference"``: the first class is the reference, its column of W and its intercept fixed at
      0 (a box ``0 <= W[:, 0] <= 0``); k counts the nonzero entries of the other columns
      (class-specific coefficients).
    """

    def __init__(
        self,
        k: int | str = DEFAULT_K,
        *,
        fit_intercept: bool = True,
        always_select: Any = None,
        solver: str = "auto",
        solver_options: dict[str, Any] | None = None,
        k_max: int | None = None,
        cv: int = 5,
        random_state: int | None = 0,
        alpha: float | str = "auto",
        multinomial: str = "groups",
    ):
        super().__init__(
            k,
            fit_intercept=fit_intercept,
            always_select=always_select,
            solver=solver,
            solver_options=solver_options,
            k_max=k_max,
            cv=cv,
            random_state=random_state,
            alpha=alpha,
        )
        self.multinomial = multinomial

    def _alpha(self) -> Any:
        if isinstance(self.alpha, str):
            if self.alpha != "auto":
                raise ValueError(f"alpha={self.alpha!r}: give a number >= 0 or 'auto'")
            return 1e-4 if len(self.classes_) == 2 else 0.1
        return self.alpha

    def _model(self, X, y, sw):
        n, p = X.shape
        K = len(self.classes_)
        Xd = Data(X, name="X")
        swd = Data(sw, name="sample_weight")
        if K == 2:
            w = Variable(p, name="w")
            b = Variable((), name="b") if self.fit_intercept else None
            v = Data(np.where(y == self.classes_[1], 1.0, -1.0), name="y")
            obj = A.sum(swd * A.logistic(-v * _linear(Xd, w, b))) / float(sw.sum())
            return obj, w, b, []
        if self.multinomial not in ("groups", "reference"):
            raise ValueError(f"multinomial={self.multinomial!r}: choose 'groups' or 'reference'")
        W = Variable((p, K), name="W")
        b = Variable(K, name="b") if self.fit_intercept else None
        Y = Data(np.eye(K)[np.searchsorted(self.classes_, y)], name="Y")
        Z = _linear(Xd, W, b)
        obj = A.sum(swd * (A.logsumexp(Z, axis=1) - A.sum(Y * Z, axis=1))) / float(sw.sum())
        cons = []
        if self.multinomial == "reference":
            cons.append(box(W[:, 0], 0.0, 0.0))
            if b is not None:
                cons.append(box(b[0], 0.0, 0.0))
        return obj, W, b, cons

    def _units(self, coef: Variable) -> tuple[int, Any]:
        if coef.ndim == 1:
            return super()._units(coef)
        p, K = coef.shape
        if self.multinomial == "groups":
            groups = np.repeat(np.arange(p), K)
            return p - len(self._always), lambda k, free: nnz(coef, groups=groups, free=free or None) <= k
        return (p - len(self._always)) * (K - 1), lambda k, free: nnz(coef[:, 1:], free=free or None) <= k

    def _free_positions(self, coef: Variable) -> list[int]:
        if coef.ndim == 1:
            return list(self._always)
        p, K = coef.shape
        m = K if self.multinomial == "groups" else K - 1
        return [i * m + j for i in self._always for j in range(m)]

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SparseLogisticRegression:
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes; got 1 class")
        W, b = self._fit(X, y, sample_weight)
        if W.ndim == 1:
            self.coef_ = W[None, :]
            self.intercept_ = np.array([float(b) if b is not None else 0.0])
        else:
            self.coef_ = W.T.copy()
            self.intercept_ = b.copy() if b is not None else np.zeros(len(self.classes_))
            if self.multinomial == "groups":  # the softmax ignores a common shift: report the centered intercepts
                self.intercept_ -= self.intercept_.mean()
        self.support_ = self._support(self.coef_)
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        Z = np.asarray(X @ self.coef_.T) + self.intercept_
        return Z[:, 0] if Z.shape[1] == 1 else Z

    def predict_proba(self, X: Any) -> np.ndarray:
        Z = self.decision_function(X)
        if Z.ndim == 1:
            p1 = expit(Z)
            return np.column_stack([1.0 - p1, p1])
        return softmax(Z, axis=1)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        Z = self.decision_function(X)
        idx = (Z > 0).astype(int) if Z.ndim == 1 else np.argmax(Z, axis=1)
        return self.classes_[idx]


__all__ = ["SparseLinearRegression", "SparseLogisticRegression", "SparsePoissonRegression"]
