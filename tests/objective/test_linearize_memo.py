"""A subexpression two terms read (Poisson's and the softmax's z in exp(z) - y z) is linearized once
per design (objective/affine._linearize's memo): every term's map is its own object, with the values
and columns of the map linearized alone."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

import sparsemodel as sm
from sparsemodel.objective.affine import AffineMap, linearize


def dense(M):
    return M.toarray() if sp.issparse(M) else np.asarray(M)


def test_shared_subexpressions_give_the_maps_linearized_alone():
    rng = np.random.default_rng(0)
    n, p = 40, 6
    X, y = rng.standard_normal((n, p)), rng.poisson(1.0, n).astype(float)
    w = sm.Variable(p + 1, name="w")
    z = X @ w[1:] + w[0]
    lp = sm.Problem(sm.minimize(sm.sum(sm.exp(z) - y * z) + sm.sum(sm.exp(-z))), [sm.nnz(w[1:]) <= 3]).lower()
    maps = [m for m in lp.design.maps if isinstance(m, AffineMap)]
    assert len(maps) >= 3 and len({id(m) for m in maps}) == len(maps)
    x = rng.standard_normal(lp.n)
    cols = np.arange(lp.n)
    for rt, m in zip(lp.design.raw, lp.design.maps):
        alone = linearize(rt.affine, lp.layout)
        assert np.allclose(m.value(x), alone.value(x), rtol=0, atol=1e-12)
        assert np.array_equal(dense(m.columns(cols)), dense(alone.columns(cols)))
        assert m.zero_offset == alone.zero_offset
