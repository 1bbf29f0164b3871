"""Sparse PCA (docs/language.md, "Sparse PCA"): explained variance and time of ``tpm`` (the default, what
``auto`` runs) and ``spca_htp`` against abess's ``SparsePCA`` at the same k.

Problems (each: S, the covariance with divisor n of centered X, is the one yardstick; every answer
is normalized and scored by w'Sw; several components by the adjusted variance of Zou, Hastie &
Tibshirani 2006, the same function for everyone):

* ``abess_test`` -- the problem of abess's own test (python/pytest/test_alg.py, test_PCA): n = 1000,
  p = 20, a rank-one signal plus 0.01 noise, k = 10; one component and three (abess: number = 3);
* ``spiked`` -- the spiked covariance (``sparsemodel.datasets.spiked_covariance``): n = 1000,
  p = 200, two sparse directions of 20 and 15 coordinates (variances 3 and 2), k = 10, 20, 40;
  seeds 0-4; and ``spiked p>n`` (n = 200, p = 300), seeds 0-1;
* ``khan`` -- the Khan gene-expression training data (63 x 2308, /work/shared/data), k = 10, 50;
  one component and three (one run each: abess takes seconds).

abess 0.4.11's ``SparsePCA.fit(X)`` returns a dense vector of equal entries (every coordinate
"selected") when p > n, and ``fit(Sigma=S)`` refuses the singular S ("Sigma should be
semi-positive definite"); for p > n abess is therefore given ``Sigma = S + 1e-8 tr(S)/p I`` (the
table's ``via``), and its answer is scored on S like everyone's.

``dspca`` (the convex baseline) runs once per one-component case with p <= 30 (abess's test problem).

Per case: the ratio of explained variances ours / abess's (target: >= 1 - 1e-9, i.e. at least
abess's explained variance at the same k) and the time ratio ours / abess's (medians of
``--repeat`` runs). Ours is ``Solver.solve`` on the lowered problem (the lowering -- building S
once -- is shared by every k and reported separately); abess's is ``fit`` on X. Everyone runs in
this process with one BLAS thread (benchmarks/pinning.py).

    python benchmarks/sparse_pca.py [--repeat 5] [--problems abess_test,spiked,khan]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from pinning import pinned
from tabulate import tabulate

import sparsemodel as sm
from sparsemodel.datasets import spiked_covariance
from sparsemodel.numerics.spca import adjusted_variance
from sparsemodel.solvers import get_solver

KHAN = Path("/work/shared/data/Khan_xtrain.csv")


def median_time(fn, repeat: int):
    out, times = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, statistics.median(times)


def ours(lp, solver: str, k: int, m: int, repeat: int):
    cls = get_solver(solver)
    lk = lp.with_budget(k)
    r, t = median_time(lambda: cls(components=m).solve(lk), repeat)
    W = np.array(r.extra["components"]).T if m > 1 else r.x[:, None]
    return W, t


def theirs(X: np.ndarray, S: np.ndarray, k: int, m: int, repeat: int, via: str):
    import abess

    p = X.shape[1]
    data = {"X": X} if via == "X" else {"Sigma": S + 1e-8 * np.trace(S) / p * np.eye(p)}

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if m == 1:
                model = abess.SparsePCA(support_size=k)
                model.fit(**data)
            else:
                ss = np.zeros((p, m))
                ss[k - 1, :] = 1
                model = abess.SparsePCA(support_size=ss)
                model.fit(**data, number=m)
        return model.coef_

    C, t = median_time(fit, repeat)
    C = np.asarray(C, dtype=float).reshape(X.shape[1], -1)
    return C / np.linalg.norm(C, axis=0), t


def variance(S: np.ndarray, W: np.ndarray) -> float:
    return float(adjusted_variance(S, W).sum())


DSPCA_MAX_P = 30  # the semidefinite relaxation's cone has p(p+1)/2 entries
dspca: list = []


def cases(name: str, X: np.ndarray, ks: list[int], ms: list[int], repeat: int, rows: list) -> None:
    Xc = X - X.mean(axis=0)
    via = "X" if X.shape[0] > X.shape[1] else "Sigma"
    S = Xc.T @ Xc / len(Xc)
    t0 = time.perf_counter()
    w = sm.Variable(X.shape[1], name="w")
    prob = sm.Problem(sm.maximize(sm.quad_form(w, S)), [sm.norm(w) <= 1, sm.nnz(w) <= ks[0]])
    lp = prob.lower()
    lowering = time.perf_counter() - t0
    for m in ms:
        for k in ks:
            Wa, ta = theirs(Xc, S, k, m, repeat, via)
            va = variance(S, Wa)
            row = [name, via, k, m, f"{va:.6g}"]
            for solver in ("tpm", "spca_htp"):
                W, t = ours(lp, solver, k, m, repeat)
                v = variance(S, W)
                row += [f"{v / va:.6f}", f"{t / ta:.3g}"]
            row += [f"{ta:.3g}", f"{lowering:.3g}", f"{np.trace(S):.6g}"]
            rows.append(row)
            if m == 1 and X.shape[1] <= DSPCA_MAX_P:  # the convex baseline, for small p only
                lk = lp.with_budget(k)
                r, t = median_time(lambda lk=lk: get_solver("dspca")().solve(lk), 1)
                dspca.append([name, k, f"{variance(S, r.x[:, None]) / va:.6f}", f"{t / ta:.3g}", r.extra["solves"]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--problems", default="abess_test,spiked,khan")
    a = ap.parse_args()
    todo = a.problems.split(",")
    rows: list = []
    with pinned(1):
        if "abess_test" in todo:
            rng = np.random.RandomState(1)
            x1 = rng.randn(1000, 1)
            x1 /= np.linalg.norm(x1)
            X = x1.dot(rng.randn(1, 20)) + 0.01 * rng.randn(1000, 20)
            cases("abess_test", X, [10], [1, 3], a.repeat, rows)
        if "spiked" in todo:
            for seed in range(5):
                X, _ = spiked_covariance(1000, p=200, sizes=(20, 15), variances=(3.0, 2.0), seed=seed)
                cases(f"spiked s{seed}", X, [10, 20, 40], [1, 3], a.repeat, rows)
            for seed in range(2):
                X, _ = spiked_covariance(200, p=300, sizes=(20, 15), variances=(3.0, 2.0), seed=seed)
                cases(f"spiked p>n s{seed}", X, [10, 20, 40], [1, 3], a.repeat, rows)
        if "khan" in todo and KHAN.exists():
            X = np.loadtxt(KHAN, delimiter=",", skiprows=1)
            cases("khan", X, [10, 50], [1, 3], 1, rows)
    head = [
        "problem",
        "abess on",
        "k",
        "comps",
        "abess var",
        "tpm / abess",
        "t tpm / t abess",
        "htp / abess",
        "t htp / t abess",
    ]
    head += ["t abess (s)", "lowering (s)", "tr S"]
    print(tabulate(rows, headers=head))
    if dspca:
        print("\ndspca (the semidefinite relaxation tuned to k, debiased; one run)")
        print(tabulate(dspca, headers=["problem", "k", "dspca / abess", "t dspca / t abess", "SDP solves"]))
    for col, who in ((5, "tpm"), (7, "spca_htp")):
        r = np.array([float(x[col]) for x in rows])
        t = np.array([float(x[col + 1]) for x in rows])
        worst = rows[int(np.argmin(r))]
        print(
            f"{who}: variance ratio >= 1 - 1e-9 in {int((r >= 1 - 1e-9).sum())} of {len(r)} cases "
            f"(min {r.min():.6f} at {worst[0]} k={worst[2]} comps={worst[3]}); median time ratio {np.median(t):.3g}, "
            f"max {t.max():.3g}"
        )


if __name__ == "__main__":
    main()
