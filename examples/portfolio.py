"""A long-only minimum-variance portfolio of at most k assets with the Python builder: the same
problem as portfolio.sm, and the best support by enumeration on a small universe.

python examples/portfolio.py
"""

import itertools
from pathlib import Path

import numpy as np

import sparsemodel as sm

here = Path(__file__).parent
R = np.loadtxt(here / "data" / "returns.csv", delimiter=",", skiprows=1)
assets = np.loadtxt(here / "data" / "returns.csv", delimiter=",", max_rows=1, dtype=str)
n, p = R.shape
S = sm.Data(np.cov(R.T, bias=True), name="S", names=(assets, assets))  # cov(R) of the model file

w = sm.Variable(p, name="w")
prob = sm.Problem(sm.minimize(sm.quad_form(w, S)), [sm.nnz(w) <= 10, sm.sum(w) == 1, w >= 0])
res = prob.solve()  # the default, auto: GraHTP, then exact swaps under the constraints
print(res.summary())
print(f"daily volatility {np.sqrt(res.objective):.4%}; weights sum to {res.x.sum():.6f}, smallest {res.x.min():.3g}")

same = sm.load(str(here / "portfolio.sm")).solve()
print(f"from the model file: variance {same.objective:.6e}, same assets: {same.support_names == res.support_names}")

# a universe of 16 assets small enough to enumerate: every support of 4, one QP each
small = np.arange(16)
v = sm.Variable(16, name="v")
sub = sm.Problem(
    sm.minimize(sm.quad_form(v, np.cov(R[:, small].T, bias=True))), [sm.nnz(v) <= 4, sm.sum(v) == 1, v >= 0]
)
lp = sub.lower()
best = min((lp.restricted_minimize(np.array(T)).f, T) for T in itertools.combinations(range(16), 4))
for solver in ("auto", "grahtp", "fgrahtp", "iht"):
    r = sub.solve(solver)
    print(
        f"{solver:8s} variance {r.objective:.6e} = {r.objective / best[0]:.4f} x the optimum; assets {r.support.tolist()}"
    )
print(f"optimum  variance {best[0]:.6e} on assets {list(best[1])} (1820 supports enumerated)")
