"""Fused sparsity, nnz(diff(w)) <= k (the kind that first proved the set protocol: docs/architecture.md).

1. **Denoising** (X the identity, least squares): GraHTP's objective against the exact optimum of
   the k-changepoint segmentation, computed by ruptures' exact ``Dynp`` with the l2 cost when
   ruptures is installed (``pip install ruptures``), else by the set's own dynamic program; p = 500,
   k = 5, 10 seeds.
2. **A random design** (n = 500, p = 200, 5 changes at 30, 70, 110, 150, 180, values 0, 2, -1, 1.5,
   -2, 0.5, Gaussian X, noise N(0, 1)): the share of seeds where GraHTP, auto and tv (total
   variation tuned to exactly 5 changes, then debiased) find the true breakpoints, their mean
   objective and median time; 10 seeds, one BLAS thread.

    python benchmarks/fused.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from pinning import pinned
from tabulate import tabulate

import sparsemodel as sm
from sparsemodel.sets.fused import best_pieces

TRUE = [30, 70, 110, 150, 180]
VALUES = [0.0, 2.0, -1.0, 1.5, -2.0, 0.5]


def piecewise(p: int, breaks: list[int], values: list[float]) -> np.ndarray:
    edges = [0, *breaks, p]
    w = np.zeros(p)
    for a, b, v in zip(edges[:-1], edges[1:], values):
        w[a:b] = v
    return w


def sse(v: np.ndarray, breaks: list[int]) -> float:
    edges = [0, *breaks, len(v)]
    return float(sum(((v[a:b] - v[a:b].mean()) ** 2).sum() for a, b in zip(edges[:-1], edges[1:])))


def exact_segmentation(y: np.ndarray, k: int) -> tuple[list[int], str]:
    try:
        import ruptures as rpt

        bkps = rpt.Dynp(model="l2", min_size=1, jump=1).fit(y.reshape(-1, 1)).predict(n_bkps=k)
        return [int(b) for b in bkps[:-1]], "ruptures Dynp (l2)"
    except ImportError:
        return [int(b) for b in best_pieces(y, k)], "the set's dynamic program (ruptures not installed)"


def denoising(seeds: int) -> None:
    rows, who = [], ""
    p, k = 500, 5
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        breaks = sorted(rng.choice(np.arange(20, p - 20), k, replace=False).tolist())
        y = piecewise(p, breaks, list(rng.normal(0, 2, k + 1))) + 0.5 * rng.standard_normal(p)
        w = sm.Variable(p, name="w")
        prob = sm.Problem(sm.minimize(sm.sum_squares(w - y)), [sm.nnz(sm.diff(w)) <= k])
        t0 = time.perf_counter()
        r = prob.solve("grahtp")
        t = time.perf_counter() - t0
        opt_breaks, who = exact_segmentation(y, k)
        opt = sse(y, opt_breaks)
        rows.append([seed, r.objective, opt, (r.objective - opt) / opt, r.extra["changepoints"] == opt_breaks, t])
    print(f"1. denoising, p = {p}, k = {k}: GraHTP against the exact segmentation by {who}")
    print(tabulate(rows, headers=["seed", "grahtp", "exact optimum", "relative gap", "same breakpoints", "time s"]))
    worst = max(r[3] for r in rows)
    print(f"   worst relative gap {worst:.2e}: {'holds' if worst <= 1e-9 else 'fails'} (target: the exact optimum)\n")


def random_design(seeds: int) -> None:
    solvers = ("grahtp", "auto", "tv")
    hits = {s: 0 for s in solvers}
    objs: dict[str, list[float]] = {s: [] for s in solvers}
    times: dict[str, list[float]] = {s: [] for s in solvers}
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        w0 = piecewise(200, TRUE, VALUES)
        X = rng.standard_normal((500, 200))
        y = X @ w0 + rng.standard_normal(500)
        w = sm.Variable(200, name="w")
        prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / 1000), [sm.nnz(sm.diff(w)) <= 5])
        for s in solvers:
            t0 = time.perf_counter()
            r = prob.solve(s)
            times[s].append(time.perf_counter() - t0)
            objs[s].append(r.objective)
            hits[s] += r.extra["changepoints"] == TRUE
    rows = [[s, f"{hits[s]}/{seeds}", statistics.mean(objs[s]), statistics.median(times[s])] for s in solvers]
    print("2. random design, n = 500, p = 200, 5 changes, noise N(0, 1)")
    print(tabulate(rows, headers=["solver", "true breakpoints found", "mean objective", "median time s"]))
    verdict = "holds" if hits["grahtp"] >= hits["tv"] else "fails"
    print(f"   GraHTP finds them at least as often as tv: {verdict} ({hits['grahtp']} vs {hits['tv']})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    a = ap.parse_args()
    with pinned(1):
        denoising(a.seeds)
        random_design(a.seeds)


if __name__ == "__main__":
    main()
