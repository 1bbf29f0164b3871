"""Cost of one FGraHTP iteration on dense 2000 x 20000 data versus two NumPy matrix-vector products.

One FGraHTP iteration (paper 000, Algorithm 1, bottom) is a gradient X'(Xw - y)/n, a gradient step,
a top-k selection (argpartition) and a truncation. The reference is the time of ``X @ v`` plus
``X.T @ u`` with dense v, u (what a hand-written iteration with a full gradient costs). Target:
one iteration <= 1.5 x the reference. Prints medians over the iterations of one run and over
repeated reference products.

    python benchmarks/fgrahtp_iteration.py [--n 2000] [--p 20000] [--k 200] [--iters 40]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import sparsemodel as sm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--p", type=int, default=20000)
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--iters", type=int, default=40)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n, p, k = args.n, args.p, args.k
    X = rng.standard_normal((n, p))
    w_true = np.zeros(p)
    w_true[rng.choice(p, k, replace=False)] = rng.normal(5, 1, k)
    y = X @ w_true + rng.standard_normal(n)

    v, u = rng.standard_normal(p), rng.standard_normal(n)
    ref = []
    for _ in range(30):
        t0 = time.perf_counter()
        X @ v
        X.T @ u
        ref.append(time.perf_counter() - t0)
    ref_med = float(np.median(ref))

    w = sm.Variable(p, name="w")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / (2 * n)), [sm.nnz(w) <= k])
    t0 = time.perf_counter()
    res = prob.solve("fgrahtp", max_iter=args.iters, tol=0.0)
    total = time.perf_counter() - t0
    times = np.diff(np.asarray(res.history["time_s"]))
    it_med = float(np.median(times))
    print(f"data {n} x {p} dense, k = {k}; FGraHTP ran {res.iterations} iterations, status {res.status}")
    print(f"two matvecs (X @ v, X.T @ u):  median {1e3 * ref_med:.2f} ms over 30 repetitions")
    print(f"one FGraHTP iteration:          median {1e3 * it_med:.2f} ms over {len(times)} iterations")
    print(f"ratio iteration / two matvecs:  {it_med / ref_med:.2f}  (target <= 1.5)")
    print(f"whole solve incl. lowering and step-size estimate: {total:.2f} s")


if __name__ == "__main__":
    main()
