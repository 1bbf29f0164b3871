"""The escape hatch: a loss given as Python code (value and gradient, optionally a Hessian-vector
product) instead of the model language -- skscope's "no autodiff" objective (its test
``test_no_autodiff``: least squares on make_regression(100, 5, n_informative=2) with a hand-written
gradient and Hessian), here with a Huber-like twist no built-in atom has: the pseudo-Huber loss
sum(delta^2 (sqrt(1 + (r / delta)^2) - 1)), r = Y - X w, whose outlier-robust gradient the user
writes by hand.

It is a Python model module: it defines ``problem``, so the command line runs it as it runs a model
file (a model file cannot hold Python code):

    sparsemodel solve examples/custom_loss.py
    sparsemodel solve examples/custom_loss.py --solver iht
    sparsemodel compare examples/custom_loss.py --solvers auto,grahtp,iht,omp

and as a script it compares the solvers, with and without the Hessian-vector product:

    python examples/custom_loss.py
"""

import numpy as np

import sparsemodel as sm

rng = np.random.default_rng(1)
n, p, delta = 100, 5, 1.0
X = rng.standard_normal((n, p))
w_true = np.array([0.0, 2.0, 0.0, -1.5, 0.0])
Y = X @ w_true + 0.1 * rng.standard_normal(n)
Y[:5] += 20.0  # five gross outliers: least squares is pulled, pseudo-Huber is not


def pseudo_huber(w: np.ndarray) -> tuple[float, np.ndarray]:
    """(value, gradient) of sum delta^2 (sqrt(1 + (r/delta)^2) - 1), r = Y - X w."""
    r = Y - X @ w
    s = np.sqrt(1.0 + (r / delta) ** 2)
    return float(delta**2 * np.sum(s - 1.0)), -X.T @ (r / s)


def pseudo_huber_hvp(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The Hessian X' diag(s^-3) X applied to v."""
    r = Y - X @ w
    s = np.sqrt(1.0 + (r / delta) ** 2)
    return X.T @ ((X @ v) / s**3)


w = sm.Variable(p, name="w")
problem = sm.Problem(sm.minimize(sm.custom_loss(pseudo_huber, w, name="pseudo_huber")), [sm.nnz(w) <= 2])

if __name__ == "__main__":
    with_hvp = sm.Problem(
        sm.minimize(sm.custom_loss(pseudo_huber, w, hvp=pseudo_huber_hvp, name="pseudo_huber")), [sm.nnz(w) <= 2]
    )
    print("true support", np.flatnonzero(w_true).tolist(), "\n")
    for label, prob in (("value and gradient", problem), ("with the Hessian-vector product", with_hvp)):
        print(f"{label}: {prob.lower().structure}")
        for solver in ("auto", "grahtp", "iht", "omp", "ompr", "grasp"):
            r = prob.solve(solver)
            print(
                f"  {solver:7s} support {[int(i) for i in r.support]}  f = {r.objective:.6f}  ({r.time_s * 1e3:.1f} ms)"
            )
    ls = sm.Problem(sm.minimize(sm.sum_squares(Y - X @ w)), [sm.nnz(w) <= 2]).solve()
    print(
        f"\nleast squares on the same data (pulled by the outliers): support {[int(i) for i in ls.support]}, w = {ls.values['w'].round(2)}"
    )
    print(f"pseudo-Huber: w = {problem.solve().values['w'].round(2)}")
