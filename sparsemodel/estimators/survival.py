"""Sparse Cox proportional-hazards regression in scikit-survival's conventions.

The model is the builder's ``cox(X @ w, time, event, weights=sample_weight, ties=ties)`` (docs/atoms.md,
docs/language.md) divided by the sum of the case weights, with at most k nonzero coefficients; the
base fits it (k by EBIC over the events by default, ``k="cv"``, or an int). What scikit-survival's
``CoxPHSurvivalAnalysis`` offers besides:

* ``y``: a structured array whose first field is the event indicator and second the time
  (``sksurv.util.Surv.from_arrays(event, time)``), an n x 2 array of (time, event) pairs
  (abess's layout), or a vector of times when every event was observed (lifelines' convention
  without an event column);
* ``predict(X)``: the risk score x'w (a larger score, an earlier event);
* ``score(X, y)``: Harrell's concordance index of the risk scores (:func:`concordance_index_censored`);
* ``predict_cumulative_hazard_function`` / ``predict_survival_function``: Breslow's estimator of the
  baseline cumulative hazard (Breslow 1972, the ``cum_baseline_hazard_`` step function),
  H(t | x) = H_0(t) exp(x'w) and S(t | x) = exp(-H(t | x)).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_consistent_length, validate_data

from ..model import atoms as A
from ..model.expr import Data, Variable
from .base import DEFAULT_K
from .linear_model import LinearModel


class StepFunction:
    """A right-continuous step function t -> a * y[i] + b, i the last index with x[i] <= t; before
    x[0] the value is a * y0 + b (``y0``: the value before the first step, 0 for a cumulative hazard,
    1 for a survival function), after the last x the last value. ``x``, ``y``, ``a`` and ``b`` are
    scikit-survival's ``StepFunction`` attributes."""

    def __init__(self, x: np.ndarray, y: np.ndarray, a: float = 1.0, b: float = 0.0, y0: float = 0.0):
        self.x, self.y, self.a, self.b, self.y0 = np.asarray(x), np.asarray(y), float(a), float(b), float(y0)

    def __call__(self, t: Any) -> Any:
        t = np.asarray(t, dtype=float)
        i = np.searchsorted(self.x, t, side="right") - 1
        vals = np.where(i >= 0, self.y[np.maximum(i, 0)], self.y0)
        out = self.a * vals + self.b
        return float(out) if out.ndim == 0 else out

    def __repr__(self) -> str:
        return f"StepFunction(x=<{len(self.x)} times>, a={self.a:g}, b={self.b:g})"


def survival_target(y: Any) -> tuple[np.ndarray, np.ndarray]:
    """(event as bool, time as float) of a survival target: a structured array (first field the
    event indicator, second the time: scikit-survival's ``Surv.from_arrays``), an n x 2 array of
    (time, event) pairs, or a vector of times, every event observed (lifelines without an event
    column)."""
    arr = np.asarray(y)
    if arr.dtype.names is not None:
        if len(arr.dtype.names) != 2:
            raise ValueError(
                f"a survival target has two fields (the event indicator, then the time); got {arr.dtype.names}"
            )
        event, time = arr[arr.dtype.names[0]], arr[arr.dtype.names[1]]
    elif arr.ndim == 2 and arr.shape[1] == 2:
        time, event = arr[:, 0], arr[:, 1]
    elif arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 1):
        time, event = arr.ravel(), np.ones(arr.shape[0])  # times only: every event observed (lifelines)
    else:
        raise ValueError(
            "a survival target is a structured array of (event, time), as scikit-survival's "
            "Surv.from_arrays(event, time) makes, an n x 2 array of (time, event) pairs, or a vector of "
            f"times when every event was observed; got shape {arr.shape}"
        )
    try:
        time = np.asarray(time, dtype=float).ravel()
        ev = np.asarray(event, dtype=float).ravel()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the survival target's times and event indicators must be numbers: {exc}") from exc
    if not np.all(np.isfinite(time)):
        raise ValueError("the survival times must be finite numbers")
    if not np.all(np.isin(ev, (0.0, 1.0))):
        raise ValueError("the event indicator must be 0/1 or boolean (1: the event was observed, 0: censored)")
    return ev.astype(bool), time


