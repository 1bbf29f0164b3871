"""Paper 001, Section 5: HT-stable and HT-unstable stationary points of a 4 x 4 quadratic, s = 2.

f(x) = (1/m) ||A x - y||^2 with A (4 x 4) and y standard normal, minimized over 2-sparse x. Each
of the six 2-subsets S of the coordinates has one stationary point (the minimizer of f on S). With
the paper's step gamma = 1/L_s, L_s = (2/m) lambda_max(A'A), Definition 4 classifies each as
HT-stable (min |x_S| >= gamma * max |grad f| off S) or HT-unstable. IHT (x <- H_2(x - gamma grad f))
started near an unstable point leaves it (Theorem 2, Corollary 6); started near a stable one it
stays (Proposition 1). The paper perturbs the nonzero coordinates with N(0, 0.5^2) noise and runs
IHT for 400 steps from each start.

The paper's A and y were drawn by PyTorch with seed 45966, but its values are not in the copy we
have, and PyTorch 2.13 with that seed gives a different matrix (1/L_s = 0.48, where the paper has
0.06). We therefore draw A and y with NumPy, taking the first seed >= 45966 whose draw has the
structure the paper reports: four HT-unstable and two HT-stable points.

    python examples/ht_stationary_points.py [--runs 200] [--sigma 0.5] [--out ht_points.png]
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np

import sparsemodel as sm
from sparsemodel.solvers import get_solver
from sparsemodel.solvers.result import ht_certificate

M = 4  # samples = coordinates, as in the paper


def draw(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((M, M)), rng.standard_normal(M)


def stationary_points(A: np.ndarray, y: np.ndarray):
    """(lowered problem, gamma, [(support, x, certificate)]) for the six 2-sparse supports."""
    x = sm.Variable(M, name="x")
    lp = sm.Problem(sm.minimize(sm.sum_squares(A @ x - y) / M), [sm.nnz(x) <= 2]).lower()
    gamma = 1.0 / (2.0 / M * np.linalg.eigvalsh(A.T @ A)[-1])
    pts = []
    for S in itertools.combinations(range(M), 2):
        r = lp.restricted_minimize(np.array(S))
        pts.append((S, r.x, ht_certificate(lp, r.x, gamma)))
    return lp, gamma, pts


def find_seed(start: int = 45966) -> int:
    for seed in itertools.count(start):
        _, _, pts = stationary_points(*draw(seed))
        if sum(c["ht_stable"] for _, _, c in pts) == 2 and all(c["stationary"] for _, _, c in pts):
            return seed
    raise AssertionError("unreachable")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200, help="IHT runs started near each stationary point")
    ap.add_argument("--sigma", type=float, default=0.5, help="std of the perturbation of the nonzero coordinates")
    ap.add_argument("--steps", type=int, default=400, help="IHT iterations per run")
    ap.add_argument("--out", default="ht_stationary_points.png", help="PNG file to write (not overwritten)")
    args = ap.parse_args()

    seed = find_seed()
    A, y = draw(seed)
    lp, gamma, pts = stationary_points(A, y)
    print(f"A, y drawn with numpy seed {seed}; gamma = 1/L_s = {gamma:.4f}\n")
    print(
        " No.  support   x1        x2        x3        x4        g1        g2        g3        g4        f         verdict"
    )
    for i, (S, x, c) in enumerate(pts, 1):
        g = lp.grad(x)
        xs = " ".join(f"{v:9.4f}" for v in x)
        gs = " ".join(f"{v:9.4f}" for v in g)
        print(f" {i:>3}  {str(tuple(s + 1 for s in S)):8s} {xs} {gs} {lp.f(x):9.4f} {c['verdict']}")

    iht = get_solver("iht")
    rng = np.random.default_rng(0)
    supports = [S for S, _, _ in pts]
    starts, ends = [], []
    print(
        f"\nIHT from {args.runs} starts near each point (nonzeros + N(0, {args.sigma}^2)), {args.steps} steps, gamma = 1/L_s:"
    )
    for i, (S, x, c) in enumerate(pts, 1):
        landed = np.zeros(len(pts), dtype=int)
        for _ in range(args.runs):
            x0 = x.copy()
            x0[list(S)] += args.sigma * rng.standard_normal(2)
            r = iht(gamma=gamma, init=x0, max_iter=args.steps, tol=0.0, backtracking=False).solve(lp)
            end = tuple(int(j) for j in r.support)
            landed[supports.index(end)] += 1 if end in supports else 0
            starts.append(x0)
            ends.append(r.x)
        stayed = landed[i - 1]
        where = ", ".join(f"{landed[j]} at No. {j + 1}" for j in np.flatnonzero(landed))
        verb = "left it" if not c["ht_stable"] else "stayed"
        count = args.runs - stayed if not c["ht_stable"] else stayed
        print(f"  near No. {i} ({c['verdict']:>11}): {count}/{args.runs} {verb}; ended: {where}")
        if c["ht_stable"]:  # Proposition 1 is local: closer starts stay
            near = 0
            for _ in range(args.runs):
                x0 = x.copy()
                x0[list(S)] += args.sigma / 10 * rng.standard_normal(2)
                r = iht(gamma=gamma, init=x0, max_iter=args.steps, tol=0.0, backtracking=False).solve(lp)
                near += tuple(int(j) for j in r.support) == S
            print(f"  {'':>27}with N(0, {args.sigma / 10:g}^2) perturbations: {near}/{args.runs} stayed")

    out = Path(args.out)
    if out.exists():
        print(f"\n{out} exists; not overwriting it (choose another --out)")
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 8))
    starts_a, ends_a = np.array(starts), np.array(ends)
    for ax, (a, b) in zip(axes.ravel(), itertools.combinations(range(M), 2)):
        ax.scatter(starts_a[:, a], starts_a[:, b], s=3, c="0.8", label="IHT starts")
        for i, (_, x, c) in enumerate(pts, 1):
            stable = c["ht_stable"]
            ax.scatter(x[a], x[b], s=160, marker="o" if stable else "*", c="blue" if stable else "red", edgecolors="k")
            ax.annotate(str(i), (x[a], x[b]), textcoords="offset points", xytext=(7, 5), fontsize=8)
        ax.scatter(ends_a[:, a], ends_a[:, b], s=40, c="lime", marker="x", zorder=4, label="IHT after the last step")
        ax.set_xlabel(f"x{a + 1}")
        ax.set_ylabel(f"x{b + 1}")
    axes[0, 0].legend(loc="best", fontsize=8)
    fig.suptitle(
        "HT-stable (blue circles) and HT-unstable (red stars) stationary points; IHT runs (paper 001, Section 5)"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
