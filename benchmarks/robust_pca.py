"""Robust PCA, X = L + S with rank(L) <= r and nnz(S) <= s: sparsemodel's solvers of
the product of sets against abess's RobustPCA, in the same process, one BLAS thread for everyone.

1. **abess's own test problem** (python/pytest test_RPCA: n = 100, p = 20, r = 5, s = 30, seed 2,
   ``sparsemodel.datasets.low_rank_plus_sparse``): the outliers found (true positions among the s
   selected), rank(L), the relative errors of L and S, the objective ||X - L - S||^2 / 2 and the
   median time of ``--repeats`` runs, with its ratio to abess's.
2. **The same generator over seeds** (``--seeds``, and a larger size): how often each recovers every
   outlier, the median relative error of L, the median time.

abess returns S (``coef_``); its L is the rank-r fit of X with the outliers removed, the fixed point
of its "hard impute" step, L = P_r(X - S). Our rows: ``auto`` (the default: FGraHTP, the joint
gradient step truncated part by part, then GraHTP from its end point, which refits both on the
column space of L and the support of S), ``grahtp``, ``iht`` and ``fgrahtp``, all through the set
protocol (each part projected by its own set: the truncated SVD, the top s entries); and, as a
measurement of the
alternative the issue names, **alternating** hard thresholding written here in NumPy (GoDec, Zhou &
Tao, ICML 2011: L = P_r(X - S), then S = P_s(X - L), until the objective stops decreasing), which
the product of sets does not offer because it recovers less (see the table).

    python benchmarks/robust_pca.py [--seeds 10] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from pinning import pinned
from tabulate import tabulate

import sparsemodel as sm
from sparsemodel.datasets import low_rank_plus_sparse

SOLVERS = ("auto", "grahtp", "iht", "fgrahtp")


def truncated(M: np.ndarray, r: int) -> np.ndarray:
    U, s, Vt = np.linalg.svd(M, full_matrices=False)
    return (U[:, :r] * s[:r]) @ Vt[:r]


def top(M: np.ndarray, s: int) -> np.ndarray:
    out = np.zeros_like(M)
    idx = np.argpartition(-np.abs(M).ravel(), s - 1)[:s]
    out.flat[idx] = M.flat[idx]
    return out


def abess_rpca(X: np.ndarray, r: int, s: int) -> tuple[np.ndarray, np.ndarray]:
    from abess.decomposition import RobustPCA

    model = RobustPCA(support_size=s)
    model.fit(X, r=r)
    S = np.asarray(model.coef_)
    return truncated(X - S, r), S


def alternating(X: np.ndarray, r: int, s: int, max_iter: int = 5000) -> tuple[np.ndarray, np.ndarray]:
    """GoDec (Zhou & Tao 2011) without its randomized projection: exact alternating minimization."""
    S = np.zeros_like(X)
    f_old = np.inf
    for _ in range(max_iter):
        L = truncated(X - S, r)
        S = top(X - L, s)
        f = 0.5 * float(np.sum((X - L - S) ** 2))
        if f_old - f <= 1e-14 * max(1.0, f):
            break
        f_old = f
    return L, S


def ours(solver: str, r: int, s: int) -> Any:
    def run(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        L = sm.Variable(X.shape, name="L")
        S = sm.Variable(X.shape, name="S")
        prob = sm.Problem(sm.minimize(sm.sum_squares(X - L - S) / 2), [sm.rank(L) <= r, sm.nnz(S) <= s])
        res = prob.solve(solver)
        return res.values["L"], res.values["S"]

    return run


def measure(fit: Any, X: np.ndarray, L0: np.ndarray, S0: np.ndarray, repeats: int) -> dict[str, Any]:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        L, S = fit(X)
        times.append(time.perf_counter() - t)
    found = len(set(np.flatnonzero(S)) & set(np.flatnonzero(S0)))
    return {
        "found": found,
        "rank": int(np.linalg.matrix_rank(L, tol=1e-8 * max(np.abs(L).max(), 1e-300))),
        "L_err": float(np.linalg.norm(L - L0) / np.linalg.norm(L0)),
        "S_err": float(np.linalg.norm(S - S0) / np.linalg.norm(S0)),
        "objective": 0.5 * float(np.sum((X - L - S) ** 2)),
        "time": statistics.median(times),
    }


def contenders(r: int, s: int) -> dict[str, Any]:
    out: dict[str, Any] = {"abess": lambda X: abess_rpca(X, r, s)}
    out.update({f"sparsemodel {n}": ours(n, r, s) for n in SOLVERS})
    out["alternating (GoDec)"] = lambda X: alternating(X, r, s)
    return out


def own_problem(repeats: int) -> None:
    n, p, s, r = 100, 20, 30, 5
    X, L0, S0 = low_rank_plus_sparse(n, p, s, r, seed=2)
    rows = []
    base = None
    for name, fit in contenders(r, s).items():
        m = measure(fit, X, L0, S0, repeats)
        base = m["time"] if base is None else base
        rows.append(
            [
                name,
                f"{m['found']}/{s}",
                m["rank"],
                f"{m['L_err']:.1e}",
                f"{m['S_err']:.1e}",
                f"{m['objective']:.3g}",
                f"{m['time']:.4f}",
                f"{m['time'] / base:.1f}",
            ]
        )
    print(f"abess's test problem (test_RPCA): n = {n}, p = {p}, r = {r}, s = {s}, seed 2; median of {repeats} runs")
    head = [
        "method",
        "outliers found",
        "rank(L)",
        "|L-L0|/|L0|",
        "|S-S0|/|S0|",
        "objective",
        "time (s)",
        "time / abess",
    ]
    print(tabulate(rows, head, disable_numparse=True))


def over_seeds(seeds: int) -> None:
    for n, p, s, r in ((100, 20, 30, 5), (200, 50, 100, 5)):
        results: dict[str, list[dict[str, Any]]] = {}
        for seed in range(seeds):
            X, L0, S0 = low_rank_plus_sparse(n, p, s, r, seed=seed)
            for name, fit in contenders(r, s).items():
                results.setdefault(name, []).append(measure(fit, X, L0, S0, 1))
        base = statistics.median(m["time"] for m in results["abess"])
        rows = []
        for name, ms in results.items():
            t = statistics.median(m["time"] for m in ms)
            rows.append(
                [
                    name,
                    f"{sum(m['found'] == s for m in ms)}/{seeds}",
                    f"{statistics.mean(m['found'] for m in ms) / s:.3f}",
                    f"{statistics.median(m['L_err'] for m in ms):.1e}",
                    f"{t:.4f}",
                    f"{t / base:.1f}",
                ]
            )
        print(f"\nthe same generator, n = {n}, p = {p}, r = {r}, s = {s}, seeds 0..{seeds - 1}")
        head = ["method", "all outliers found", "share found", "median |L-L0|/|L0|", "median time (s)", "time / abess"]
        print(tabulate(rows, head, disable_numparse=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with pinned(1):
        own_problem(args.repeats)
        over_seeds(args.seeds)


if __name__ == "__main__":
    main()
