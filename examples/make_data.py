"""Write the generated data used by the example model files (seed 0).

python examples/make_data.py
    examples/data/linreg_{X,v,w}.npy      sparse_linreg.sm (paper 000, Section 6.1 design)
    examples/data/multitask_{X,Y,W}.npy   multitask_rank.sm (rank-5 multi-task regression)
    examples/data/graph_{Z,O}.npy         precision.sm (paper 000, Section 6.3.1: p = 30, n = 200)
"""

from pathlib import Path

import numpy as np

from sparsemodel.datasets import low_rank_regression, sparse_linear_regression, sparse_precision

out = Path(__file__).parent / "data"
out.mkdir(exist_ok=True)
X, v, w = sparse_linear_regression(250, p=500, k=50, seed=0)
np.save(out / "linreg_X.npy", X)
np.save(out / "linreg_v.npy", v)
np.save(out / "linreg_w.npy", w)
print(
    f"wrote {out}/linreg_X.npy {X.shape}, linreg_v.npy {v.shape}, linreg_w.npy (the true w, {np.count_nonzero(w)} nonzeros)"
)
X, Y, W = low_rank_regression(500, p=100, m=30, r=5, seed=0)
np.save(out / "multitask_X.npy", X)
np.save(out / "multitask_Y.npy", Y)
np.save(out / "multitask_W.npy", W)
print(f"wrote {out}/multitask_X.npy {X.shape}, multitask_Y.npy {Y.shape}, multitask_W.npy (the true W, rank 5)")
Z, O = sparse_precision(30, n=200, seed=0)
np.save(out / "graph_Z.npy", Z)
np.save(out / "graph_O.npy", O)
print(
    f"wrote {out}/graph_Z.npy {Z.shape}, graph_O.npy (the true precision matrix, {np.count_nonzero(np.triu(O, 1))} edges)"
)
