"""abess's grid searches through scikit-learn, with our estimators and abess's side by side.

abess's ``test_{gaussian,binomial,poisson,cox}_sklearn`` (python/pytest/test_alg.py, commit f6dbcc0f)
run ``GridSearchCV`` over the support size and the ridge with ``KFold(5, shuffle=True,
random_state=0)`` on its saved data (tests/data/abess_*_sklearn.npz) and assert that the best support
size is the truth's, 3, and the best ridge 0. This script runs the same grids for our estimators
(``k`` and ``alpha``; scored by each estimator's ``score``: R^2, accuracy, D^2, the concordance index)
and for abess's (``support_size`` and ``alpha``, its ``important_search=10`` as in its tests), and
prints the chosen parameters, the best mean score and the wall time of each search (one process,
``n_jobs=1``, one BLAS thread). abess has no grid-search test for its Gamma, multi-task and ordinal
estimators; for them (``--families gamma,multitask,ordinal``) the same search runs over k alone
(0..10, each estimator's other defaults) on the data of abess's ``test_gamma`` (its first 2000 of
10000 samples), ``test_multigaussian`` and ``test_ordinal``. abess's SparsePCA and RobustPCA have no
``score``, so no grid search can run them, and abess has no Gaussian precision estimator.
docs/estimators.md holds the figures and explains every difference.

    python benchmarks/estimators_grid.py [--families gaussian,binomial,poisson,cox,gamma,multitask,ordinal]
                                         [--no-abess]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import GridSearchCV, KFold
from threadpoolctl import threadpool_limits

from sparsemodel.sklearn import (
    SparseCoxPHSurvivalAnalysis,
    SparseGammaRegression,
    SparseLinearRegression,
    SparseLogisticRegression,
    SparseMultiTaskRegression,
    SparseOrdinalRegression,
    SparsePoissonRegression,
)

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
OURS = {
    "gaussian": SparseLinearRegression,
    "binomial": SparseLogisticRegression,
    "poisson": SparsePoissonRegression,
    "cox": SparseCoxPHSurvivalAnalysis,
    "gamma": lambda: SparseGammaRegression(link="inverse"),  # abess's Gamma: the canonical link
    "multitask": SparseMultiTaskRegression,
    "ordinal": SparseOrdinalRegression,
}
FILES = {"multitask": "abess_multigaussian.npz", "gamma": "abess_gamma.npz", "ordinal": "abess_ordinal.npz"}
K_ONLY = ("gamma", "multitask", "ordinal")
ABESS = {
    "gaussian": "LinearRegression",
    "binomial": "LogisticRegression",
    "poisson": "PoissonRegression",
    "cox": "CoxPHSurvivalAnalysis",
    "gamma": "GammaRegression",
    "multitask": "MultiTaskRegression",
    "ordinal": "OrdinalRegression",
}


def grid(family: str) -> tuple[list[int], list[float]]:
    """abess's grids: support sizes 0..20 and ridges 0..0.4; Cox: 1..10 and 0..0.3; the families
    abess has no grid test for: k = 0..10 and no ridge grid."""
    if family in K_ONLY:
        return list(range(11)), []
    if family == "cox":
        return sorted(set(np.linspace(1, 10, 11, dtype="int32").tolist())), [0.0, 0.1, 0.2, 0.3]
    return list(range(21)), [0.0, 0.1, 0.2, 0.3, 0.4]


def search(est, params: dict, X: np.ndarray, y: np.ndarray) -> tuple[dict, float, float]:
    cv = KFold(n_splits=5, shuffle=True, random_state=0)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = GridSearchCV(est, params, cv=cv, n_jobs=1).fit(X, y)
    return g.best_params_, float(g.best_score_), time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="gaussian,binomial,poisson,cox")
    ap.add_argument("--no-abess", action="store_true")
    args = ap.parse_args()
    abess = None
    if not args.no_abess:
        try:
            import abess
        except ImportError:
            print("abess is not installed: ours only")
    with threadpool_limits(1):
        for family in args.families.split(","):
            d = np.load(DATA / FILES.get(family, f"abess_{family}_sklearn.npz"))
            X, y, truth = d["x"], d["y"], np.unique(np.nonzero(d["coef"])[0])
            if family == "gamma":
                X, y = X[:2000], y[:2000]
            ks, alphas = grid(family)
            print(f"{family}: n = {X.shape[0]}, p = {X.shape[1]}, true support {truth.tolist()}")
            ours = {"k": ks, "alpha": alphas} if alphas else {"k": ks}
            best, score, sec = search(OURS[family](), ours, X, y)
            print(
                f"  ours : k = {best['k']}, alpha = {best.get('alpha', 'default')}, mean score {score:.4f}, {sec:.1f} s"
            )
            if abess is not None:
                est = getattr(abess, ABESS[family])()
                if family == "cox":  # abess's own test: these options, its EBIC inside each fit
                    est = abess.CoxPHSurvivalAnalysis(
                        path_type="seq",
                        ic_type="ebic",
                        screening_size=20,
                        s_min=1,
                        s_max=X.shape[1],
                        cv=5,
                        exchange_num=2,
                        primary_model_fit_max_iter=30,
                        primary_model_fit_epsilon=1e-6,
                        approximate_Newton=True,
                        ic_coef=1.0,
                        thread=1,
                    )
                params = {"support_size": ks, "important_search": [10], **({"alpha": alphas} if alphas else {})}
                best, score, sec = search(est, params, X, y)
                print(
                    f"  abess: support_size = {best['support_size']}, alpha = {best.get('alpha', 'default')}, "
                    f"mean score {score:.4f}, {sec:.1f} s"
                )


if __name__ == "__main__":
    main()
