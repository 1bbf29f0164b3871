"""Sparse logistic regression with an intercept on Caravan, with the Python builder: the same
problem as caravan_logistic.sm, then a small sweep over k comparing solvers.

    python examples/caravan_logistic.py
"""

import sparsemodel as sm
from sparsemodel.datasets import caravan

X, y, names = caravan()
Z = (X - X.mean(axis=0)) / X.std(axis=0)
n, p = Z.shape

w = sm.Variable(p + 1, name="w")
loss = sm.mean(sm.logistic(-y * (Z @ w[1:] + w[0]))) + 1e-5 / 2 * sm.sum_squares(w[1:])
prob = sm.Problem(sm.minimize(loss), [sm.nnz(w[1:]) <= 10])

res = prob.solve("grahtp")
print(res.summary())
print("selected features:", [names[i - 1] for i in res.support])
print(f"intercept {res.x[0]:.4f} (free: never thresholded)")

table = prob.compare(["grahtp", "omp", "ompr", "els", "lasso"], k=range(2, 21, 6), progress=False)
print(table.table())
