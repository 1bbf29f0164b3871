"""The estimators over a linear predictor X w + b: least squares, logistic (binary and multinomial),
Poisson, Gamma and multi-task regression. Each writes its loss with the builder; the base fits it.

Shared parameters (besides the base's ``k``, ``solver``, ``solver_options``, ``k_max``, ``cv``,
``random_state``): ``fit_intercept`` (never counted by k), ``always_select`` (feature indices or a
boolean mask always in the model, not counted: ``nnz(w, free=always_select) <= k``) and ``alpha``
(a ridge alpha/2 ||w||^2 on the summed loss; the intercept is not penalized). Sample weights
multiply each sample's loss, and the loss is normalized by their sum.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from scipy.special import expit, softmax
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.metrics import d2_tweedie_score
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ..model import atoms as A
from ..model.constraints import box, nnz
from ..model.expr import Data, Variable
from ..model.objective import minimize
from .base import DEFAULT_K, Likelihood, SparseEstimator, Spec, default_k_max, support_names


def gamma_shape(dbar: float) -> float:
    """The maximum-likelihood Gamma shape nu given dbar = the weighted mean of y/mu - log(y/mu) - 1
    (half the mean unit deviance): the root of log nu - digamma(nu) = dbar, from the approximation
    nu ~ (3 - d + sqrt((d - 3)^2 + 24 d)) / (12 d), d = 2 dbar (Choi & Wette 1969), by Newton's method."""
    from scipy.special import digamma, polygamma

    d = 2.0 * max(dbar, 1e-300)
    nu = (3.0 - d + np.sqrt((d - 3.0) ** 2 + 24.0 * d)) / (12.0 * d)
    for _ in range(50):
        g = np.log(nu) - digamma(nu) - dbar
        step = g / (1.0 / nu - polygamma(1, nu))
        new = nu - step if nu - step > 0 else nu / 2.0
        if abs(new - nu) <= 1e-12 * nu:
            return float(new)
        nu = new
    return float(nu)


def gamma_profile_nll(y: np.ndarray, mu: np.ndarray, sw: np.ndarray) -> float:
    """Minus the Gamma log-likelihood of y with means mu and the shape profiled out (its maximum over
    the shape nu, as n log(RSS / n) profiles the Gaussian's variance), up to a constant of the data:
    W [nu (dbar + 1) - nu log nu + log Gamma(nu)], W = sum s_i, nu = :func:`gamma_shape` (dbar)."""
    from scipy.special import gammaln

    W = float(sw.sum())
    r = y / mu
    dbar = float(np.sum(sw * (r - np.log(r) - 1.0)) / W)
    if not np.isfinite(dbar):
        return np.inf
    nu = gamma_shape(dbar)
    return W * (nu * (dbar + 1.0) - nu * np.log(nu) + float(gammaln(nu)))


def linear(X: Any, w: Variable, b: Variable | None) -> Any:
    """X w (+ b): the linear predictor."""
    z = X @ w
    return z + b if b is not None else z


