"""Sparse linear regression with the Python builder: the same problem as sparse_linreg.sm.

python examples/sparse_linreg.py
"""

from pathlib import Path

import numpy as np

import sparsemodel as sm

here = Path(__file__).parent
X = np.load(here / "data" / "linreg_X.npy")
v = np.load(here / "data" / "linreg_v.npy")
w_true = np.load(here / "data" / "linreg_w.npy")
n, p = X.shape

w = sm.Variable(p, name="w")
prob = sm.Problem(sm.minimize(sm.sum_squares(X @ w - v) / (2 * n)), [sm.nnz(w) <= 50])

for solver in ("grahtp", "fgrahtp"):
    res = prob.solve(solver)
    found = len(set(res.support) & set(np.flatnonzero(w_true)))
    print(
        f"{solver:8s} objective {res.objective:.6f}  true support found {found}/50  "
        f"{res.iterations} iterations  {1e3 * res.time_s:.1f} ms  {res.certificate['verdict']}"
    )

# the text front end builds the same problem: identical objective value
same = sm.load(str(here / "sparse_linreg.sm")).solve("grahtp")
print(
    f"from the model file: objective {same.objective:.6f}, same support: "
    f"{np.array_equal(same.support, prob.solve('grahtp').support)}"
)
