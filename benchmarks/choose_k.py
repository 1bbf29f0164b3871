"""Choosing k: our defaults and criteria against abess's, on data with a known support (issue 16).

Designs (one family of data, three losses): columns AR(1)-correlated (corr 0.5^|i-j|), s true
coefficients with random signs and sizes uniform in [lo, hi], a zero intercept:

* ``high`` -- n = 500, p = 1000, s = 10, sizes 1 to 2 (the issue's problem);
* ``low``  -- n = 300, p = 50, s = 5, sizes 2 to 3 (well separated);

and per design the losses: ``linear`` (y = X beta + noise; noise sd 1 for high, 0.5 for low),
``logistic`` (P(y = 1) = 1 / (1 + exp(-X beta))), ``poisson`` (y ~ Poisson(exp(X beta)) with beta
scaled by 0.3, so that exp stays moderate).

Rows, everyone with an intercept and its defaults otherwise:

* ``abess default`` -- ``abess.linear.{Linear,Logistic,Poisson}Regression().fit`` (its support-size
  path 0..min(p, n / (log log n log p)) and ic_type='ebic');
* ``abess cv=5`` -- the same with ``cv=5``;
* ``ours default`` -- ``sparsemodel.sklearn.Sparse{Linear,Logistic,Poisson}Regression().fit``
  (k = "ebic" over the same range, warm path, early stop; the logistic ridge 1e-4);
* ``ours aic`` / ``bic`` / ``ebic_cc`` / ``gic`` / ``cv`` -- the estimator with that k;
* ``ours cv+1se`` -- ``Problem.select(by="cv", rule="1se")`` on the estimator's model written with
  the builder (the estimators have no rule parameter);
* with ``--extra``: ``ours ebic, no early stop`` and ``ours ebic, start=best`` (cold and warm solve
  at every k, the old default) on the same model, to show that the early stop and the warm path
  choose what the full and the best path choose.

Cells: exact support recovered (seeds) / mean false positives / mean false negatives / median time
of the call a user makes (``fit`` or ``Problem.select``). Everyone runs in this process, one BLAS and
OpenMP thread for all (``benchmarks/pinning.py``), each contender warmed up once; the contenders
alternate on each seed's data. The ratio tables give, per cell, the median over seeds of our time
over abess's on the same data (abess default for the criteria, abess cv=5 for ours cv).

Targets (issue 16): our default's exact-support rate at least abess's default's and its mean false
positives at most abess's, on every column; its time at most abess's default's; cross-validation's
time at most abess's cv=5's.

    python benchmarks/choose_k.py                 # both designs, 10 seeds (about 15 minutes)
    python benchmarks/choose_k.py --quick         # the high design, 3 seeds, the main rows
    python benchmarks/choose_k.py --extra --designs high --families linear
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
from pinning import pinned
from tabulate import tabulate

import sparsemodel as sm

DESIGNS = {
    "high": dict(n=500, p=1000, s=10, lo=1.0, hi=2.0, noise=1.0),
    "low": dict(n=300, p=50, s=5, lo=2.0, hi=3.0, noise=0.5),
}
FAMILIES = ("linear", "logistic", "poisson")
LOGISTIC_ALPHA = 1e-4  # the estimator's default ridge, for the rows built with Problem.select


def make(design: str, family: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = DESIGNS[design]
    n, p, s = d["n"], d["p"], d["s"]
    rng = np.random.default_rng(1000 * seed + 17)
    Z = rng.standard_normal((n, p))
    X = np.empty((n, p))
    X[:, 0] = Z[:, 0]
    c = np.sqrt(1 - 0.25)
    for j in range(1, p):
        X[:, j] = 0.5 * X[:, j - 1] + c * Z[:, j]
    support = np.sort(rng.choice(p, s, replace=False))
    beta = np.zeros(p)
    beta[support] = rng.choice([-1.0, 1.0], s) * rng.uniform(d["lo"], d["hi"], s)
    if family == "linear":
        y = X @ beta + d["noise"] * rng.standard_normal(n)
    elif family == "logistic":
        y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    else:
        y = rng.poisson(np.exp(X @ (0.3 * beta))).astype(float)
    return X, y, support


# ---------------------------------------------------------------------- contenders


def abess_row(family: str, cv: int = 1) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    from abess.linear import LinearRegression, LogisticRegression, PoissonRegression

    cls = {"linear": LinearRegression, "logistic": LogisticRegression, "poisson": PoissonRegression}[family]

    def fit(X: np.ndarray, y: np.ndarray) -> np.ndarray:
        m = cls(cv=cv) if cv > 1 else cls()
        return np.flatnonzero(np.ravel(m.fit(X, y).coef_))

    return fit


def estimator_row(family: str, k: str | None = None) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    from sparsemodel.sklearn import SparseLinearRegression, SparseLogisticRegression, SparsePoissonRegression

    cls = {
        "linear": SparseLinearRegression,
        "logistic": SparseLogisticRegression,
        "poisson": SparsePoissonRegression,
    }[family]

    def fit(X: np.ndarray, y: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = cls() if k is None else cls(k=k)
            return np.flatnonzero(np.ravel(m.fit(X, y).coef_))

    return fit


def model(X: np.ndarray, y: np.ndarray, family: str) -> tuple[sm.Problem, sm.Variable]:
    """The estimator's model, written with the builder (tests/test_sklearn.py checks the estimators
    solve exactly this)."""
    n, p = X.shape
    w, b = sm.Variable(p, name="w"), sm.Variable((), name="b")
    z = X @ w + b
    if family == "linear":
        obj = sm.sum_squares(z - y) / (2 * n)
    elif family == "logistic":
        v = 2.0 * y - 1.0
        obj = sm.mean(sm.logistic(-v * z)) + LOGISTIC_ALPHA / (2 * n) * sm.sum_squares(w)
    else:
        obj = sm.mean(sm.exp(z) - y * z)
    return sm.Problem(sm.minimize(obj), [sm.nnz(w) <= 0]), w


def select_row(family: str, **kw: Any) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def fit(X: np.ndarray, y: np.ndarray) -> np.ndarray:
        prob, w = model(X, y, family)
        sel = prob.select(**kw)
        return np.flatnonzero(sel.result.values[w.name])

    return fit


def rows(family: str, quick: bool, extra: bool) -> dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    out = {
        "abess default": abess_row(family),
        "abess cv=5": abess_row(family, cv=5),
        "ours default (ebic)": estimator_row(family),
    }
    if not quick:
        for by in ("aic", "bic", "ebic_cc", "gic"):
            out[f"ours {by}"] = estimator_row(family, by)
    out["ours cv"] = estimator_row(family, "cv")
    if not quick:
        out["ours cv+1se"] = select_row(family, by="cv", rule="1se")
    if extra:
        out["ours ebic, no early stop"] = select_row(family, early_stop=False)
        out["ours ebic, start=best"] = select_row(family, start="best")
    return out


# ---------------------------------------------------------------------- the run


def run(designs: list[str], families: list[str], seeds: int, quick: bool, extra: bool) -> None:
    # results[design][family][row] = list of (exact, fp, fn, seconds, support)
    results: dict[str, dict[str, dict[str, list[tuple[bool, int, int, float, tuple[int, ...]]]]]] = {}
    for design in designs:
        results[design] = {}
        for family in families:
            contenders = rows(family, quick, extra)
            Xw, yw, _ = make("low", family, 999)  # warm up every contender (imports, first calls)
            for f in contenders.values():
                f(Xw[:120, :30], yw[:120])
            res: dict[str, list] = defaultdict(list)
            for seed in range(seeds):
                X, y, support = make(design, family, seed)
                truth = set(support.tolist())
                for name, f in contenders.items():
                    t0 = time.perf_counter()
                    got = f(X, y)
                    dt = time.perf_counter() - t0
                    g = set(got.tolist())
                    res[name].append((g == truth, len(g - truth), len(truth - g), dt, tuple(sorted(g))))
                print(
                    f"  {design} {family} seed {seed}: "
                    + ", ".join(f"{name} {r[-1][3]:.2f}s" for name, r in res.items()),
                    flush=True,
                )
            results[design][family] = res
    report(results, seeds, extra)


def cell(r: list[tuple[bool, int, int, float, tuple[int, ...]]]) -> str:
    n = len(r)
    ex = sum(x[0] for x in r)
    fp = statistics.mean(x[1] for x in r)
    fn = statistics.mean(x[2] for x in r)
    t = statistics.median(x[3] for x in r)
    return f"{ex}/{n}, {fp:.1f}, {fn:.1f}, {t:.3g} s"


def ratio(ours: list, ref: list) -> float:
    return statistics.median(a[3] / b[3] for a, b in zip(ours, ref))


def report(results: dict, seeds: int, extra: bool) -> None:
    verdicts = []
    for design, fams in results.items():
        d = DESIGNS[design]
        families = list(fams)
        names = list(next(iter(fams.values())))
        print(
            f"\n{design}-dimensional design: n = {d['n']}, p = {d['p']}, {d['s']} true coefficients of "
            f"{d['lo']:g} to {d['hi']:g}, columns corr 0.5^|i-j|, {seeds} seeds, one thread"
        )
        print("cells: exact support / mean false positives / mean false negatives / median time")
        body = [[name] + [cell(fams[f][name]) for f in families] for name in names]
        print(tabulate(body, headers=["", *families], tablefmt="github"))
        print("\ntime ratios (median over seeds of ours / abess on the same data; cv rows against abess cv=5)")
        body = []
        for name in names:
            if name.startswith("abess"):
                continue
            ref = "abess cv=5" if "cv" in name.split(",")[0] else "abess default"
            body.append([f"{name} / {ref}"] + [f"{ratio(fams[f][name], fams[f][ref]):.2f}" for f in families])
        print(tabulate(body, headers=["", *families], tablefmt="github"))
        if extra:
            print("\nthe same choice as the default (seeds)")
            for name in names:
                if name.startswith("ours ebic,"):
                    same = [
                        sum(a[4] == b[4] for a, b in zip(fams[f][name], fams[f]["ours default (ebic)"]))
                        for f in families
                    ]
                    print(f"  {name}: " + ", ".join(f"{f} {s}/{seeds}" for f, s in zip(families, same)))
        for f in families:
            ours, ab = fams[f]["ours default (ebic)"], fams[f]["abess default"]
            ex_o, ex_a = sum(x[0] for x in ours), sum(x[0] for x in ab)
            fp_o, fp_a = statistics.mean(x[1] for x in ours), statistics.mean(x[1] for x in ab)
            r = ratio(ours, ab)
            rc = ratio(fams[f]["ours cv"], fams[f]["abess cv=5"])
            verdicts.append(
                [
                    f"{design} {f}",
                    f"{'holds' if ex_o >= ex_a else 'FAILS'} ({ex_o} vs {ex_a})",
                    f"{'holds' if fp_o <= fp_a else 'FAILS'} ({fp_o:.1f} vs {fp_a:.1f})",
                    f"{'holds' if r <= 1 else 'FAILS'} ({r:.2f})",
                    f"{'holds' if rc <= 1 else 'FAILS'} ({rc:.2f})",
                ]
            )
    print("\ntargets (issue 16)")
    head = ["column", "default exact >= abess", "default FP <= abess", "default time <= abess", "cv time <= abess cv=5"]
    print(tabulate(verdicts, headers=head, tablefmt="github"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=None, help="seeds per cell (default 10; 3 with --quick)")
    ap.add_argument("--designs", default=None, help="high,low (default both; high with --quick)")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--quick", action="store_true", help="the high design, 3 seeds, abess and our default and cv")
    ap.add_argument("--extra", action="store_true", help="also ebic without the early stop and with start=best")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    seeds = args.seeds or (3 if args.quick else 10)
    designs = (args.designs or ("high" if args.quick else "high,low")).split(",")
    families = args.families.split(",")
    for d in designs:
        if d not in DESIGNS:
            ap.error(f"unknown design {d!r}: choose from {', '.join(DESIGNS)}")
    for f in families:
        if f not in FAMILIES:
            ap.error(f"unknown family {f!r}: choose from {', '.join(FAMILIES)}")
    with pinned(args.threads):
        run(designs, families, seeds, args.quick, args.extra)


if __name__ == "__main__":
    main()