class LinearModel(SparseEstimator, ABC):
    """The base of the estimators over X w + b: ``_loss(X, y, sw)`` gives the loss (normalized by the
    sum of the weights), the coefficient variable, the intercept variable and any other constraint."""

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

    # ---- to define: the loss on the data
    @abstractmethod
    def _loss(self, X: Any, y: Any, sw: np.ndarray) -> tuple[Any, Variable, Variable | None, list[Any]]:
        """The model's loss on (X, y) with case weights ``sw``: (the loss, the coefficients, the
        intercept or None, the other constraints). Every estimator states its own (a class without
        it cannot be instantiated)."""

    def _check_always(self, n_features: int) -> list[int]:
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

    def _alpha(self) -> Any:
        """The ridge used: ``alpha`` as given, or for ``"auto"`` the estimator's :meth:`_auto_alpha`."""
        if isinstance(self.alpha, str):
            auto = self._auto_alpha()
            if self.alpha != "auto" or auto is None:
                raise ValueError(
                    f"alpha={self.alpha!r}: give a number >= 0" + (" or 'auto'" if auto is not None else "")
                )
            return auto
        return self.alpha

    def _auto_alpha(self) -> float | None:
        """The ridge of ``alpha="auto"`` (None: the estimator has no automatic ridge)."""
        return None

    def _fit(self, X: Any, y: Any, sample_weight: Any) -> tuple[np.ndarray, np.ndarray | None]:
        n, p = X.shape
        if n < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 samples; got 1 sample")
        self._check_k()
        self._always = self._check_always(p)
        sw = self._weights(sample_weight, X)
        self.alpha_ = self._alpha()
        if not (isinstance(self.alpha_, numbers.Real) and not isinstance(self.alpha_, bool) and self.alpha_ >= 0):
            raise ValueError(f"alpha={self.alpha!r} must be a number >= 0")
        objective, coef, intercept, extra = self._loss(X, y, sw)
        if self.alpha_:  # the ridge on the coefficients, on the scale of the summed loss
            objective = objective + float(self.alpha_) / (2.0 * float(sw.sum())) * A.sum_squares(coef)
        units, target = self._units(coef)
        free = self._free_positions(coef)
        spec = Spec(minimize(objective), lambda k: target(k, free), units, list(extra))
        likelihood = self._likelihood(X, y, sw, coef, intercept)
        if likelihood is not None:  # the criteria read the estimator's likelihood, cv the model's loss
            spec.likelihood, spec.select_cv = likelihood, True
            spec.k_max = default_k_max(float(sw.sum()), units, len(free) + (intercept is not None))
        res = self._fit_spec(spec, (X, y))
        W = np.asarray(res.values[coef.name], dtype=float)
        b = np.asarray(res.values[intercept.name], dtype=float) if intercept is not None else None
        return W, b

    def _likelihood(self, X: Any, y: Any, sw: np.ndarray, coef: Variable, intercept: Variable | None) -> Any:
        """The likelihood the information criteria read at a solution, where the loss alone is not it
        (the Gamma's dispersion); None: ``Problem.select`` reads the model's data term."""
        return None

    def _units(self, coef: Variable) -> tuple[int, Any]:
        """(number of selectable units, target(k, free) -> the nnz constraint)."""
        p = coef.shape[0]
        units = p - len(self._always)
        return units, lambda k, free: nnz(coef, free=free if free else None) <= k

    def _free_positions(self, coef: Variable) -> list[int]:
        return list(self._always)

    def _set_support(self, coef: np.ndarray) -> None:
        """``support_`` (a mask over the features: a nonzero coefficient, or always selected) and
        ``support_names_`` (their names) from coefficients shaped (outputs, features) or (features,)."""
        c = np.atleast_2d(coef)
        mask = np.any(c != 0, axis=0)
        mask[self._always] = True
        self.support_ = mask
        self.support_names_ = support_names(self._feature_names(), mask)


