"""Choosing k: our defaults and criteria against abess's, on data with a known support.

Designs (one family of data, three losses): columns AR(1)-correlated (corr 0.5^|i-j|), s true
coefficients with random signs and sizes uniform in [lo, hi], a zero intercept:

* ``high`` -- n = 500, p = 1000, s = 10, sizes 1 to 2 (the issue's problem);
* ``low``  -- n = 300, p = 50, s = 5, sizes 2 to 3 (well separated);
* ``small`` -- n = 100, p = 20, s = 3, sizes 1 to 2 (the smallest problems a statistician fits,
  where the fixed costs of a fit count most; ``--designs small``);

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

``--cv`` runs cross-validation alone: ``abess cv=5``, ``ours cv`` (the estimator's k="cv": the
paired one-standard-error rule), and ``Problem.select(by="cv")`` on the same model with
``rule="min"`` (the former default) and ``rule="1se"`` (Breiman's); 20 seeds by default.

``--multinomial`` compares the default k of ``SparseLogisticRegression`` with abess's
``MultinomialRegression()`` on abess's own generator, ``abess.make_multivariate_glm_data(family=
"multinomial", rho=0.5)``, at (n, p, k, classes) = (100, 20, 3, 3) (abess's estimator test),
(200, 50, 3, 3) and (300, 100, 5, 4), seeds 1000 + s; 40 seeds by default.

Cells: exact support recovered (seeds) / mean false positives / mean false negatives / median time
of the call a user makes (``fit`` or ``Problem.select``). Everyone runs in this process, one BLAS and
OpenMP thread for all (``benchmarks/pinning.py``), each contender warmed up once; the contenders
alternate on each seed's data, ``--repeat`` times (the median kept: 5 on the small design, whose
fits take a few milliseconds and whose single timings moved the cross-validation ratio between
1.06 and 1.42 from one run of the command to the next; 1 on the others). The ratio tables give, per cell, the median over seeds of our time
over abess's on the same data (abess default for the criteria, abess cv=5 for ours cv), by the wall
clock and by the process's CPU time (which another job on the machine inflates less).

Targets: our default's exact-support rate at least abess's default's and its mean false
positives at most abess's, on every column; its time at most abess's default's; cross-validation's
exact-support rate at least abess's cv=5's, its false positives at most abess's, its time at most
abess's.

    python benchmarks/choose_k.py                 # both designs, 10 seeds (about 15 minutes)
    python benchmarks/choose_k.py --quick         # the high design, 3 seeds, the main rows
    python benchmarks/choose_k.py --extra --designs high --families linear
    python benchmarks/choose_k.py --cv            # cross-validation, both designs, 20 seeds
    python benchmarks/choose_k.py --multinomial   # the multinomial default k, 40 seeds
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
    "small": dict(n=100, p=20, s=3, lo=1.0, hi=2.0, noise=1.0),
}
FAMILIES = ("linear", "logistic", "poisson")
SMALL_REPEAT = 5  # timed runs per contender and seed on the small design (--repeat)
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


def rows(family: str, mode: str, extra: bool) -> dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    """The contenders of one family: mode ``full`` (every row), ``quick`` (abess, our default and
    cv) or ``cv`` (cross-validation alone)."""
    out = {"abess default": abess_row(family)} if mode != "cv" else {}
    out["abess cv=5"] = abess_row(family, cv=5)
    if mode != "cv":
        out["ours default (ebic)"] = estimator_row(family)
    if mode == "full":
        for by in ("aic", "bic", "ebic_cc", "gic"):
            out[f"ours {by}"] = estimator_row(family, by)
    out["ours cv"] = estimator_row(family, "cv")
    if mode != "quick":
        out["ours cv, rule=min"] = select_row(family, by="cv", rule="min")
        out["ours cv, rule=1se"] = select_row(family, by="cv", rule="1se")
    if extra:
        out["ours ebic, no early stop"] = select_row(family, early_stop=False)
        out["ours ebic, start=best"] = select_row(family, start="best")
    return out


# ---------------------------------------------------------------------- the run

Record = tuple[bool, int, int, float, float, tuple[int, ...]]  # exact, fp, fn, wall s, cpu s, support


def timed(f: Callable[..., Any], *args: Any) -> tuple[Any, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    out = f(*args)
    return out, time.perf_counter() - t0, time.process_time() - c0


def record(got: Any, truth: set[int], wall: float, cpu: float) -> Record:
    g = {int(i) for i in np.ravel(got)}
    return (g == truth, len(g - truth), len(truth - g), wall, cpu, tuple(sorted(g)))


def run(designs: list[str], families: list[str], seeds: int, mode: str, extra: bool, repeat: int | None = None) -> None:
    results: dict[str, dict[str, dict[str, list[Record]]]] = {}
    for design in designs:
        results[design] = {}
        for family in families:
            contenders = rows(family, mode, extra)
            Xw, yw, _ = make("low", family, 999)  # warm up every contender (imports, first calls)
            for f in contenders.values():
                f(Xw[:120, :30], yw[:120])
            res: dict[str, list[Record]] = defaultdict(list)
            reps = repeat or (SMALL_REPEAT if design == "small" else 1)
            for seed in range(seeds):
                X, y, support = make(design, family, seed)
                truth = set(support.tolist())
                runs: dict[str, list[tuple[Any, float, float]]] = defaultdict(list)
                for _ in range(reps):  # (the contenders alternate at every repetition)
                    for name, f in contenders.items():
                        runs[name].append(timed(f, X, y))
                for name, got_runs in runs.items():
                    wall = statistics.median(r[1] for r in got_runs)
                    cpu = statistics.median(r[2] for r in got_runs)
                    res[name].append(record(got_runs[-1][0], truth, wall, cpu))
                print(
                    f"  {design} {family} seed {seed}: "
                    + ", ".join(f"{name} {r[-1][3]:.2f}s" for name, r in res.items()),
                    flush=True,
                )
            results[design][family] = res
    report(results, seeds, mode, extra)


def cell(r: list[Record]) -> str:
    n = len(r)
    ex = sum(x[0] for x in r)
    fp = statistics.mean(x[1] for x in r)
    fn = statistics.mean(x[2] for x in r)
    t = statistics.median(x[3] for x in r)
    return f"{ex}/{n}, {fp:.2f}, {fn:.2f}, {t:.3g} s"


def ratio(ours: list[Record], ref: list[Record], cpu: bool = False) -> float:
    i = 4 if cpu else 3
    return statistics.median(a[i] / b[i] for a, b in zip(ours, ref))


def verdict(ok: bool, text: str) -> str:
    return f"{'holds' if ok else 'FAILS'} ({text})"


def report(results: dict, seeds: int, mode: str, extra: bool) -> None:
    verdicts = []
    for design, fams in results.items():
        d = DESIGNS[design]
        families = list(fams)
        names = list(next(iter(fams.values())))
        print(
            f"\n{design}-dimensional design: n = {d['n']}, p = {d['p']}, {d['s']} true coefficients of "
            f"{d['lo']:g} to {d['hi']:g}, columns corr 0.5^|i-j|, {seeds} seeds, one thread"
        )
        print("cells: exact support / mean false positives / mean false negatives / median wall time")
        body = [[name] + [cell(fams[f][name]) for f in families] for name in names]
        print(tabulate(body, headers=["", *families], tablefmt="github"))
        print(
            "\ntime ratios, wall / cpu (median over seeds of ours / abess on the same data; cv rows against abess cv=5)"
        )
        body = []
        for name in names:
            if name.startswith("abess"):
                continue
            ref = "abess cv=5" if "cv" in name.split(",")[0] else "abess default"
            body.append(
                [f"{name} / {ref}"]
                + [
                    f"{ratio(fams[f][name], fams[f][ref]):.2f} / {ratio(fams[f][name], fams[f][ref], True):.2f}"
                    for f in families
                ]
            )
        print(tabulate(body, headers=["", *families], tablefmt="github"))
        if extra:
            print("\nthe same choice as the default (seeds)")
            for name in names:
                if name.startswith("ours ebic,"):
                    same = [
                        sum(a[5] == b[5] for a, b in zip(fams[f][name], fams[f]["ours default (ebic)"]))
                        for f in families
                    ]
                    print(f"  {name}: " + ", ".join(f"{f} {s}/{seeds}" for f, s in zip(families, same)))
        for f in families:
            line = [f"{design} {f}"]
            pairs = [("ours cv", "abess cv=5")] + ([] if mode == "cv" else [("ours default (ebic)", "abess default")])
            for ours_name, ab_name in pairs:
                ours, ab = fams[f][ours_name], fams[f][ab_name]
                ex_o, ex_a = sum(x[0] for x in ours), sum(x[0] for x in ab)
                fp_o, fp_a = statistics.mean(x[1] for x in ours), statistics.mean(x[1] for x in ab)
                rw, rc = ratio(ours, ab), ratio(ours, ab, True)
                line += [
                    verdict(ex_o >= ex_a, f"{ex_o} vs {ex_a}"),
                    verdict(fp_o <= fp_a, f"{fp_o:.2f} vs {fp_a:.2f}"),
                    verdict(rw <= 1, f"wall {rw:.2f}, cpu {rc:.2f}"),
                ]
            verdicts.append(line)
    print("\ntargets")
    head = ["column", "cv exact >= abess cv=5", "cv FP <= abess cv=5", "cv time <= abess cv=5"]
    if mode != "cv":
        head += ["default exact >= abess", "default FP <= abess", "default time <= abess"]
    print(tabulate(verdicts, headers=head, tablefmt="github"))


# ---------------------------------------------------------------------- the multinomial default k

MULTINOMIAL = {"a100": (100, 20, 3, 3), "a200": (200, 50, 3, 3), "a300": (300, 100, 5, 4)}


def multinomial(seeds: int) -> None:
    """Our default k against abess's on abess's multinomial generator (see the module docstring)."""
    import abess

    from sparsemodel.sklearn import SparseLogisticRegression

    body, verdicts = [], []
    for name, (n, p, k, M) in MULTINOMIAL.items():
        res: dict[str, list[Record]] = defaultdict(list)
        for seed in range(seeds):
            np.random.seed(1000 + seed)
            d = abess.make_multivariate_glm_data(family="multinomial", n=n, p=p, k=k, rho=0.5, M=M)
            y = np.argmax(d.y, axis=1)
            if len(np.unique(y)) < M:  # a class without samples: another problem
                continue
            truth = set(np.unique(np.nonzero(d.coef_)[0]).tolist())
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m, wall, cpu = timed(SparseLogisticRegression().fit, d.x, y)
                res["ours default"].append(record(np.flatnonzero(m.support_), truth, wall, cpu))
                a, wall, cpu = timed(abess.MultinomialRegression().fit, d.x, np.eye(M)[y])
                res["abess default"].append(record(np.unique(np.nonzero(a.coef_)[0]), truth, wall, cpu))
        for who, r in res.items():
            body.append([f"n={n} p={p} k={k} classes={M}", who, cell(r)])
        o, a = res["ours default"], res["abess default"]
        eo, ea = sum(x[0] for x in o), sum(x[0] for x in a)
        fo, fa = statistics.mean(x[1] for x in o), statistics.mean(x[1] for x in a)
        verdicts.append(
            [
                name,
                verdict(eo >= ea, f"{eo} vs {ea}"),
                verdict(fo <= fa, f"{fo:.2f} vs {fa:.2f}"),
                f"{ratio(o, a):.2f} / {ratio(o, a, True):.2f}",
            ]
        )
    print("multinomial: abess.make_multivariate_glm_data(family='multinomial', rho=0.5), seeds 1000 + s")
    print("cells: exact support / mean false positives / mean false negatives / median wall time")
    print(tabulate(body, headers=["design", "", "cell"], tablefmt="github"))
    print(
        tabulate(
            verdicts,
            headers=["design", "exact >= abess", "FP <= abess", "time ratio wall / cpu"],
            tablefmt="github",
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--seeds", type=int, default=None, help="seeds per cell (default 10; 3 --quick, 20 --cv, 40 --multinomial)"
    )
    ap.add_argument("--designs", default=None, help="high,low,small (default high,low; high with --quick)")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--quick", action="store_true", help="the high design, 3 seeds, abess and our default and cv")
    ap.add_argument("--cv", action="store_true", help="cross-validation alone: abess cv=5 and our rules")
    ap.add_argument("--multinomial", action="store_true", help="the multinomial default k against abess's")
    ap.add_argument("--extra", action="store_true", help="also ebic without the early stop and with start=best")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--repeat",
        type=int,
        default=None,
        help=f"timed runs of every contender per seed, alternated, medians kept ({SMALL_REPEAT} on the small design, "
        "whose fits take milliseconds; 1 on the others)",
    )
    args = ap.parse_args()
    if args.repeat is not None and args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: give a whole number of runs >= 1")
    mode = "cv" if args.cv else ("quick" if args.quick else "full")
    seeds = args.seeds or {"quick": 3, "cv": 20}.get(mode, 10)
    designs = (args.designs or ("high" if args.quick else "high,low")).split(",")
    families = args.families.split(",")
    for d in designs:
        if d not in DESIGNS:
            ap.error(f"unknown design {d!r}: choose from {', '.join(DESIGNS)}")
    for f in families:
        if f not in FAMILIES:
            ap.error(f"unknown family {f!r}: choose from {', '.join(FAMILIES)}")
    with pinned(args.threads):
        if args.multinomial:
            multinomial(args.seeds or 40)
        else:
            run(designs, families, seeds, mode, args.extra, args.repeat)


if __name__ == "__main__":
    main()
