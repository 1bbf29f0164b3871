"""Paper 000, Section 6.1: support recovery of sparse linear regression versus sample size.

Protocol: p = 500, kbar = 50 nonzeros drawn from N(5, 1) (see sparsemodel.datasets), Gaussian
design and noise; sparsity level k in {50, 70}; n from 150 to 300; `--trials` random data sets
per n (the same draws for every k and method). For each method: exact recovery (the paper's
supp(wbar) = supp(w, kbar), the kbar largest entries of the solution: `exact_top`), relaxed
recovery (supp(wbar) within supp(w): `covers`), and the median wall time of the solve (the
lowering, shared by every method and k of a draw, is reported apart: `lower_s`). GraHTP, FGraHTP,
OMP and the LASSO (tuned to k nonzeros, debiased) are ours; abess and scikit-learn's OMP, when the
`bench` extra is installed, run on the same draws in the same process.

    python benchmarks/linreg_recovery.py                 # full protocol (a few minutes)
    python benchmarks/linreg_recovery.py --trials 5 --n 150,250 --k 50 --plot recovery.png
"""

from __future__ import annotations

import argparse

from pinning import pinned
from tabulate import tabulate

import sparsemodel as sm
from sparsemodel.datasets import sparse_linear_regression


def model(X, y):
    w = sm.Variable(X.shape[1], name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * len(y))), [sm.nnz(w) <= 50])


def competitors() -> list[sm.External]:
    out = []
    try:
        from abess.linear import LinearRegression

        out.append(
            sm.External(
                "abess",
                lambda d, k: LinearRegression(support_size=[k], fit_intercept=False).fit(d["X"], d["y"]).coef_,
            )
        )
    except ImportError:
        print("abess not installed (pip install -e .[bench]); skipping it")
    try:
        from sklearn.linear_model import OrthogonalMatchingPursuit

        out.append(
            sm.External(
                "sklearn-omp",
                lambda d, k: (
                    OrthogonalMatchingPursuit(n_nonzero_coefs=k, fit_intercept=False).fit(d["X"], d["y"]).coef_
                ),
            )
        )
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
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", help="a PNG of the exact-recovery rate against n (k = the first --k)")
    args = ap.parse_args()
    ns = [int(v) for v in args.n.split(",")]
    ks = [int(v) for v in args.k.split(",")]

    def draw(rng, n):
        X, y, w = sparse_linear_regression(n, p=args.p, k=args.kbar, seed=rng)
        return {"X": X, "y": y}, {"w": w}

    methods = ["grahtp", "fgrahtp", "omp", "lasso", *competitors()]
    study = sm.experiment(
        model, methods, k=ks, data=draw, reps=args.trials, over={"n": ns}, seed=args.seed, progress=True
    )
    names = study.solvers
    exact, relaxed = study.mean("exact_top"), study.mean("covers")
    ms = study.median("time_s")
    for k in ks:
        rows = [
            [n]
            + [f"{100 * exact[n, k, s]:.0f}% / {100 * relaxed[n, k, s]:.0f}%" for s in names]
            + [f"{1e3 * ms[n, k, s]:.1f}" for s in names]
            for n in ns
        ]
        headers = ["n"] + [f"{s} exact/relaxed" for s in names] + [f"{s} ms" for s in names]
        print(f"\np = {args.p}, kbar = {args.kbar}, k = {k}, {args.trials} trials per n (median wall time per solve)")
        print(tabulate(rows, headers=headers))
    lower = study.median("lower_s", by=["n"])
    if "abess" in names and 250 in ns:
        for k in ks:
            g, a = ms[250, k, "grahtp"], ms[250, k, "abess"]
            print(
                f"k = {k}, n = 250: GraHTP median {1e3 * g:.2f} ms (+ {1e3 * lower[250]:.2f} ms lowering), "
                f"abess {1e3 * a:.2f} ms, ratio GraHTP/abess = {g / a:.2f} ({(g + lower[250]) / a:.2f} with the lowering)"
            )
    if study.failed():
        print(f"\n{len(study.failed())} runs failed:")
        print("\n".join(sorted({f"  {r['solver']} n={r['n']} k={r['k']}: {r['message']}" for r in study.failed()})))
    if args.plot:
        study.where(k=ks[0]).plot(args.plot, overwrite=True, metrics=["exact_top", "covers", "time_s"], x="n")
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    with pinned(1):  # one BLAS/OpenMP thread for every contender
        main()