class _SingleOutput(LinearModel):
    """A regressor with one coefficient vector and a scalar intercept."""

    def _validate_fit(self, X: Any, y: Any) -> tuple[Any, np.ndarray]:
        return self._validate_xy(X, y, accept_sparse="csr", dtype=np.float64, y_numeric=True)

    def fit(self, X: Any, y: Any, sample_weight: Any = None):
        """Fit the model (k fixed or chosen); returns the estimator."""
        X, y = self._validate_fit(X, y)
        self._check_target(y)
        w, b = self._fit(X, y, sample_weight)
        self.coef_ = w
        self.intercept_ = float(b) if b is not None else 0.0
        self._set_support(w)
        return self

    def _check_target(self, y: np.ndarray) -> None:
        pass

    def _linear_predictor(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        return np.asarray(X @ self.coef_).ravel() + self.intercept_


class SparseLinearRegression(RegressorMixin, _SingleOutput):
    """Least squares with at most k nonzero coefficients:
    min [sum_i s_i (x_i'w + b - y_i)^2 / 2 + alpha/2 ||w||^2] / sum_i s_i  s.t.  nnz(w, free=always_select) <= k."""

    def _loss(self, X, y, sw):
        n, p = X.shape
        w = Variable(p, name="w")
        b = Variable((), name="b") if self.fit_intercept else None
        r = linear(Data(X, name="X"), w, b) - Data(y, name="y")
        obj = A.sum(Data(sw, name="sample_weight") * A.square(r)) / (2.0 * float(sw.sum()))
        return obj, w, b, []

    def predict(self, X: Any) -> np.ndarray:
        return self._linear_predictor(X)


class SparsePoissonRegression(RegressorMixin, _SingleOutput):
    """Poisson regression (log link) with at most k nonzero coefficients:
    min sum_i s_i (exp(z_i) - y_i z_i) / sum_i s_i, z = X w + b. ``score`` is D^2, the fraction of
    Poisson deviance explained (as scikit-learn's PoissonRegressor)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags

    def _check_target(self, y):
        if np.any(y < 0):
            raise ValueError("Poisson regression needs nonnegative targets (counts); some y are negative")

    def _loss(self, X, y, sw):
        n, p = X.shape
        w = Variable(p, name="w")
        b = Variable((), name="b") if self.fit_intercept else None
        z = linear(Data(X, name="X"), w, b)
        obj = A.sum(Data(sw, name="sample_weight") * (A.exp(z) - Data(y, name="y") * z)) / float(sw.sum())
        return obj, w, b, []

    def predict(self, X: Any) -> np.ndarray:
        return np.exp(self._linear_predictor(X))

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        return float(d2_tweedie_score(y, self.predict(X), sample_weight=sample_weight, power=1))


class SparseGammaRegression(RegressorMixin, _SingleOutput):
    """Gamma regression with at most k nonzero coefficients, for positive continuous targets (costs,
    durations). The loss is the Gamma negative log-likelihood up to the dispersion, -log f(y; mu) =
    y / mu + log mu, summed with the sample weights and divided by their sum; ``link``:

    * ``"log"`` (default; scikit-learn's ``GammaRegressor``): mu = exp(z), the loss y exp(-z) + z;
    * ``"inverse"`` (the canonical link, R's and statsmodels' ``Gamma()`` default; abess's
      ``GammaRegression`` writes eta = -1/mu, i.e. its coefficients are minus these): 1/mu = z > 0,
      the loss y z - log z; z must stay positive, and a fit starts with the intercept off 0.

    z = X w + b. ``score`` is D^2, the fraction of Gamma deviance explained. The information criteria
    read the Gamma likelihood with its shape profiled out (:func:`gamma_profile_nll`), as the
    Gaussian's reads n log(RSS / n): abess reads the loss with dispersion 1, which on its own Gamma
    test data (shape about 14) chose no feature at all (docs/estimators.md). ``k="cv"`` reads the
    held-out loss."""

    def __init__(
        self,
        k: int | str = DEFAULT_K,
        *,
        link: str = "log",
        fit_intercept: bool = True,
        always_select: Any = None,
        solver: str = "auto",
        solver_options: dict[str, Any] | None = None,
        k_max: int | None = None,
        cv: Any = 5,
        random_state: int | None = 0,
        alpha: float = 0.0,
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
        self.link = link

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags

    def _check_target(self, y):
        if self.link not in ("log", "inverse"):
            raise ValueError(f"link={self.link!r}: choose 'log' or 'inverse'")
        if np.any(y <= 0):
            raise ValueError("Gamma regression needs positive targets; some y are zero or negative")

    def _loss(self, X, y, sw):
        n, p = X.shape
        w = Variable(p, name="w")
        b = Variable((), name="b") if self.fit_intercept else None
        z = linear(Data(X, name="X"), w, b)
        yd, swd = Data(y, name="y"), Data(sw, name="sample_weight")
        per = yd * A.exp(-z) + z if self.link == "log" else yd * z - A.log(z)
        return A.sum(swd * per) / float(sw.sum()), w, b, []

    def _likelihood(self, X, y, sw, coef, intercept):
        def likelihood(res: Any) -> Likelihood:
            w = np.asarray(res.values[coef.name], dtype=float)
            z = np.asarray(X @ w).ravel() + (float(res.values[intercept.name]) if intercept is not None else 0.0)
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                mu = np.exp(z) if self.link == "log" else 1.0 / z
            used = int(np.count_nonzero(w))
            free = (intercept is not None) + 1  # the intercept and the shape
            return Likelihood(gamma_profile_nll(y, mu, sw), float(sw.sum()), used + free, used)

        return likelihood

    def predict(self, X: Any) -> np.ndarray:
        z = self._linear_predictor(X)
        if self.link == "log":
            return np.exp(z)
        with np.errstate(divide="ignore"):
            return 1.0 / z

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        return float(d2_tweedie_score(y, self.predict(X), sample_weight=sample_weight, power=2))


class SparseMultiTaskRegression(RegressorMixin, LinearModel):
    """Multi-task least squares with row-group sparsity: a matrix response Y (samples x tasks) and a
    coefficient matrix W (features x tasks) whose rows are groups, so that k counts the features used
    by any task (``nnz(W, groups=rows) <= k``, abess's ``MultiTaskRegression``):
    min sum_i s_i ||x_i'W + b - y_i||^2 / (2 sum_i s_i) + alpha/2 ||W||_F^2 / sum_i s_i.
    ``coef_`` is tasks x features (as scikit-learn's ``MultiTaskLasso``), ``intercept_`` one per
    task; a 1-d y is one task, and ``predict`` then returns a 1-d array. ``score`` is R^2 averaged
    over the tasks."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SparseMultiTaskRegression:
        X, Y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, y_numeric=True, multi_output=True)
        self._one_task = Y.ndim == 1
        Y = Y.reshape(len(Y), -1)
        W, b = self._fit(X, Y, sample_weight)
        self.coef_ = W.T.copy()
        self.intercept_ = b.copy() if b is not None else np.zeros(Y.shape[1])
        if self._one_task:
            self.coef_, self.intercept_ = self.coef_[0], float(self.intercept_[0])
        self._set_support(self.coef_)
        return self

    def _loss(self, X, Y, sw):
        n, p = X.shape
        m = Y.shape[1]
        W = Variable((p, m), name="W")
        b = Variable(m, name="b") if self.fit_intercept else None
        R = linear(Data(X, name="X"), W, b) - Data(Y, name="Y")
        obj = A.sum(Data(sw[:, None], name="sample_weight") * A.square(R)) / (2.0 * float(sw.sum()))
        return obj, W, b, []

    def _likelihood(self, X, Y, sw, coef, intercept):
        """The Gaussian likelihood of the n m entries, with every coefficient of a kept row a
        parameter: deviance n m log(RSS / (n m)), df = the nonzero coefficients (+ the intercepts).
        ``Problem.select``'s EBIC counts a selected group once (right for the softmax, whose classes
        share one feature: docs/selection.md); here each task's coefficient is fitted to its own
        column, and counting the row once kept noise rows (docs/estimators.md)."""
        n, m = Y.shape

        def likelihood(res: Any) -> Likelihood:
            W = np.asarray(res.values[coef.name], dtype=float)
            b = np.asarray(res.values[intercept.name], dtype=float) if intercept is not None else 0.0
            R = Y - (np.asarray(X @ W) + b)
            rss = float(np.sum(sw[:, None] * R**2))
            df = int(np.count_nonzero(W)) + (m if intercept is not None else 0)
            return Likelihood(
                rss, float(sw.sum()) * m, df, int(np.count_nonzero(np.any(W != 0, axis=1))), gaussian=True
            )

        return likelihood

    def _units(self, coef):
        p, m = coef.shape
        groups = np.repeat(np.arange(p), m)
        return p - len(self._always), lambda k, free: nnz(coef, groups=groups, free=free or None) <= k

    def _free_positions(self, coef):
        p, m = coef.shape
        return [i * m + j for i in self._always for j in range(m)]

    def predict(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        Y = np.asarray(X @ np.atleast_2d(self.coef_).T) + self.intercept_
        return Y[:, 0] if self._one_task else Y


class SparseLogisticRegression(ClassifierMixin, LinearModel):
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
        cv: Any = 5,
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

    def _auto_alpha(self) -> float:
        return 1e-4 if len(self.classes_) == 2 else 0.1

    def _loss(self, X, y, sw):
        n, p = X.shape
        K = len(self.classes_)
        Xd = Data(X, name="X")
        swd = Data(sw, name="sample_weight")
        if K == 2:
            w = Variable(p, name="w")
            b = Variable((), name="b") if self.fit_intercept else None
            v = Data(np.where(y == self.classes_[1], 1.0, -1.0), name="y")
            obj = A.sum(swd * A.logistic(-v * linear(Xd, w, b))) / float(sw.sum())
            return obj, w, b, []
        if self.multinomial not in ("groups", "reference"):
            raise ValueError(f"multinomial={self.multinomial!r}: choose 'groups' or 'reference'")
        W = Variable((p, K), name="W")
        b = Variable(K, name="b") if self.fit_intercept else None
        Y = Data(np.eye(K)[np.searchsorted(self.classes_, y)], name="Y")
        Z = linear(Xd, W, b)
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
        X, y = self._validate_xy(X, y, accept_sparse="csr", dtype=np.float64)
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
        self._set_support(self.coef_)
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


__all__ = [
    "LinearModel",
    "SparseGammaRegression",
    "SparseLinearRegression",
    "SparseLogisticRegression",
    "SparseMultiTaskRegression",
    "SparsePoissonRegression",
    "linear",
]
