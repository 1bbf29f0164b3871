"""scikit-learn estimators, each a thin layer over the model it writes (docs/estimators.md).

The public path is :mod:`sparsemodel.sklearn`, which re-exports everything here.
"""

from __future__ import annotations

from typing import Any

from .base import CHOOSERS, DEFAULT_K, SparseEstimator
from .covariance import SparsePrecision
from .decomposition import RobustPCA, SparsePCA
from .linear_model import (
    SparseGammaRegression,
    SparseLinearRegression,
    SparseLogisticRegression,
    SparseMultiTaskRegression,
    SparsePoissonRegression,
)
from .ordinal import SparseOrdinalRegression
from .survival import SparseCoxPHSurvivalAnalysis, StepFunction, concordance_index_censored


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """The checks of scikit-learn's ``check_estimator`` that ``estimator`` fails by design, each with
    the reason: pass it as ``check_estimator(est, expected_failed_checks=...)`` or
    ``parametrize_with_checks(..., expected_failed_checks=expected_failed_checks)``."""
    return dict(estimator._expected_failures()) if isinstance(estimator, SparseEstimator) else {}


__all__ = [
    "CHOOSERS",
    "DEFAULT_K",
    "RobustPCA",
    "SparseCoxPHSurvivalAnalysis",
    "SparseEstimator",
    "SparseGammaRegression",
    "SparseLinearRegression",
    "SparseLogisticRegression",
    "SparseMultiTaskRegression",
    "SparseOrdinalRegression",
    "SparsePCA",
    "SparsePoissonRegression",
    "SparsePrecision",
    "StepFunction",
    "concordance_index_censored",
    "expected_failed_checks",
]
