"""A sparse precision matrix on collinear data, the automatic eigenvalue box.

Standardized breast-cancer features (scikit-learn's ``load_breast_cancer``, 569 x 30; the
covariance S = cov(X) with 1/n has condition number 1e5), the model

    min -logdet(O) + trace(S @ O)  s.t.  nnz(offdiag(O)) <= 2k,  auto <= eig(O) <= auto

for k in ``--edges``, solved by ``forward`` (FBS), ``grahtp`` (paper 000, Algorithm 2) and the
default ``auto``; medians of ``--reps`` runs in one process, BLAS pinned to ``--threads``.
Reported per k and solver: objective, status, time, the ratio of the time to forward's, the
eigen-decompositions and barrier Newton steps of the restricted solves, and whether the answer's
eigenvalues lie in the box (to 1e-8). The target: the default solves without
``diverged`` in at most 5 times forward's time with an objective at most forward's.

    python benchmarks/precision_collinear.py
    python benchmarks/precision_collinear.py --edges 40 --reps 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from pinning import pinned

import sparsemodel as sm

SOLVERS = ("forward", "grahtp", "auto")


def breast_cancer_cov() -> np.ndarray:
    from sklearn.datasets import load_breast_cancer

    X = load_breast_cancer().data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return np.cov(X, rowvar=False, bias=True)


def model(S: np.ndarray, edges: int) -> sm.Problem:
    p = S.shape[0]
    O = sm.Variable((p, p), symmetric=True, name="O")
    cons = [sm.nnz(sm.offdiag(O)) <= 2 * edges, sm.eig(O).between("auto", "auto")]
    return sm.Problem(sm.minimize(-sm.logdet(O) + sm.trace(S @ O)), cons)


def run(S: np.ndarray, edges: int, reps: int) -> list[dict]:
    prob = model(S, edges)
    box = prob.lower().eigbox
    rows = []
    for solver in SOLVERS:
        times, res = [], None
        for _ in range(reps):
            t0 = time.perf_counter()
            res = prob.solve(solver)
            times.append(time.perf_counter() - t0)
        ev = np.linalg.eigvalsh(res.x)
        rows.append(
            {
                "edges": edges,
                "solver": solver,
                "objective": res.objective,
                "status": res.status,
                "seconds": statistics.median(times),
                "eig_decomps": res.counters.get("eig_decomps", 0),
                "newton_steps": res.extra.get("newton_steps", 0),
                "in_box": bool(ev[0] >= box.alpha - 1e-8 and ev[-1] <= box.beta + 1e-8),
                "start": res.extra.get("start", ""),
            }
        )
    fwd = rows[0]
    for r in rows:
        r["time_vs_forward"] = r["seconds"] / fwd["seconds"]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edges", default="10,20,40,80,120", help="comma-separated edge counts k (default 10..120)")
    ap.add_argument("--reps", type=int, default=3, help="runs per solver (median time)")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads for everything (default 1)")
    a = ap.parse_args()
    S = breast_cancer_cov()
    lam = np.linalg.eigvalsh(S)
    with pinned(a.threads):
        box = model(S, 1).lower().eigbox
        print(
            f"breast cancer, p = {S.shape[0]}, cond(S) = {lam[-1] / lam[0]:.3g}; auto box "
            f"[{box.alpha:.4g}, {box.beta:.6g}]; medians of {a.reps}, BLAS threads {a.threads}"
        )
        print(" edges  solver    objective   status     seconds  x forward  eig   newton  in box  start")
        verdicts = []
        for k in (int(v) for v in a.edges.split(",")):
            rows = run(S, k, a.reps)
            for r in rows:
                print(
                    f"{r['edges']:6d}  {r['solver']:8s} {r['objective']:10.4f}   {r['status']:9s} {r['seconds']:8.3f}"
                    f"  {r['time_vs_forward']:8.2f}  {r['eig_decomps']:5d} {r['newton_steps']:6d}  {str(r['in_box']):6s}  "
                    f"{r['start']}"
                )
            fwd, auto = rows[0], rows[-1]
            ok = auto["status"] == "converged" and auto["objective"] <= fwd["objective"] + 1e-9
            ok = ok and auto["time_vs_forward"] <= 5 and auto["in_box"]
            verdicts.append((k, ok, auto["time_vs_forward"]))
        for k, ok, ratio in verdicts:
            print(
                f"k = {k}: target (auto converged, objective <= forward's, time <= 5 x forward's, in the box) "
                f"{'holds' if ok else 'fails'} (time ratio {ratio:.2f})"
            )


if __name__ == "__main__":
    main()
