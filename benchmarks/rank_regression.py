"""Rank-constrained multi-task regression: GraHTP's cost per iteration, and GraHTP against the
nuclear-norm relaxation.

Part 1 (the speed figure): W is 2000 x 500 (X: n x 2000, Y = X W* + noise, rank(W*) = 10),
rank(W) <= 10. Reported: GraHTP's wall time per iteration (median over its iterations, from the
run's history) against one full LAPACK SVD of a 2000 x 500 matrix (median of repetitions), in the
same process with the same BLAS threads.

Part 3: a free intercept next to the rank. Digits (scikit-learn's 8 x 8 images, the
first 1300; without scikit-learn a synthetic stand-in of the same shape): the bottom 32 pixels Y
regressed on the top 32 pixels X, W 32 x 32 of rank 2, with a free intercept (X @ W + b) and
centered without it (Xc @ W - Yc, the same W); GraHTP's time per iteration for both (median of
``--reps`` runs), their ratio, and the difference of the two W.

Part 2: GraHTP, IHT (FG-HT) and the nuclear-norm baseline (tuned by binary search to exactly rank
r, then debiased) on the multi-task problem of the issue (X 500 x 100, W* 100 x 30 of rank 5, 10
seeds): time, objective, and relative error against the truth, beside the reduced-rank regression
closed form (the global optimum) and the oracle fits on the true row space and on both spaces.

    python benchmarks/rank_regression.py                 # all three parts
    python benchmarks/rank_regression.py --part 3         # the intercept figure alone
    python benchmarks/rank_regression.py --part 2 --seeds 3
    python benchmarks/rank_regression.py --threads 2 --csv rank.csv
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time

import numpy as np
from pinning import pinned

import sparsemodel as sm
from sparsemodel.datasets import low_rank_regression


def rel(A: np.ndarray, B: np.ndarray) -> float:
    return float(np.linalg.norm(A - B) / np.linalg.norm(B))


def part1(n: int, p: int, m: int, r: int, reps: int) -> dict:
    X, Y, Wt = low_rank_regression(n, p=p, m=m, r=r, noise=1.0, seed=0)
    W = sm.Variable((p, m), name="W")
    prob = sm.Problem(sm.minimize(sm.sum_squares(X @ W - Y) / (2 * n)), [sm.rank(W) <= r])
    t0 = time.perf_counter()
    lp = prob.lower()
    t_lower = time.perf_counter() - t0
    res = sm.registry["grahtp"]().solve(lp)
    ts = np.diff([0.0] + res.history["time_s"])
    per_iter = statistics.median(ts[1:]) if len(ts) > 1 else float(ts[0])
    M = np.random.default_rng(1).standard_normal((p, m))
    svd_times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.linalg.svd(M, full_matrices=False)
        svd_times.append(time.perf_counter() - t0)
    t_svd = statistics.median(svd_times)
    return {
        "n": n,
        "W": f"{p}x{m}",
        "r": r,
        "status": res.status,
        "iterations": res.iterations,
        "solve_s": res.time_s,
        "lower_s": t_lower,
        "per_iteration_s": per_iter,
        "full_svd_s": t_svd,
        "ratio_iteration_to_svd": per_iter / t_svd,
        "rel_error": rel(res.x, Wt),
        "svd_method": lp.set.svd_method(),
    }


def part2(seeds: int) -> list[dict]:
    rows = []
    for seed in range(seeds):
        X, Y, Wt = low_rank_regression(500, p=100, m=30, r=5, noise=1.0, seed=seed)
        n, p = X.shape
        W = sm.Variable((p, 30), name="W")
        prob = sm.Problem(sm.minimize(sm.sum_squares(X @ W - Y) / (2 * n)), [sm.rank(W) <= 5])
        Wols = np.linalg.lstsq(X, Y, rcond=None)[0]
        Vt = np.linalg.svd(X @ Wols, full_matrices=False)[2][:5]
        rrr = Wols @ Vt.T @ Vt
        U, _, Vt_true = np.linalg.svd(Wt)
        U, V = U[:, :5], Vt_true[:5].T
        both = U @ np.linalg.lstsq(X @ U, Y @ V, rcond=None)[0] @ V.T
        row = np.linalg.lstsq(X, Y @ V, rcond=None)[0] @ V.T
        f_rrr = float(np.sum((X @ rrr - Y) ** 2)) / (2 * n)
        out = {
            "seed": seed,
            "f_rrr": f_rrr,
            "err_rrr": rel(rrr, Wt),
            "err_oracle_both": rel(both, Wt),
            "err_oracle_row": rel(row, Wt),
        }
        for s in ("grahtp", "iht", "nuclear"):
            t0 = time.perf_counter()
            res = prob.solve(s)
            out[f"{s}_s"] = time.perf_counter() - t0
            out[f"{s}_gap"] = (res.objective - f_rrr) / f_rrr
            out[f"{s}_err"] = rel(res.x, Wt)
            if s == "nuclear":
                out["nuclear_raw_err"] = rel(prob.solve(s, debias=False).x, Wt)
        rows.append(out)
    return rows


def digits_halves(n: int = 1300) -> tuple[np.ndarray, np.ndarray, str]:
    try:
        from sklearn.datasets import load_digits

        D, source = load_digits().data[:n], "scikit-learn digits"
    except ImportError:  # a stand-in of the same shape: 64 correlated pixel intensities in 0..16
        rng = np.random.default_rng(0)
        D = np.clip(rng.standard_normal((n, 6)) @ rng.standard_normal((6, 64)) * 3 + 5, 0, 16).round()
        source = "synthetic stand-in"
    return D[:, :32], D[:, 32:], source


def part3(reps: int, r: int = 2) -> dict:
    X, Y, source = digits_halves()
    n, p = X.shape
    m = Y.shape[1]
    W, b = sm.Variable((p, m), name="W"), sm.Variable(m, name="b")
    with_b = sm.Problem(sm.minimize(sm.sum_squares(X @ W + b - Y) / (2 * n)), [sm.rank(W) <= r])
    Wc = sm.Variable((p, m), name="W")
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    centered = sm.Problem(sm.minimize(sm.sum_squares(Xc @ Wc - Yc) / (2 * n)), [sm.rank(Wc) <= r])
    out: dict = {"source": source, "n": n, "W": f"{p}x{m}", "r": r}
    answers = {}
    for name, prob in (("intercept", with_b), ("centered", centered)):
        lp = prob.lower()
        per, its = [], 0
        for _ in range(reps):
            res = sm.registry["grahtp"]().solve(lp)
            per.append(res.time_s / max(res.iterations, 1))
            its = res.iterations
        out[f"{name}_iterations"] = its
        out[f"{name}_per_iteration_s"] = statistics.median(per)
        out[f"{name}_objective"] = res.objective
        answers[name] = res.values["W"] if name == "intercept" else res.x
    out["ratio"] = out["intercept_per_iteration_s"] / out["centered_per_iteration_s"]
    out["W_rel_diff"] = rel(answers["intercept"], answers["centered"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", type=int, choices=(0, 1, 2, 3), default=0, help="1, 2, 3, or 0 for all")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads for everything (default 1)")
    ap.add_argument("--n", type=int, default=2500, help="samples in part 1 (default 2500)")
    ap.add_argument(
        "--reps", type=int, default=5, help="repetitions of the full SVD in part 1 and of the solves in part 3"
    )
    ap.add_argument("--seeds", type=int, default=10, help="seeds in part 2 (default 10)")
    ap.add_argument("--csv", help="write part 2's rows as CSV")
    a = ap.parse_args()
    with pinned(a.threads):
        if a.part in (0, 1):
            d = part1(a.n, 2000, 500, 10, a.reps)
            print(f"part 1: n = {d['n']}, W {d['W']}, r = {d['r']}, BLAS threads {a.threads}")
            print(
                f"  grahtp: {d['status']} in {d['iterations']} iterations, {d['solve_s']:.2f} s (lowering {d['lower_s']:.2f} s)"
            )
            print(f"  truncated SVD by: {d['svd_method']}; relative error against W*: {d['rel_error']:.4f}")
            print(f"  time per GraHTP iteration (median): {d['per_iteration_s']:.3f} s")
            print(f"  one full SVD of a {d['W']} matrix (median of {a.reps}): {d['full_svd_s']:.3f} s")
            print(f"  ratio iteration / full SVD: {d['ratio_iteration_to_svd']:.2f}")
        if a.part in (0, 3):
            d = part3(a.reps)
            print(
                f"part 3: {d['source']}, n = {d['n']}, W {d['W']} of rank {d['r']}, GraHTP (medians of {a.reps}), "
                f"BLAS threads {a.threads}"
            )
            for name in ("intercept", "centered"):
                print(
                    f"  {name:9s} X @ W{' + b' if name == 'intercept' else '    '}: "
                    f"{d[name + '_per_iteration_s'] * 1e3:7.2f} ms per iteration, {d[name + '_iterations']} iterations, "
                    f"objective {d[name + '_objective']:.10g}"
                )
            print(
                f"  ratio intercept / centered per iteration: {d['ratio']:.2f}; "
                f"relative difference of the two W: {d['W_rel_diff']:.1e}"
            )
        if a.part in (0, 2):
            rows = part2(a.seeds)
            print(
                f"\npart 2: X 500 x 100, W* 100 x 30 of rank 5, noise 1, {a.seeds} seeds (medians; worst in brackets)"
            )
            for s in ("grahtp", "iht", "nuclear"):
                t = [r[f"{s}_s"] for r in rows]
                gap = [r[f"{s}_gap"] for r in rows]
                err = [r[f"{s}_err"] for r in rows]
                print(
                    f"  {s:8s} time {statistics.median(t):.3f} s [{max(t):.3f}]  objective gap to the optimum "
                    f"{statistics.median(gap):.1e} [{max(gap):.1e}]  relative error {statistics.median(err):.4f} [{max(err):.4f}]"
                )
            med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
            print(f"  nuclear before the refit: relative error {med('nuclear_raw_err'):.4f}")
            print(
                f"  reduced-rank regression (closed form) {med('err_rrr'):.4f}; oracle on the true row space "
                f"{med('err_oracle_row'):.4f}; oracle on both true spaces {med('err_oracle_both'):.4f}"
            )
            print(
                f"  grahtp error / row-space oracle: {statistics.median(r['grahtp_err'] / r['err_oracle_row'] for r in rows):.2f};"
                f" / two-sided oracle: {statistics.median(r['grahtp_err'] / r['err_oracle_both'] for r in rows):.2f}"
            )
            if a.csv:
                with open(a.csv, "x", newline="") as fh:
                    w = csv.DictWriter(fh, fieldnames=list(rows[0]))
                    w.writeheader()
                    w.writerows(rows)
                print(f"  wrote {a.csv}")


if __name__ == "__main__":
    main()