def concordance_index_censored(
    event: Any, time: Any, estimate: Any, sample_weight: Any = None
) -> tuple[float, float, float, float, float]:
    """Harrell's concordance index (Harrell et al. 1982) of risk scores ``estimate`` (a larger score,
    an earlier event), as scikit-survival's ``concordance_index_censored`` defines it: a pair (i, j) is
    comparable when i had the event and time_j > time_i, or time_j == time_i with j censored;
    concordant when estimate_i > estimate_j, a tie in the estimates counting one half. With
    ``sample_weight`` a pair counts w_i w_j (a weight of 2, the subject repeated). Returns
    (c-index, concordant, discordant, tied risks, tied times) -- tied times: pairs of events at the
    same time, not comparable."""
    event = np.asarray(event, dtype=bool).ravel()
    time = np.asarray(time, dtype=float).ravel()
    est = np.asarray(estimate, dtype=float).ravel()
    check_consistent_length(event, time, est)
    w = np.ones(len(time)) if sample_weight is None else np.asarray(sample_weight, dtype=float).ravel()
    check_consistent_length(time, w)
    if not np.all(np.isfinite(est)):
        raise ValueError("the risk scores have values that are not finite numbers")
    conc = disc = tied_risk = tied_time = 0.0
    for i in np.flatnonzero(event & (w > 0)):
        later = (time > time[i]) | ((time == time[i]) & ~event)
        wi = w[i] * w[later]
        e = est[later]
        conc += float(wi[e < est[i]].sum())
        disc += float(wi[e > est[i]].sum())
        tied_risk += float(wi[e == est[i]].sum())
        same = (time == time[i]) & event
        same[i] = False
        tied_time += float((w[i] * w[same]).sum()) / 2.0
    total = conc + disc + tied_risk
    if total == 0:
        raise ValueError("no comparable pair: the concordance index needs at least one event before another time")
    return (conc + 0.5 * tied_risk) / total, conc, disc, tied_risk, tied_time


