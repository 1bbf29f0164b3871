"""Paper 003, Section 6: training loss versus number of nonzeros for LASSO, OMP, OMPR, ARHT and ELS.

Two data sets, as in the paper's Figures 1-4 (loss curves per algorithm):

* Caravan (bundled, 5822 x 85): logistic loss sum_i log(1 + exp(-v_i (a_i'x + x_0))) (the
  paper's {0,1} form, labels recoded to -1/+1), an intercept, all columns scaled to unit
  Euclidean norm (Section 6.2.2);
* a regression set with correlated features (AR(1) correlation 0.9, n = 1000, p = 200, 30
  active +-1 coefficients, noise 0.5; sparsemodel.datasets.correlated_regression): loss
  1/2 ||A x + x_0 - b||^2 with an intercept, unit-norm columns.

As in the paper the intercept is always present and counted (+1 nonzero on the x axis); OMPR,
ARHT and ELS start from the OMP solution of the same sparsity (their defaults); LASSO is tuned by
binary search on lambda to each sparsity and debiased. Writes a CSV and a PNG per run and prints
the ordering found at every k.

    python benchmarks/loss_vs_sparsity.py                        # k = 1..40, both data sets
    python benchmarks/loss_vs_sparsity.py --k 1:20 --data caravan --out /tmp/lvs
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

import sparsemodel as sm
from sparsemodel.datasets import caravan, correlated_regression

SOLVERS = ["lasso", "omp", "ompr", "arht", "els"]
PAPER_ORDER = ["els", "arht", "ompr", "omp", "lasso"]  # best first, as paper 003 Section 6 reports


def unit_columns(A: np.ndarray) -> np.ndarray:
    return A / np.linalg.norm(A, axis=0)


def caravan_problem() -> sm.Problem:
    X, v, _ = caravan()
    A = unit_columns(X)
    c = 1.0 / np.sqrt(A.shape[0])  # the all-ones column scaled to unit norm
    w = sm.Variable(A.shape[1] + 1, name="w")
    loss = sm.sum(sm.logistic(-v * (A @ w[1:] + c * w[0])))
    return sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= 10], source="caravan")


def regression_problem(seed: int = 0) -> sm.Problem:
    X, b, _ = correlated_regression(1000, 200, 30, rho=0.9, noise=0.5, seed=seed)
    A = unit_columns(X)
    c = 1.0 / np.sqrt(A.shape[0])
    w = sm.Variable(A.shape[1] + 1, name="w")
    loss = sm.sum_squares(A @ w[1:] + c * w[0] - b) / 2
    return sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= 10], source="correlated regression")


def parse_k(text: str) -> list[int]:
    if ":" in text:
        a, b = (int(t) for t in text.split(":")[:2])
        return list(range(a, b + 1))
    return [int(t) for t in text.split(",")]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b)) + 1e-12


def ordering_report(name: str, study, ks: list[int]) -> None:
    """Per k: solvers sorted by loss (ties within 1e-9 relative shown as '='), whether the paper's
    ordering holds, wins and mean competition rank (1 + the number of solvers strictly better)."""
    loss = study.mean("objective")  # one replication: the loss itself
    rows, holds = [], 0
    wins = {s: 0 for s in SOLVERS}
    ranks: dict[str, list[int]] = {s: [] for s in SOLVERS}
    for k in ks:
        vals = {s: loss[k, s] for s in SOLVERS if (k, s) in loss and np.isfinite(loss[k, s])}
        order = sorted(vals, key=lambda s: vals[s])
        text = order[0]
        for a, b in zip(order, order[1:]):
            text += (" = " if _close(vals[a], vals[b]) else " < ") + b
        chain = [s for s in PAPER_ORDER if s in vals]
        ok = all(vals[a] <= vals[b] or _close(vals[a], vals[b]) for a, b in zip(chain, chain[1:]))
        holds += ok
        for s in vals:
            r = 1 + sum(vals[t] < vals[s] and not _close(vals[t], vals[s]) for t in vals)
            ranks[s].append(r)
            wins[s] += r == 1
        rows.append([k + 1, text, "yes" if ok else "no"] + [f"{vals.get(s, float('nan')):.6g}" for s in SOLVERS])
    print(f"\n{name}: loss at each sparsity (nonzeros include the intercept)")
    print(tabulate(rows, headers=["nnz", "order found (best first)", "paper's order"] + SOLVERS))
    print(f"{name}: the paper's ordering ELS <= ARHT <= OMPR <= OMP <= LASSO holds at {holds} of {len(ks)} sparsities")
    print(f"{name}: best (or tied best) at how many sparsities: " + ", ".join(f"{s} {wins[s]}" for s in SOLVERS))
    print(
        f"{name}: mean rank (1 = lowest loss, ties share a rank): "
        + ", ".join(f"{s} {np.mean(ranks[s]):.2f}" for s in SOLVERS)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="1:40", help="sparsity levels (features, intercept excluded): 1:40 or 1,5,10")
    ap.add_argument("--data", default="caravan,regression")
    ap.add_argument("--out", default="benchmarks/out", help="directory for the CSV and PNG files")
    ap.add_argument("--seed", type=int, default=0, help="seed of ARHT's sampling and of the regression data")
    args = ap.parse_args()
    ks = parse_k(args.k)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    problems = {
        "caravan": ("Caravan (logistic)", caravan_problem),
        "regression": ("correlated regression (least squares)", lambda: regression_problem(args.seed)),
    }
    for key in args.data.split(","):
        title, make = problems[key]
        t0 = time.perf_counter()
        # one replication, the data as it is: the training loss of every solver at every k
        study = sm.experiment(make(), SOLVERS, k=ks, options={"arht": {"seed": args.seed}}, progress=True)
        print(f"\n{title}: sweep of {len(ks)} sparsities x {len(SOLVERS)} solvers in {time.perf_counter() - t0:.1f} s")
        print(study.table(metrics=["objective", "time_s"]))
        print(f"wrote {study.to_csv(out / f'loss_vs_sparsity_{key}_{stamp}.csv')}")
        ordering_report(title, study, ks)
        png = study.plot(out / f"loss_vs_sparsity_{key}_{stamp}.png", metrics=["objective"])
        print(f"wrote {png} (x: features selected; the paper's x counts the intercept too, one more)")


if __name__ == "__main__":
    main()
