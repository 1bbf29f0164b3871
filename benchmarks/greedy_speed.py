"""Speed of the greedy solvers against scikit-learn (and abess), in one run.

Targets (from the project brief):

1. ``omp`` within 2x of scikit-learn's ``OrthogonalMatchingPursuit`` on a dense Gaussian design,
   n = 2000, p = 5000, k = 100 (columns scaled to unit norm, no intercept, the same k);
2. ``ompr`` and ``els`` each run the whole sweep k = 1..40 on Caravan in under a minute: logistic
   loss with a free intercept, the 85 feature columns scaled to unit norm (paper 003, Section
   6.2.2), labels Purchase = Yes -> +1, No -> -1; every k is a separate ``prob.solve(name, k=k)``
   (lowering, the OMP start and the local search included).

Times are wall-clock medians over ``--repeats`` runs of the whole call (problem construction and
lowering included for sparsemodel, ``fit`` for the others), after one warm-up run. abess runs the
same problems as a reference (its splicing algorithm is a different method: a baseline for time,
not for the target).

Threads: ``--threads N`` limits the BLAS threads of every contender alike (threadpoolctl); the
default 1 gives reproducible numbers on a small shared machine, where multithreaded OpenBLAS
competing with other jobs for the cores can be several times slower than a single thread. Use
``--threads 0`` to leave the libraries' defaults.

    python benchmarks/greedy_speed.py                  # both parts, 3 repeats
    python benchmarks/greedy_speed.py --part omp --repeats 5
    python benchmarks/greedy_speed.py --part caravan --kmax 40
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import sparsemodel as sm

CARAVAN = Path("/work/shared/data/Caravan.csv")


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, list[float], object]:
    fn()  # warm-up: imports, first-call costs
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, out


def load_caravan() -> tuple[np.ndarray, np.ndarray]:
    if CARAVAN.exists():
        raw = np.genfromtxt(CARAVAN, delimiter=",", dtype=str, skip_header=1)
        X, v = raw[:, :-1].astype(float), np.where(raw[:, -1] == "Yes", 1.0, -1.0)
    else:  # the copy bundled with the package
        from sparsemodel.datasets import caravan

        X, v, _ = caravan()
    return X / np.linalg.norm(X, axis=0), v


def part_omp(repeats: int) -> bool:
    n, p, k = 2000, 5000, 100
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p))
    X /= np.linalg.norm(X, axis=0)
    w = np.zeros(p)
    w[rng.choice(p, k, replace=False)] = rng.standard_normal(k)
    y = X @ w + 0.01 * rng.standard_normal(n)

    def ours() -> sm.Result:
        v = sm.Variable(p, name="w")
        return sm.Problem(sm.minimize(sm.sum_squares(X @ v - y) / (2 * n)), [sm.nnz(v) <= k]).solve("omp")

    from sklearn.linear_model import OrthogonalMatchingPursuit

    def sk() -> np.ndarray:
        return OrthogonalMatchingPursuit(n_nonzero_coefs=k, fit_intercept=False).fit(X, y).coef_

    print(f"\n== OMP, dense Gaussian design n={n}, p={p}, k={k} (unit-norm columns) ==")
    t_ours, all_ours, res = timed(ours, repeats)
    t_sk, all_sk, coef = timed(sk, repeats)
    same = set(res.support) == set(np.flatnonzero(coef))
    print(f"sparsemodel omp       median {t_ours:7.3f} s   runs {fmt(all_ours)}")
    print(f"scikit-learn OMP      median {t_sk:7.3f} s   runs {fmt(all_sk)}   same support: {same}")
    try:
        from abess.linear import LinearRegression

        t_ab, all_ab, _ = timed(lambda: LinearRegression(support_size=[k], fit_intercept=False).fit(X, y), repeats)
        print(f"abess (splicing)      median {t_ab:7.3f} s   runs {fmt(all_ab)}   (reference)")
    except ImportError:
        print("abess not installed: skipped")
    ratio = t_ours / t_sk
    ok = ratio <= 2.0
    print(f"ratio omp / sklearn = {ratio:.2f}  (target <= 2): {'PASS' if ok else 'MISS'}")
    return ok


def part_caravan(repeats: int, kmax: int) -> bool:
    X, v = load_caravan()
    n, p = X.shape
    w = sm.Variable(p + 1, name="w")
    prob = sm.Problem(sm.minimize(sm.sum(sm.logistic(-v * (X @ w[1:] + w[0])))), [sm.nnz(w[1:]) <= 1])

    def sweep(name: str) -> list[float]:
        return [prob.solve(name, k=k).objective for k in range(1, kmax + 1)]

    print(f"\n== Caravan sweep k = 1..{kmax}: logistic loss, free intercept, n={n}, p={p} (unit-norm columns) ==")
    ok = True
    results = {}
    for name in ("omp", "ompr", "els"):
        t, runs, obj = timed(lambda name=name: sweep(name), repeats)
        results[name] = obj
        target = name in ("ompr", "els")
        verdict = ("PASS" if t < 60 else "MISS") if target else "(start of the other two)"
        ok &= t < 60 or not target
        print(f"sparsemodel {name:5s} sweep  median {t:7.2f} s   runs {fmt(runs)}   target < 60 s: {verdict}")
    try:
        from abess.linear import LogisticRegression

        yb = (v > 0).astype(float)
        t_ab, runs, _ = timed(
            lambda: [LogisticRegression(support_size=[k]).fit(X, yb) for k in range(1, kmax + 1)], repeats
        )
        print(f"abess (splicing) sweep     median {t_ab:7.2f} s   runs {fmt(runs)}   (reference)")
    except ImportError:
        print("abess not installed: skipped")
    print("objective at k = 1, 10, 20, 30, 40 (lower is better; the local searches start from OMP):")
    for name, obj in results.items():
        picks = [obj[k - 1] for k in (1, 10, 20, 30, 40) if k <= kmax]
        print(f"  {name:5s} " + "  ".join(f"{o:10.4f}" for o in picks))
    return ok


def fmt(ts: list[float]) -> str:
    return "[" + ", ".join(f"{t:.3f}" for t in ts) + "]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("all", "omp", "caravan"), default="all")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kmax", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads for every contender (0: library default)")
    args = ap.parse_args()
    limit = contextlib.nullcontext()
    if args.threads > 0:
        from pinning import pinned

        limit = pinned(args.threads)
    print(f"cpus {os.cpu_count()}, BLAS threads {args.threads or 'default'}, load average at start {os.getloadavg()}")
    ok = True
    with limit:
        if args.part in ("all", "omp"):
            ok &= part_omp(args.repeats)
        if args.part in ("all", "caravan"):
            ok &= part_caravan(args.repeats, args.kmax)
    print(f"\nload average at end {os.getloadavg()}; all targets {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
