"""The scikit-learn estimators against abess's on the small problems most statisticians fit: one
``fit`` as a user calls it (the input checks, the model, its lowering, the solve, the bound), at a
fixed k and with the default choice of k (our EBIC, abess's default path with its GIC), n = 100
and 200 rows, p = 20 and 50 columns, least squares, logistic and Poisson regression.

The data are seeded Gaussian designs with 3 (or 5) true coefficients; every fit is timed alternately
with abess's on the same data (``--repeat`` runs each, medians), with one BLAS thread for everyone
(benchmarks/pinning.py). Printed per case: both medians and their ratio; then the median ratio per
estimator and k, checked against the target of the lean-path work (at most abess's time).

    python benchmarks/small_estimators.py                  # 3 seeds, 15 runs each
    python benchmarks/small_estimators.py --seeds 5 --repeat 31
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from pinning import pinned

SIZES = [(100, 20, 3), (200, 50, 5)]


def data(family: str, n: int, p: int, s: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[rng.choice(p, s, replace=False)] = rng.uniform(0.5, 1.0, s) * rng.choice([-1.0, 1.0], s)
    z = X @ beta
    if family == "linear":
        return X, z + rng.standard_normal(n)
    if family == "logistic":
        return X, (rng.random(n) < 1.0 / (1.0 + np.exp(-z))).astype(float)
    return X, rng.poisson(np.exp(0.5 * z)).astype(float)


def contenders(family: str, k: int | None) -> tuple[Callable[..., Any], Callable[..., Any]]:
    import abess

    from sparsemodel.sklearn import SparseLinearRegression, SparseLogisticRegression, SparsePoissonRegression

    ours = {"linear": SparseLinearRegression, "logistic": SparseLogisticRegression, "poisson": SparsePoissonRegression}
    theirs = {
        "linear": abess.LinearRegression,
        "logistic": abess.LogisticRegression,
        "poisson": abess.PoissonRegression,
    }
    mine, other = ours[family], theirs[family]

    def fit_ours(X: np.ndarray, y: np.ndarray) -> Any:
        return (mine(k=k) if k is not None else mine()).fit(X, y)

    def fit_abess(X: np.ndarray, y: np.ndarray) -> Any:
        return (other(support_size=[k]) if k is not None else other()).fit(X, y)

    return fit_ours, fit_abess


def timed(f: Callable[..., Any], *args: Any) -> float:
    t0 = time.perf_counter()
    f(*args)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=15, help="timed fits per contender and case (medians)")
    ap.add_argument("--families", default="linear,logistic,poisson")
    a = ap.parse_args()
    try:
        import abess  # noqa: F401
    except ImportError:
        raise SystemExit("abess is not installed: pip install -e '.[bench]'") from None
    warnings.simplefilter("ignore")
    ratios: dict[tuple[str, str], list[float]] = {}
    with pinned(1):
        for family in a.families.split(","):
            for n, p, s in SIZES:
                for kname, k in (("k fixed", s), ("default k", None)):
                    fo, fa = contenders(family, k)
                    for seed in range(a.seeds):
                        X, y = data(family, n, p, s, seed)
                        fo(X, y), fa(X, y)  # (first calls: imports, caches)
                        to, ta = [], []
                        for _ in range(a.repeat):
                            to.append(timed(fo, X, y))
                            ta.append(timed(fa, X, y))
                        mo, ma = statistics.median(to), statistics.median(ta)
                        ratios.setdefault((family, kname), []).append(mo / ma)
                        print(
                            f"{family:8s} n={n:4d} p={p:3d} {kname:9s} seed {seed}: ours {1e3 * mo:7.3f} ms, "
                            f"abess {1e3 * ma:7.3f} ms, ratio {mo / ma:5.2f}",
                            flush=True,
                        )
    print("\nmedian ratio of ours to abess over sizes and seeds (target: at most 1)")
    for (family, kname), r in ratios.items():
        med = statistics.median(r)
        print(f"  {family:8s} {kname:9s} {med:5.2f}  ({'holds' if med <= 1.0 else 'fails'})")


if __name__ == "__main__":
    main()
