"""Sparse linear regression with the Python builder: the same problem as sparse_linreg.sm.

python examples/sparse_linreg.py
"""

from pathlib import Path

import numpy as np

import sparsemodel as sm

here = Path(__file__).parent
data = np.load(here / "data" / "linreg.npz")
X, v, w_true, names = data["X"], data["v"], data["w"], data["X_names"]
n, p = X.shape

w = sm.Variable(p, name="w")
A = sm.Data(X, name="X", names=(None, names))  # named columns: results name their supports
prob = sm.Problem(sm.minimize(sm.sum_squares(A @ w - v) / (2 * n)), [sm.nnz(w) <= 50])

res = prob.solve()  # auto, the default
truth = set(names[np.flatnonzero(w_true)])
print(res.summary(max_support=12))
print(f"\ntrue support found: {len(truth & set(res.support_names))}/50")
print("the ten largest coefficients:", ", ".join(
    f"{r['name']} {r['value']:.2f}" for r in sorted(res.coefficients(), key=lambda r: -abs(r["value"]))[:10]
))  # fmt: skip

for solver in ("grahtp", "fgrahtp"):  # named solvers, for comparison
    r = prob.solve(solver)
    found = len(truth & set(r.support_names))
    print(
        f"{solver:8s} objective {r.objective:.6f}  true support found {found}/50  "
        f"{r.iterations} iterations  {1e3 * r.time_s:.1f} ms"
    )

# the text front end builds the same problem: the same objective and support
same = sm.load(str(here / "sparse_linreg.sm")).solve()
print(f"from the model file: objective {same.objective:.6f}, same support: {same.support_names == res.support_names}")
