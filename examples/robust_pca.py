"""Robust PCA with the Python builder: X = L + S, rank(L) <= 5 and nnz(S) <= 30, on abess's own test
problem (the same problem as robust_pca.sm). Every solver that works through the set protocol
solves the two bounds jointly: the gradient step moves L and S together, L is projected by the
truncated SVD and S by hard thresholding, and GraHTP refits both on the column space of L and the
support of S. Printed: how much of the truth each recovers, then the same problem from the model
file, and the bounds given by name.

    python examples/robust_pca.py
"""

from pathlib import Path

import numpy as np

import sparsemodel as sm

here = Path(__file__).parent
data = np.load(here / "data" / "rpca.npz")
X, L_true, S_true = data["X"], data["L"], data["S"]
n, p = X.shape

L = sm.Variable((n, p), name="L")
S = sm.Variable((n, p), name="S")
prob = sm.Problem(sm.minimize(sm.sum_squares(X - L - S) / 2), [sm.rank(L) <= 5, sm.nnz(S) <= 30])


def recovery(res: sm.Result) -> str:
    Lh, Sh = res.values["L"], res.values["S"]
    found = len(set(np.flatnonzero(Sh)) & set(np.flatnonzero(S_true)))
    rank = res.blocks["L"]["rank"]
    err = np.linalg.norm(Lh - L_true) / np.linalg.norm(L_true)
    return f"outliers found {found}/30, rank(L) {rank}, |L - L0|/|L0| {err:.1e}"


for solver in ("auto", "grahtp", "iht", "fgrahtp"):
    res = prob.solve(solver)
    print(
        f"{solver:8s} {recovery(res)}  objective {res.objective:.3g}  {res.iterations} iterations  {res.time_s:.3f} s"
    )

same = sm.load(str(here / "robust_pca.sm")).solve()
print(f"\nfrom the model file: {recovery(same)}\n")
print(same.summary(max_support=8))

# several bounds are given by name (a name left out keeps its bound); one number alone is refused
fewer = prob.solve("iht", k={"S": 20})
print(f"\nk={{'S': 20}}: {fewer.k_text}, objective {fewer.objective:.4g}")
try:
    prob.solve(k=20)
except sm.ModelError as e:
    print(f"k=20: {e.message}")
