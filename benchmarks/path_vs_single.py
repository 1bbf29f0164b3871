"""The warm-started path against single solves (abess issue #502): how often and by how much the
answer at k differs, and what the path costs.

For each problem and solver, k = 1..K is solved (a) alone, ``prob.solve(k=k)`` for each k, and (b) on
a path with ``start`` = ``cold`` (one lowering, no warm start), ``warm`` (the neighbour's solution
only) and ``best`` (cold and warm, the lower objective kept). Printed per (problem, solver, start):
total seconds, the ratio to the single solves' total, and for the warm and best paths the number
of k where the objective is lower / higher than the single solve's (beyond 1e-12 relative) with
the largest relative difference each way. ``cold`` must equal the single solves exactly (checked),
and ``best`` is never higher by construction.

Problems: sparse linear regression near the phase transition of paper 000, Section 6.1 (n = 175,
p = 500, 50 nonzeros, Gaussian noise; several seeds), correlated regression (AR(1) 0.9), and
Caravan logistic regression with a free intercept and standardized columns.

    OMP_NUM_THREADS=1 python benchmarks/path_vs_single.py                    # full size
    OMP_NUM_THREADS=1 python benchmarks/path_vs_single.py --small --out /tmp/pvs.csv
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # single-threaded BLAS, as every benchmark here

import argparse  # noqa: E402
import csv  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from tabulate import tabulate  # noqa: E402

import sparsemodel as sm  # noqa: E402
from sparsemodel.datasets import caravan, correlated_regression  # noqa: E402


def phase_transition(n: int, p: int, s: int, seed: int) -> sm.Problem:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[rng.choice(p, s, replace=False)] = rng.standard_normal(s)
    y = X @ beta + 0.1 * rng.standard_normal(n)
    w = sm.Variable(p, name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= s], source=f"linreg seed {seed}")


def correlated(n: int, p: int, s: int, seed: int) -> sm.Problem:
    X, b, _ = correlated_regression(n, p, s, rho=0.9, noise=0.5, seed=seed)
    w = sm.Variable(p + 1, name="w")
    return sm.Problem(
        sm.minimize(sm.sum_squares(X @ w[1:] + w[0] - b) / (2 * n)), [sm.nnz(w[1:]) <= s], source="correlated"
    )


def caravan_problem(rows: int | None) -> sm.Problem:
    X, v, _ = caravan()
    if rows is not None:
        X, v = X[:rows], v[:rows]
    Xs = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    w = sm.Variable(X.shape[1] + 1, name="w")
    return sm.Problem(
        sm.minimize(sm.mean(sm.logistic(-v * (Xs @ w[1:] + w[0])))), [sm.nnz(w[1:]) <= 5], source="caravan"
    )


def run(prob: sm.Problem, solver: str, ks: list[int]) -> list[dict]:
    t0 = time.perf_counter()
    single = [prob.solve(solver, k=k) for k in ks]
    t_single = time.perf_counter() - t0
    fs = np.array([r.objective for r in single])
    rows = [{"problem": prob.source, "solver": solver, "start": "single", "seconds": t_single, "ratio": 1.0}]
    for start in ("cold", "warm", "best"):
        t0 = time.perf_counter()
        path = prob.path(k=ks, solver=solver, start=start)
        t = time.perf_counter() - t0
        fp = np.array(path.objectives, dtype=float)
        if start == "cold":
            same = all(np.array_equal(path.at(k).x, r.x) for k, r in zip(ks, single))
            assert same, "a cold path must equal the single solves"
        rel = (fp - fs) / np.maximum(np.abs(fs), 1e-300)
        rows.append(
            {
                "problem": prob.source,
                "solver": solver,
                "start": start,
                "seconds": t,
                "ratio": t / t_single,
                "lower": int(np.sum(rel < -1e-12)),
                "higher": int(np.sum(rel > 1e-12)),
                "max_lower": float(-rel.min()) if rel.min() < -1e-12 else 0.0,
                "max_higher": float(rel.max()) if rel.max() > 1e-12 else 0.0,
                "k": len(ks),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="small sizes (a quick check that everything runs)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--solvers", default="grahtp,iht,els")
    ap.add_argument("--out", help="write the rows as CSV")
    args = ap.parse_args()
    small = args.small
    problems = []
    for seed in range(args.seeds):
        problems.append(
            (phase_transition(60, 150, 12, seed), list(range(1, 21)))
            if small
            else (phase_transition(175, 500, 50, seed), list(range(10, 71, 2)))
        )
    problems.append(
        (correlated(200, 60, 10, 0), list(range(1, 21)))
        if small
        else (correlated(1000, 200, 30, 0), list(range(1, 41)))
    )
    problems.append((caravan_problem(1500 if small else None), list(range(1, 16) if small else range(1, 31))))
    rows = []
    for prob, ks in problems:
        for solver in args.solvers.split(","):
            rows += run(prob, solver, ks)
            print(f"done {prob.source} {solver}", flush=True)
    cols = ["problem", "solver", "start", "seconds", "ratio", "k", "lower", "higher", "max_lower", "max_higher"]
    print(tabulate([[r.get(c, "") for c in cols] for r in rows], headers=cols, floatfmt=".3g"))
    for start in ("warm", "best"):
        sel = [r for r in rows if r["start"] == start]
        tot = sum(r["k"] for r in sel)
        print(
            f"{start}: lower than the single solve at {sum(r['lower'] for r in sel)}/{tot} points, "
            f"higher at {sum(r['higher'] for r in sel)}/{tot}; median time ratio to single solves "
            f"{np.median([r['ratio'] for r in sel]):.3g}"
        )
    if args.out:
        with open(args.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            for r in rows:
                w.writerow({c: r.get(c, "") for c in cols})
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
