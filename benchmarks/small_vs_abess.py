"""`auto` against abess on the small problems most statisticians have (n = 100..500 rows, p = 20..100
columns), where a fixed cost per solve weighs most: least squares, logistic, Poisson, Gamma and
multinomial regression with a free intercept, the data of ``abess.datasets.make_glm_data`` (rho =
0.5, seeded by ``np.random.seed`` as abess's tests do), the losses as benchmarks/vs_abess.py writes
them; and paper 000, Section 6.1 (n = 175 and 250, p = 500, k = 50).

Per case, in this process with one BLAS thread for everyone (benchmarks/pinning.py): the objective
of ``auto`` against the best abess's answer gives under our model (vs_abess.reference), and three
times, each the median of ``--repeat`` runs alternated with abess's fit (so that a busy machine
slows both alike): ``first`` -- the first solve of a fresh lowering (what a new model costs: the
lean path's arrays, the start, the bound beside the answer), ``solve`` -- a solve of the same
lowering again (what a path, a comparison or a repeated study pays per solve), and
``rebind`` -- ``lp.rebind(...)`` with the next seed's data of the same shape, then a solve (a study
over replications). The printed medians over seeds and their ratios to abess's ``fit`` time are
checked against the targets of the lean-path work: ``auto`` at most abess's time (median over seeds)
on every family and size, its objective at most abess's in at least 95 % of cases, Section 6.1 at
most 1.0 times abess.

    python benchmarks/small_vs_abess.py                 # 5 seeds, the whole grid
    python benchmarks/small_vs_abess.py --seeds 3 --families gaussian,binomial --repeat 9
    python benchmarks/small_vs_abess.py --clock cpu      # CPU times (a machine shared with other jobs)
    python benchmarks/small_vs_abess.py --families multinomial --classes 10   # digits' classes
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any

import numpy as np
from pinning import pinned
from vs_abess import at_most, reference

import sparsemodel as sm
from sparsemodel.datasets import sparse_linear_regression
from sparsemodel.solvers import get_solver

SIZES = [(100, 20, 3), (200, 50, 5), (500, 100, 10)]
FAMILIES = ["gaussian", "binomial", "poisson", "gamma", "multinomial"]
CLOCK = [time.perf_counter]  # --clock cpu: time.process_time (every contender on one thread: robust to a busy machine)
CLASSES = [3]  # --classes: the multinomial family's classes (the kernels take up to 16: digits' 10)


def glm(family: str, n: int, p: int, k: int, seed: int) -> tuple[Any, Any, Any]:
    """(problem builder of data, abess fit, data) for one draw."""
    import abess
    from abess.datasets import make_glm_data, make_multivariate_glm_data

    np.random.seed(seed)
    if family == "multinomial":
        M = CLASSES[0]
        d = make_multivariate_glm_data(n=n, p=p, k=k, M=M, family="multinomial", rho=0.5)
        X, Y = d.x, d.y

        def build(X=X, Y=Y) -> sm.Problem:
            Xd, Yd = sm.Data(X, name="X"), sm.Data(Y, name="Y")
            W = sm.Variable((p, M), name="W")
            b = sm.Variable(M, name="b")
            Zs = Xd @ W + b
            return sm.Problem(
                sm.minimize(sm.sum(sm.logsumexp(Zs, axis=1)) - sm.sum(Yd * Zs)),
                [sm.nnz(W, groups=np.repeat(np.arange(p), M)) <= k],
            )

        def fit(lp: Any, X=X, Y=Y) -> np.ndarray:
            m = abess.linear.MultinomialRegression(support_size=[k]).fit(X, Y)
            return lp.layout.pack({"W": np.asarray(m.coef_), "b": np.asarray(m.intercept_)})

        return build, fit, {"X": X, "Y": Y}
    d = make_glm_data(n=n, p=p, k=k, family=family, rho=0.5, sigma=1)
    X, y = d.x, d.y
    model, sign = {
        "gaussian": (abess.linear.LinearRegression, 1.0),
        "binomial": (abess.linear.LogisticRegression, 1.0),
        "poisson": (abess.linear.PoissonRegression, 1.0),
        "gamma": (abess.linear.GammaRegression, -1.0),
    }[family]

    def build(X=X, y=y) -> sm.Problem:
        Xd, yd = sm.Data(X, name="X"), sm.Data(y, name="y")
        w = sm.Variable(p + 1, name="w")
        z = Xd @ w[1:] + w[0]
        if family == "gaussian":
            loss = sm.sum_squares(z - yd)
        elif family == "binomial":
            loss = sm.sum(sm.logistic(-(2 * yd - 1) * z))
        elif family == "poisson":
            loss = sm.sum(sm.exp(z) - yd * z)
        else:
            loss = sm.sum(yd * z - sm.log(z))
        return sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= k])

    def fit(lp: Any, X=X, y=y) -> np.ndarray:
        m = model(support_size=[k]).fit(X, y)
        return sign * np.concatenate([[float(m.intercept_)], np.asarray(m.coef_, dtype=float)])

    return build, fit, {"X": X, "y": y}


def linreg61(n: int, seed: int) -> tuple[Any, Any, Any]:
    import abess

    X, y, _ = sparse_linear_regression(n, seed=seed)

    def build(X=X, y=y) -> sm.Problem:
        w = sm.Variable(X.shape[1], name="w")
        return sm.Problem(
            sm.minimize(sm.sum_squares(sm.Data(X, name="X") @ w - sm.Data(y, name="y")) / (2 * n)),
            [sm.nnz(w) <= 50],
        )

    def fit(lp: Any, X=X, y=y) -> np.ndarray:
        m = abess.linear.LinearRegression(support_size=[50], fit_intercept=False).fit(X, y)
        return np.asarray(m.coef_, dtype=float)

    return build, fit, {"X": X, "y": y}


def run_case(build: Any, fit: Any, data: dict, nxt: dict, repeat: int) -> dict[str, Any]:
    auto = get_solver("auto")()
    t_first, t_solve, t_rebind, t_ab = [], [], [], []
    res = None
    for _ in range(repeat):
        prob = build()
        t0 = CLOCK[0]()
        lp = prob.lower()
        res = auto.solve(lp)
        t2 = CLOCK[0]()
        xa = fit(lp)
        t3 = CLOCK[0]()
        auto.solve(lp)
        t4 = CLOCK[0]()
        lp2 = lp.rebind(**nxt)
        auto.solve(lp2)
        t5 = CLOCK[0]()
        t_first.append(t2 - t0)
        t_ab.append(t3 - t2)
        t_solve.append(t4 - t3)
        t_rebind.append(t5 - t4)
    lp = build().lower()
    ref = reference(lp, xa)
    med = statistics.median
    return {
        "f": res.objective,
        "f_abess": ref,
        "ok": at_most(res.objective, ref),
        "lean": res.extra.get("kernel") == "compiled",
        "first": med(t_first),
        "solve": med(t_solve),
        "rebind": med(t_rebind),
        "abess": med(t_ab),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per case (medians)")
    ap.add_argument("--families", default=",".join(FAMILIES + ["section61"]))
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: the process's CPU time (one thread each, so preemption on a loaded machine does not count)",
    )
    ap.add_argument("--classes", type=int, default=3, help="the multinomial family's classes (default 3)")
    a = ap.parse_args()
    CLOCK[0] = time.process_time if a.clock == "cpu" else time.perf_counter
    CLASSES[0] = a.classes
    rows: list[dict[str, Any]] = []
    with pinned(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fam in a.families.split(","):
            sizes = [(175, 500, 50), (250, 500, 50)] if fam == "section61" else SIZES
            for n, p, k in sizes:
                got = []
                for seed in range(a.seeds):
                    if fam == "section61":
                        build, fit, _ = linreg61(n, seed)
                        nxt = linreg61(n, seed + 1000)[2]
                    else:
                        build, fit, _ = glm(fam, n, p, k, seed)
                        nxt = glm(fam, n, p, k, seed + 1000)[2]
                    if not got:  # warm up: imports, first calls
                        run_case(build, fit, {}, nxt, 1)
                    r = run_case(build, fit, {}, nxt, a.repeat)
                    r.update(family=fam, n=n, p=p, k=k, seed=seed)
                    got.append(r)
                    rows.append(r)
                med = statistics.median
                ab = med(r["abess"] for r in got)
                print(
                    f"{fam:12s} n={n:4d} p={p:4d} k={k:3d}  abess {1e3 * ab:7.3f} ms | auto: solve {1e3 * med(r['solve'] for r in got):7.3f} "
                    f"({med(r['solve'] / r['abess'] for r in got):5.2f}x)  first {1e3 * med(r['first'] for r in got):7.3f} "
                    f"({med(r['first'] / r['abess'] for r in got):5.2f}x)  rebind+solve {1e3 * med(r['rebind'] for r in got):7.3f} "
                    f"({med(r['rebind'] / r['abess'] for r in got):5.2f}x) | f <= abess {sum(r['ok'] for r in got)}/{len(got)}"
                    f"  lean {sum(r['lean'] for r in got)}/{len(got)}",
                    flush=True,
                )
    ok = sum(r["ok"] for r in rows)
    print(f"\nobjective at most abess's: {ok}/{len(rows)} ({100 * ok / len(rows):.1f} %; target >= 95 %)")
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["family"], r["n"], r["p"]), []).append(r)
    for key in ("solve", "first", "rebind"):
        worst = max((statistics.median(r[key] / r["abess"] for r in g), k_) for k_, g in groups.items())
        verdict = "holds" if worst[0] <= 1.0 else "fails"
        print(
            f"median time ratio ({key}) at most 1 on every family and size: worst {worst[1]} {worst[0]:.2f} ({verdict})"
        )


if __name__ == "__main__":
    main()
