"""Write the generated data used by sparse_linreg.sm (paper 000, Section 6.1 design, seed 0).

python examples/make_data.py        # rewrites examples/data/linreg_{X,v,w}.npy
"""

from pathlib import Path

import numpy as np

from sparsemodel.datasets import sparse_linear_regression

out = Path(__file__).parent / "data"
out.mkdir(exist_ok=True)
X, v, w = sparse_linear_regression(250, p=500, k=50, seed=0)
np.save(out / "linreg_X.npy", X)
np.save(out / "linreg_v.npy", v)
np.save(out / "linreg_w.npy", w)
print(
    f"wrote {out}/linreg_X.npy {X.shape}, linreg_v.npy {v.shape}, linreg_w.npy (the true w, {np.count_nonzero(w)} nonzeros)"
)
