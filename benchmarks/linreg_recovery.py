"""Paper 000, Section 6.1: support recovery of sparse linear regression versus sample size.

Protocol: p = 500, kbar = 50 nonzeros drawn from N(5, 1) (see sparsemodel.datasets), Gaussian
design and noise; sparsity level k in {50, 70}; n from 150 to 300; `--trials` random data sets
per (n, k). For each solver: exact recovery (supp(wbar) = supp(w, kbar), the kbar largest
entries of the solution), relaxed recovery (supp(wbar) within supp(w)), and the median wall time
of the whole solve call (lowering included for sparsemodel; fit() for the competitors). When the
`bench` extra is installed, abess and scikit-learn's OMP run on the same data in the same run.

    python benchmarks/linreg_recovery.py                 # full protocol (about a minute)
    python benchmarks/linreg_recovery.py --trials 5 --n 150,250 --k 50
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
from pinning import pinned
from tabulate import tabulate

import sparsemodel as sm
from sparsemodel.datasets import sparse_linear_regression


def grahtp_solver(name: str):
    def solve(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
        n, p = X.shape
        w = sm.Variable(p, name="w")
        prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= k])
        return prob.solve(name).x

    return solve


def competitors() -> dict:
    out = {}
    try:
        from abess.linear import LinearRegression

        def abess_fit(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
            return LinearRegression(support_size=[k], fit_intercept=False).fit(X, y).coef_

        out["abess"] = abess_fit
    except ImportError:
        print("abess not installed (pip install -e .[bench]); skipping it")
    try:
        from sklearn.linear_model import OrthogonalMatchingPursuit

        def omp_fit(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
            return OrthogonalMatchingPursuit(n_nonzero_coefs=k, fit_intercept=False).fit(X, y).coef_

        out["sklearn-omp"] = omp_fit
    except ImportError:
        print("scikit-learn not installed (pip install -e .[bench]); skipping its OMP")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--n", default="150,175,200,225,250,275,300")
    ap.add_argument("--k", default="50,70")
    ap.add_argument("--p", type=int, default=500)
    ap.add_argument("--kbar", type=int, default=50)
    args = ap.parse_args()
    ns = [int(v) for v in args.n.split(",")]
    ks = [int(v) for v in args.k.split(",")]
    solvers = {"grahtp": grahtp_solver("grahtp"), "fgrahtp": grahtp_solver("fgrahtp"), **competitors()}

    # warm up every solver once (imports, BLAS threads, first-call costs) before timing
    Xw, yw, _ = sparse_linear_regression(100, p=args.p, k=10, seed=999)
    for f in solvers.values():
        f(Xw, yw, 10)

    exact: dict = defaultdict(list)
    relaxed: dict = defaultdict(list)
    times: dict = defaultdict(list)
    for k in ks:
        for n in ns:
            for t in range(args.trials):
                X, y, wbar = sparse_linear_regression(n, p=args.p, k=args.kbar, seed=1000 * n + t)
                truth = set(np.flatnonzero(wbar))
                for name, f in solvers.items():
                    t0 = time.perf_counter()
                    w = np.asarray(f(X, y, k))
                    times[name, k, n].append(time.perf_counter() - t0)
                    top = (
                        set(np.argsort(-np.abs(w))[: args.kbar])
                        if np.count_nonzero(w) >= args.kbar
                        else set(np.flatnonzero(w))
                    )
                    exact[name, k, n].append(top == truth and np.count_nonzero(w[list(truth)]) == args.kbar)
                    relaxed[name, k, n].append(truth <= set(np.flatnonzero(w)))
    for k in ks:
        rows = []
        for n in ns:
            row = [n]
            for name in solvers:
                row.append(f"{100 * np.mean(exact[name, k, n]):.0f}% / {100 * np.mean(relaxed[name, k, n]):.0f}%")
            for name in solvers:
                row.append(f"{1e3 * np.median(times[name, k, n]):.1f}")
            rows.append(row)
        headers = ["n"] + [f"{s} exact/relaxed" for s in solvers] + [f"{s} ms" for s in solvers]
        print(f"\np = {args.p}, kbar = {args.kbar}, k = {k}, {args.trials} trials per n (median wall time per solve)")
        print(tabulate(rows, headers=headers))
    if "abess" in solvers:
        for k in ks:
            for n in ns:
                if n == 250:
                    g, a = np.median(times["grahtp", k, n]), np.median(times["abess", k, n])
                    print(
                        f"k = {k}, n = 250: GraHTP median {1e3 * g:.2f} ms, abess {1e3 * a:.2f} ms, ratio GraHTP/abess = {g / a:.2f}"
                    )


if __name__ == "__main__":
    with pinned(1):  # one BLAS/OpenMP thread for every contender
        main()
