"""``sparsemodel demo``: paper 000, Section 6.1 — sparse linear regression.

p = 500 features (named x0, ..., x499), 50 nonzeros, n = 250 samples of a Gaussian design with
standard Gaussian noise. ``auto``, the default solver, solves it and prints the support by name;
GraHTP, the paper's algorithm, and FGraHTP (no debiasing) are the comparison.
"""

from __future__ import annotations

import json

import numpy as np

from .datasets import sparse_linear_regression

MODEL = """\
# paper 000, Section 6.1: sparsity-constrained least squares (6)
data X : matrix from "X.npy"
data v : vector from "v.npy"
var w[cols(X)]
minimize sum_squares(X @ w - v) / (2 * rows(X))
subject to
    nnz(w) <= 50
"""


def build_problem(X: np.ndarray, v: np.ndarray, k: int = 50):
    """The demo's model: the text above, parsed, with X (its columns named x0, x1, ...) and v bound
    from memory."""
    from .grammar import parse
    from .model.expr import Data

    named = Data(X, names=(None, [f"x{j}" for j in range(X.shape[1])]))
    return parse(MODEL.replace("<= 50", f"<= {k}"), data={"X": named, "v": v}, name="demo.sm")


def run_demo(n: int = 250, seed: int = 0, as_json: bool = False, p: int = 500, k: int = 50) -> int:
    from tabulate import tabulate

    from .errors import ModelError

    if n < 2 or p <= k:
        raise ModelError(f"demo needs n >= 2 and p > k; got n={n}, p={p}, k={k}")
    if seed < 0:
        raise ModelError(f"--seed {seed}: a seed is a nonnegative integer", hint="for example --seed 3")
    X, v, w_true = sparse_linear_regression(n, p=p, k=k, seed=seed)
    truth = set(np.flatnonzero(w_true).tolist())
    prob = build_problem(X, v, k)
    results = {s: prob.solve(s) for s in ("auto", "grahtp", "fgrahtp")}
    if as_json:
        out = {
            "problem": {"paper": "000, Section 6.1", "n": n, "p": p, "k": k, "seed": seed},
            "true_support": sorted(truth),
        }
        for name, r in results.items():
            d = r.to_dict()
            d["recovered"] = len(truth & set(r.support.tolist()))
            d["exact_recovery"] = set(r.support.tolist()) == truth
            out[name] = d
        print(json.dumps(out, allow_nan=False))
        return 0
    print("sparsemodel demo: paper 000, Section 6.1 (sparse linear regression)")
    print(f"  p = {p}, {k} nonzeros drawn from N(5, 1), n = {n} Gaussian samples, N(0, 1) noise, seed {seed}\n")
    print("  " + MODEL.rstrip("\n").replace("\n", "\n  ").replace("<= 50", f"<= {k}") + "\n")
    rows = []
    for name, r in results.items():
        found = len(truth & set(r.support.tolist()))
        rows.append(
            (
                name,
                f"{found}/{k}",
                "yes" if found == k and len(r.support) == k else "no",
                f"{r.objective:.6g}",
                r.iterations,
                f"{1e3 * r.time_s:.1f} ms",
                r.status,
            )
        )
    print(
        tabulate(rows, headers=["solver", "true support found", "exact", "objective", "iterations", "time", "status"])
    )
    a, g = results["auto"], results["grahtp"]
    print(f"\nsupport (auto, the default): {', '.join(a.support_names)}")
    if g.certificate:
        c = g.certificate
        print(
            f"GraHTP's end:   {c['verdict']} stationary point for step {c['gamma']:.3g} "
            f"(paper 001, Definition 4: min |x| on the support {c['min_abs_top_s']:.3g} >= "
            f"step x max |gradient| off it {c['gamma'] * c['max_abs_grad_off_support']:.3g})"
        )
    f = results["fgrahtp"]
    print(
        f"FGraHTP skips the debiasing step: {f.iterations} cheap iterations versus {g.iterations} "
        f"for GraHTP; objective {f.objective:.6g} versus {g.objective:.6g}."
    )
    return 0
