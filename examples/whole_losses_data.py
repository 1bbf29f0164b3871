"""Write the generated data of the survival and ordinal examples (seed 0).

python examples/whole_losses_data.py
    examples/data/survival.npz   cox_survival.sm: X (400 x 50), time, event (censored, with ties), the true w
    examples/data/ordinal.npz    ordinal.sm: X (300 x 30), y (4 ordered grades), the true w and cut-points

Survival: proportional hazards with a constant baseline hazard, T = E / exp(x'w) with E ~ Exp(1),
censored at C ~ Exp(mean 2), times rounded to 0.05 (so that some are tied, as in real follow-up
data); 6 nonzero coefficients. Ordinal: P(y <= j) = sigmoid(theta_j - x'w), theta = (-2, 0, 1.5),
5 nonzero coefficients (McCullagh's cumulative logit).
"""

from pathlib import Path

import numpy as np


def names(prefix: str, n: int) -> np.ndarray:
    return np.array([f"{prefix}{j}" for j in range(n)])


out = Path(__file__).parent / "data"
out.mkdir(exist_ok=True)
rng = np.random.default_rng(0)

n, p = 400, 50
X = rng.standard_normal((n, p))
w = np.zeros(p)
w[rng.choice(p, 6, replace=False)] = rng.choice([-1, 1], 6) * rng.uniform(0.5, 1.0, 6)
T = rng.exponential(1.0, n) / np.exp(X @ w)
C = rng.exponential(2.0, n)
time = np.maximum(np.round(np.minimum(T, C) / 0.05) * 0.05, 0.05)
event = (T <= C).astype(float)
np.savez(out / "survival.npz", X=X, X_names=names("x", p), time=time, event=event, w=w)
print(f"wrote {out}/survival.npz: X {X.shape}, {int(event.sum())} events, {n - len(np.unique(time))} tied times")

n, p = 300, 30
X = rng.standard_normal((n, p))
w = np.zeros(p)
w[rng.choice(p, 5, replace=False)] = rng.choice([-1, 1], 5) * rng.uniform(0.8, 1.5, 5)
theta = np.array([-2.0, 0.0, 1.5])
P = 1.0 / (1.0 + np.exp(-(theta[None, :] - (X @ w)[:, None])))
y = (rng.random(n)[:, None] > P).sum(axis=1).astype(float)
np.savez(out / "ordinal.npz", X=X, X_names=names("x", p), y=y, w=w, theta=theta)
print(f"wrote {out}/ordinal.npz: X {X.shape}, grades {np.bincount(y.astype(int)).tolist()}")
