"""Write the generated data used by the example model files (seed 0).

python examples/make_data.py
    examples/data/linreg.npz      sparse_linreg.sm (paper 000, Section 6.1 design): X, v, the true w
    examples/data/multitask.npz   multitask_rank.sm (rank-5 multi-task regression): X, Y, the true W
    examples/data/graph.npz       precision.sm (paper 000, Section 6.3.1: p = 30, n = 200): Z, the true O
    examples/data/spca.npz        sparse_pca.sm (a spiked covariance: two sparse directions, p = 50): X, V
    examples/data/returns.csv     portfolio.sm: 250 days of returns of 50 assets from a 3-factor model
    examples/data/rpca.npz        robust_pca.sm (abess's robust PCA test problem, its seed 2): X, the true L and S

Each archive names the columns of its data (``X_names``, ``Y_names``, ``Z_names``: x0, x1, ...,
the convention of scikit-learn for unnamed features), so that results print supports by name.
"""

from pathlib import Path

import numpy as np

from sparsemodel.datasets import (
    factor_returns,
    low_rank_plus_sparse,
    low_rank_regression,
    sparse_linear_regression,
    sparse_precision,
    spiked_covariance,
)


def names(prefix: str, n: int) -> np.ndarray:
    return np.array([f"{prefix}{j}" for j in range(n)])


out = Path(__file__).parent / "data"
out.mkdir(exist_ok=True)
X, v, w = sparse_linear_regression(250, p=500, k=50, seed=0)
np.savez(out / "linreg.npz", X=X, X_names=names("x", X.shape[1]), v=v, w=w)
print(f"wrote {out}/linreg.npz: X {X.shape}, v {v.shape}, the true w ({np.count_nonzero(w)} nonzeros)")
X, Y, W = low_rank_regression(500, p=100, m=30, r=5, seed=0)
np.savez(out / "multitask.npz", X=X, X_names=names("x", X.shape[1]), Y=Y, Y_names=names("y", Y.shape[1]), W=W)
print(f"wrote {out}/multitask.npz: X {X.shape}, Y {Y.shape}, the true W (rank 5)")
Z, O = sparse_precision(30, n=200, seed=0)
np.savez(out / "graph.npz", Z=Z, Z_names=names("v", Z.shape[1]), O=O)
print(f"wrote {out}/graph.npz: Z {Z.shape}, the true precision matrix O ({np.count_nonzero(np.triu(O, 1))} edges)")
Xs, V = spiked_covariance(300, p=50, seed=0)
np.savez(out / "spca.npz", X=Xs, X_names=names("x", Xs.shape[1]), V=V)
print(f"wrote {out}/spca.npz: X {Xs.shape}, the true sparse directions V ({V.shape[1]} of them)")
R, assets = factor_returns(250, p=50, factors=3, seed=0)
np.savetxt(out / "returns.csv", R, delimiter=",", header=",".join(assets), comments="", fmt="%.6f")
print(f"wrote {out}/returns.csv: {R.shape[0]} days of returns of {R.shape[1]} assets (a 3-factor model)")
X, L, S = low_rank_plus_sparse()
np.savez(out / "rpca.npz", X=X, L=L, S=S)
print(f"wrote {out}/rpca.npz: X {X.shape} = L (rank 5) + S ({np.count_nonzero(S)} outliers)")