class SparseCoxPHSurvivalAnalysis(LinearModel):
    """Cox proportional hazards with at most k nonzero coefficients (the module docstring):
    min [cox(X w, time, event, weights=s, ties) + alpha/2 ||w||^2] / sum_i s_i,
    nnz(w, free=always_select) <= k. No intercept (it cancels in the partial likelihood).
    ``ties``: ``"efron"`` (default; R's coxph, lifelines) or ``"breslow"`` (statsmodels' PHReg).
    Sample weights are case weights (R's ``coxph(weights=)``, lifelines' ``weights_col``).
    ``alpha="auto"`` is 1e-4, as for logistic regression: with few events the partial likelihood
    often has no maximum (a few covariates order the event times perfectly), and EBIC then chose
    those (abess's Cox grid-search data, 26 events: k = 6 at alpha = 0, the true 3 at 1e-4 and 1e-3);
    alpha=0 removes the ridge."""

    def __init__(
        self,
        k: int | str = DEFAULT_K,
        *,
        ties: str = "efron",
        always_select: Any = None,
        solver: str = "auto",
        solver_options: dict[str, Any] | None = None,
        k_max: int | None = None,
        cv: Any = 5,
        random_state: int | None = 0,
        alpha: float | str = "auto",
    ):
        self.k = k
        self.ties = ties
        self.always_select = always_select
        self.solver = solver
        self.solver_options = solver_options
        self.k_max = k_max
        self.cv = cv
        self.random_state = random_state
        self.alpha = alpha

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    def _auto_alpha(self) -> float:
        return 1e-4

    def _expected_failures(self) -> dict[str, str]:
        if self.ties != "efron":
            return {}
        why = (
            "with Efron's tie rule a case weight of 2 is not the subject repeated: two copies tie at their "
            "time and Efron's correction treats the tie (R's coxph documents the same); ties='breslow' passes"
        )
        return {
            "check_sample_weight_equivalence_on_dense_data": why,
            "check_sample_weight_equivalence_on_sparse_data": why,
        }

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SparseCoxPHSurvivalAnalysis:
        """Fit on covariates X and the survival target y ((event, time) or (time, event) pairs)."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64)
        event, time = survival_target(y)
        check_consistent_length(X, time)
        if self.ties not in ("efron", "breslow"):
            raise ValueError(f"ties={self.ties!r}: choose 'efron' or 'breslow'")
        sw = self._weights(sample_weight, X)
        w, _ = self._fit(X, (event, time), sw)
        self.coef_ = w
        self._set_support(w)
        self._fit_baseline(np.asarray(X @ w).ravel(), event, time, sw)
        return self

    def _loss(self, X, y, sw):
        event, time = y
        n, p = X.shape
        w = Variable(p, name="w")
        z = Data(X, name="X") @ w
        weights = None if np.all(sw == 1.0) else Data(sw, name="sample_weight")
        loss = A.cox(
            z, Data(time, name="time"), Data(event.astype(float), name="event"), weights=weights, ties=self.ties
        )
        return loss / float(sw.sum()), w, None, []

    def _fit_baseline(self, z: np.ndarray, event: np.ndarray, time: np.ndarray, sw: np.ndarray) -> None:
        """Breslow's baseline cumulative hazard: H_0(t) = sum over the event times t_k <= t of
        (the weight of the events at t_k) / sum_{time_j >= t_k} w_j exp(z_j)."""
        order = np.argsort(time, kind="mergesort")
        t, e, w, r = time[order], event[order], sw[order], sw[order] * np.exp(z[order] - z.max())
        uniq, start = np.unique(t, return_index=True)
        at_risk = np.cumsum(r[::-1])[::-1][start]  # sum over time_j >= t_k (sorted: from t_k's first row on)
        deaths = np.add.reduceat(np.where(e, w, 0.0), start)
        with np.errstate(divide="ignore", invalid="ignore"):
            jumps = np.where(deaths > 0, deaths / at_risk, 0.0) * np.exp(-z.max())
        self.unique_times_ = uniq
        self.cum_baseline_hazard_ = StepFunction(uniq, np.cumsum(jumps))
        self.baseline_survival_ = StepFunction(uniq, np.exp(-np.cumsum(jumps)), y0=1.0)

    def predict(self, X: Any) -> np.ndarray:
        """The risk score x'w of each sample (a larger score, an earlier event)."""
        X = self._validate_predict(X)
        return np.asarray(X @ self.coef_).ravel()

    def predict_cumulative_hazard_function(self, X: Any, return_array: bool = False) -> np.ndarray:
        """H(t | x) = H_0(t) exp(x'w): one :class:`StepFunction` per sample, or with ``return_array``
        the values at ``unique_times_`` (samples x times)."""
        risk = np.exp(self.predict(X))
        H0 = self.cum_baseline_hazard_
        if return_array:
            return risk[:, None] * H0.y[None, :]
        return np.array([StepFunction(H0.x, H0.y, a=r) for r in risk], dtype=object)

    def predict_survival_function(self, X: Any, return_array: bool = False) -> np.ndarray:
        """S(t | x) = exp(-H_0(t) exp(x'w)) = S_0(t)^exp(x'w): one :class:`StepFunction` per sample
        (1 before the first time), or with ``return_array`` the values at ``unique_times_``."""
        risk = np.exp(self.predict(X))
        H0 = self.cum_baseline_hazard_
        S = np.exp(-risk[:, None] * H0.y[None, :])
        if return_array:
            return S
        return np.array([StepFunction(H0.x, row, y0=1.0) for row in S], dtype=object)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Harrell's concordance index of the risk scores on (X, y) (:func:`concordance_index_censored`)."""
        event, time = survival_target(y)
        return float(concordance_index_censored(event, time, self.predict(X), sample_weight)[0])


__all__ = ["SparseCoxPHSurvivalAnalysis", "StepFunction", "concordance_index_censored", "survival_target"]
