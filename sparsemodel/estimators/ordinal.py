"""Sparse ordinal regression: the cumulative logit (proportional odds) model of McCullagh (1980),
P(y <= j | x) = sigmoid(theta_j - x'w), over the builder's ``ordinal(X @ w, theta, y)`` (docs/language.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ..model import atoms as A
from ..model.expr import Data, Variable
from .base import DEFAULT_K
from .linear_model import LinearModel


class SparseOrdinalRegression(ClassifierMixin, LinearModel):
    """Ordinal regression with at most k nonzero coefficients:
    min [ordinal(X w, theta, y, weights=s) + alpha/2 ||w||^2] / sum_i s_i  s.t.  nnz(w, free=always_select) <= k,
    with the J - 1 cut-points theta free (never counted) and kept in order by the loss itself.

    The classes are ordered as ``np.unique`` sorts them (``classes_``); a larger x'w moves y up
    (McCullagh's sign; abess's ``OrdinalRegression`` writes P(y <= j) = sigmoid(x'beta + eps_j), so
    its beta is -w). ``predict`` is the most probable class, ``predict_proba`` the class
    probabilities, ``cutpoints_`` theta; ``score`` is the accuracy (x'w is no decision function in
    scikit-learn's sense: with two classes its threshold is theta, not 0).
    ``alpha="auto"`` is 1e-4: as for logistic regression, separable data (common at small n) has no
    maximum likelihood, and this ridge gives it one without moving the choice of k. Sample weights
    are case weights (an integer weight is the sample repeated)."""

    def __init__(
        self,
        k: int | str = DEFAULT_K,
        *,
        always_select: Any = None,
        solver: str = "auto",
        solver_options: dict[str, Any] | None = None,
        k_max: int | None = None,
        cv: Any = 5,
        random_state: int | None = 0,
        alpha: float | str = "auto",
    ):
        self.k = k
        self.always_select = always_select
        self.solver = solver
        self.solver_options = solver_options
        self.k_max = k_max
        self.cv = cv
        self.random_state = random_state
        self.alpha = alpha

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # scikit-learn's classifier checks ask for 83 % accuracy on three blobs at the corners of a
        # triangle in the plane, classes no single direction orders: the model's one latent score
        # cannot rank them (poor_score skips that threshold and nothing else)
        tags.classifier_tags.poor_score = True
        return tags

    def _auto_alpha(self) -> float:
        return 1e-4

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SparseOrdinalRegression:
        """Fit on X and the ordered labels y (their sorted distinct values are the levels)."""
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes; got 1 class")
        w, _ = self._fit(X, np.searchsorted(self.classes_, y), sample_weight)
        self.coef_ = w
        self.cutpoints_ = np.asarray(self.result_.values["theta"], dtype=float).ravel()
        self._set_support(w)
        return self

    def _loss(self, X, codes, sw):
        n, p = X.shape
        w = Variable(p, name="w")
        theta = Variable(len(self.classes_) - 1, name="theta")
        weights = None if np.all(sw == 1.0) else Data(sw, name="sample_weight")
        loss = A.ordinal(Data(X, name="X") @ w, theta, Data(codes.astype(float), name="y"), weights=weights)
        return loss / float(sw.sum()), w, None, []

    def predict_proba(self, X: Any) -> np.ndarray:
        """P(y = class j | x) = sigmoid(theta_j - x'w) - sigmoid(theta_{j-1} - x'w), one column per class."""
        z = np.asarray(self._validate_predict(X) @ self.coef_).ravel()
        cdf = expit(self.cutpoints_[None, :] - z[:, None])
        ones = np.ones((len(z), 1))
        return np.diff(np.hstack([0.0 * ones, cdf, ones]), axis=1)

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each sample."""
        P = self.predict_proba(X)
        return self.classes_[np.argmax(P, axis=1)]


__all__ = ["SparseOrdinalRegression"]
