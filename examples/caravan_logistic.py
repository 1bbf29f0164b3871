"""Sparse logistic regression with an intercept on Caravan, with the Python builder: the same
problem as caravan_logistic.sm, then a small sweep over k comparing solvers.

    python examples/caravan_logistic.py
"""

import sparsemodel as sm
from sparsemodel.datasets import caravan

X, y, names = caravan()
Z = sm.standardize(sm.Data(X, name="X", names=(None, names)))  # ddof = 0, the column names kept
n, p = X.shape

w = sm.Variable(p + 1, name="w")
loss = sm.mean(sm.logistic(-y * (Z @ w[1:] + w[0]))) + 1e-5 / 2 * sm.sum_squares(w[1:])
prob = sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= 10])

res = prob.solve()  # auto, the default
print(res.summary())  # the selected features by name, the intercept in the coefficient table
print("selected features:", res.support_names)
print(f"intercept {res.x[0]:.4f} (free: never thresholded)")

table = prob.compare(["grahtp", "omp", "ompr", "els", "lasso"], k=range(2, 21, 6), progress=False)
print(table.table())
