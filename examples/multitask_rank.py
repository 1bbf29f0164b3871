"""Multi-task regression with rank(W) <= 5, with the Python builder: the same problem as
multitask_rank.sm. GraHTP reaches the exact reduced-rank regression optimum (closed form, printed
beside it); the nuclear-norm relaxation tuned to rank 5 is the convex baseline; then a sweep over
the rank.

    python examples/multitask_rank.py
"""

from pathlib import Path

import numpy as np

import sparsemodel as sm

here = Path(__file__).parent
data = np.load(here / "data" / "multitask.npz")
X, Y, W_true = data["X"], data["Y"], data["W"]
n, p = X.shape
m = Y.shape[1]

W = sm.Variable((p, m), name="W")
Xd = sm.Data(X, name="X", names=(None, data["X_names"]))  # W's rows: X's columns
Yd = sm.Data(Y, name="Y", names=(None, data["Y_names"]))  # W's columns: the responses
prob = sm.Problem(sm.minimize(sm.sum_squares(Xd @ W - Yd) / (2 * n)), [sm.rank(W) <= 5])


def err(A: np.ndarray) -> float:
    return float(np.linalg.norm(A - W_true) / np.linalg.norm(W_true))


# reduced-rank regression: the global optimum of this problem, in closed form
W_ols = np.linalg.lstsq(X, Y, rcond=None)[0]
Vt = np.linalg.svd(X @ W_ols, full_matrices=False)[2][:5]
W_rrr = W_ols @ Vt.T @ Vt
print(f"closed form (reduced-rank regression): objective {np.sum((X @ W_rrr - Y) ** 2) / (2 * n):.10f}")

for solver in ("grahtp", "iht", "nuclear"):
    res = prob.solve(solver)
    print(
        f"{solver:8s} objective {res.objective:.10f}  rank {res.extra['rank']}  relative error {err(res.x):.4f}  "
        f"{res.iterations} iterations  {1e3 * res.time_s:.1f} ms"
    )
nuc = prob.solve("nuclear")
print(
    f"nuclear before the refit: objective {nuc.extra['nuclear_objective']:.6f} (lambda {nuc.extra['lambda']:.4g}): "
    "the relaxation shrinks every singular value"
)

# the text front end builds the same problem; a rank result prints its rank and singular values
same = sm.load(str(here / "multitask_rank.sm")).solve()
print(f"from the model file: objective {same.objective:.10f}\n")
print(same.summary())
rows = np.linalg.norm(same.x, axis=1)  # the features that load most on the rank-5 coefficients, by name
names = same.axis_names()[0]
print("largest rows of W:", ", ".join(f"{names[i]} {rows[i]:.2f}" for i in np.argsort(-rows)[:8]), "\n")

print(prob.compare(["grahtp", "nuclear"], k=range(1, 9), progress=False).table())
