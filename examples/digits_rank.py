"""Multi-class classification by reduced-rank regression of one-hot labels: the 8 x 8 digits
bundled with scikit-learn (1797 images, 64 pixels, 10 classes), W (65 x 10, the last row an
unpenalized intercept) of rank r, predicted class = argmax of the fitted scores. Without
scikit-learn a synthetic stand-in of the same shape is used (10 Gaussian classes in 64 dimensions
whose means span 4 dimensions).

    python examples/digits_rank.py

Test accuracy against the rank shows how few directions separate the classes; the nuclear-norm
relaxation tuned to the same rank is the convex baseline.
"""

import numpy as np

import sparsemodel as sm

try:
    from sklearn.datasets import load_digits

    data = load_digits()
    X, labels, source, pixels = data.data, data.target, "scikit-learn digits", list(data.feature_names)
except ImportError:  # a synthetic stand-in of the same shape
    rng = np.random.default_rng(0)
    means = rng.standard_normal((10, 4)) @ rng.standard_normal((4, 64)) * 2
    labels = rng.integers(0, 10, 1797)
    X, source = means[labels] + rng.standard_normal((1797, 64)), "synthetic stand-in"
    pixels = [f"pixel_{i // 8}_{i % 8}" for i in range(64)]

rng = np.random.default_rng(0)
order = rng.permutation(len(labels))
train, test = order[:1200], order[1200:]
mu, sd = X[train].mean(axis=0), X[train].std(axis=0)
Z = (X - mu) / np.where(sd > 0, sd, 1.0)
Y = np.eye(10)[labels]

n, p = len(train), Z.shape[1]
W = sm.Variable((p, 10), name="W")
b = sm.Variable(10, name="b")  # per-class intercepts: free, never part of the rank
Ztr = sm.Data(Z[train], name="Z", names=(None, pixels))  # W's rows are pixels
Ytr = sm.Data(Y[train], name="Y", names=(None, [f"digit {d}" for d in range(10)]))  # its columns, digits
prob = sm.Problem(
    sm.minimize(sm.sum_squares(Ztr @ W + b - Ytr) / (2 * n) + 1e-3 / 2 * sm.sum_squares(W)),
    [sm.rank(W) <= 3],
)

print(f"{source}: {len(train)} training and {len(test)} test images, {p} pixels, 10 classes")
print(" r   grahtp test accuracy   nuclear test accuracy   grahtp objective   nuclear objective")
for r in range(1, 10):
    row = []
    for solver in ("grahtp", "nuclear"):
        res = prob.solve(solver, k=r)
        scores = Z[test] @ res.values["W"] + res.values["b"]
        row.append((np.mean(scores.argmax(axis=1) == labels[test]), res.objective))
    print(f"{r:2d}   {row[0][0]:20.3f}   {row[1][0]:21.3f}   {row[0][1]:16.6f}   {row[1][1]:17.6f}")

res = prob.solve("grahtp", k=3)
print()
print(res.summary())  # the rank and the singular values, not a support: W is dense
rows = np.linalg.norm(res.x, axis=1)
names = res.axis_names()[0]
print("pixels that weigh most at r = 3:", ", ".join(f"{names[i]} {rows[i]:.3f}" for i in np.argsort(-rows)[:8]))
