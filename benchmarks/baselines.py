"""The paper-000 baselines (GraSP, FoBa, LASSO tuned to k) beside GraHTP on the Section 6.1 problem.

Protocol: p = 500, kbar = 50 nonzeros (sparsemodel.datasets.sparse_linear_regression), n samples,
sparsity level k; `--trials` data sets. Every solver runs through ``sparsemodel.compare`` (one
lowering per data set and k). Reported per solver: exact support recovery (supp(wbar) equals the
support of the kbar largest entries), relaxed recovery (supp(wbar) within the support), median
objective, median wall time and the number of failed runs (LASSO: k unreachable).

    python benchmarks/baselines.py                          # n = 150, 250; k = 50, 70; 5 trials
    python benchmarks/baselines.py --n 250 --k 50 --trials 20 --solvers grahtp,grasp,foba

On a small shared machine set OPENBLAS_NUM_THREADS=1: with threaded OpenBLAS under load, a
210 x 210 Cholesky (a GraSP restricted solve at k = 70) took 80-260 ms instead of 4.5 ms.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from tabulate import tabulate

import sparsemodel as sm
from sparsemodel.datasets import sparse_linear_regression
from sparsemodel.workflows.compare import compare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="150,250", help="sample sizes, comma separated")
    ap.add_argument("--k", default="50,70", help="sparsity levels, comma separated")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--solvers", default="grahtp,grasp,foba,lasso")
    ap.add_argument("--options", default="", help="solver:key=value,... e.g. grasp:prune=final")
    args = ap.parse_args()
    solvers = args.solvers.split(",")
    options: dict[str, dict[str, str]] = {}
    for item in filter(None, args.options.split(",")):
        name, kv = item.split(":", 1)
        key, value = kv.split("=", 1)
        options.setdefault(name, {})[key] = value
    ks = [int(v) for v in args.k.split(",")]
    table = []
    for n in (int(v) for v in args.n.split(",")):
        stats: dict[tuple[int, str], dict[str, list]] = {}
        for trial in range(args.trials):
            X, y, wbar = sparse_linear_regression(n, seed=trial)
            truth = set(np.flatnonzero(wbar))
            w = sm.Variable(X.shape[1], name="w")
            prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= ks[0]])
            comp = compare(prob, solvers, k=ks, options=options, progress=False)
            for row in comp.rows:
                s = stats.setdefault(
                    (row["k"], row["solver"]), {"exact": [], "relaxed": [], "obj": [], "t": [], "err": []}
                )
                if row["status"] == "error":
                    s["err"].append(1)
                    continue
                res = comp.results[(row["solver"], row["k"])]
                x = np.ravel(res.x)
                top = set(np.argsort(-np.abs(x))[: len(truth)])
                s["exact"].append(top == truth)
                s["relaxed"].append(truth <= set(res.support))
                s["obj"].append(row["objective"])
                s["t"].append(row["time_s"])
        for (k, solver), s in sorted(stats.items()):
            done = len(s["t"])
            table.append(
                [
                    n,
                    k,
                    solver,
                    f"{sum(s['exact'])}/{done}",
                    f"{sum(s['relaxed'])}/{done}",
                    statistics.median(s["obj"]) if done else None,
                    statistics.median(s["t"]) if done else None,
                    len(s["err"]),
                ]
            )
    print(
        tabulate(
            table,
            headers=["n", "k", "solver", "exact", "relaxed", "median objective", "median time (s)", "failed"],
            floatfmt=".4g",
        )
    )


if __name__ == "__main__":
    main()
