"""The recognised non-convex form (sparsemodel/model/forms.py): sparse PCA is accepted in each of
its spellings, and everything near it is refused with the reason, at the line."""

from __future__ import annotations

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.datasets import spiked_covariance
from sparsemodel.errors import ModelError
from sparsemodel.model.forms import sparse_pca

X, _ = spiked_covariance(100, p=12, sizes=(4, 3), seed=1)
HEAD = "data X : matrix\nvar w[cols(X)]\n"


def parse(body: str):
    return sm.parse(HEAD + body, data={"X": X}, name="m.sm")


def refused(body: str) -> ModelError:
    prob = parse(body)
    e = prob.convexity_error()
    assert e is not None, body
    with pytest.raises(ModelError):
        prob.solve()
    return e


@pytest.mark.parametrize(
    "objective,ball",
    [
        ("quad_form(w, cov(X))", "norm(w) <= 1"),
        ("quad_form(w, cov(X))", "sum_squares(w) <= 1"),
        ("quad_form(w, cov(X))", "norm(w) == 1"),
        ("sum_squares(center(X) @ w) / rows(X)", "norm(w) <= 1"),
        ("2 * quad_form(w, cov(X))", "1 >= norm(w)"),
    ],
)
def test_every_spelling_is_the_same_form(objective, ball):
    prob = parse(f"maximize {objective}\nsubject to\n    {ball}\n    nnz(w) <= 4\n")
    form = sparse_pca(prob.objective, prob.constraints)
    assert form is not None and prob.convexity_error() is None
    scale = 2.0 if objective.startswith("2") else 1.0
    assert np.allclose(form.S, scale * np.cov(X, rowvar=False, bias=True))
    assert form.radius == 1.0 and form.nnz.k == 4


def test_the_radius_is_read_from_either_ball():
    prob = parse("maximize quad_form(w, cov(X))\nsubject to\n    sum_squares(w) <= 4\n    nnz(w) <= 3\n")
    assert sparse_pca(prob.objective, prob.constraints).radius == 2.0
    r = prob.solve()
    assert np.isclose(np.linalg.norm(r.x), 2.0)


def test_a_maximized_quadratic_without_a_ball_is_refused_at_the_objective():
    e = refused("maximize quad_form(w, cov(X))\nsubject to\n    nnz(w) <= 4\n")
    assert e.span.line == 3 and "norm(w) <= 1" in e.hint and "no maximum" in e.message


def test_without_a_bound_it_asks_for_nnz():
    e = refused("maximize quad_form(w, cov(X))\nsubject to\n    norm(w) <= 1\n")
    assert e.span.line == 3 and "nnz(w) <= k" in e.hint


def test_another_constraint_is_refused_at_its_line():
    e = refused("maximize quad_form(w, cov(X))\nsubject to\n    norm(w) <= 1\n    nnz(w) <= 4\n    w >= 0\n")
    assert e.span.line == 7 and "sparse PCA form takes" in e.message


def test_a_ball_outside_the_form_is_refused_at_its_line():
    e = refused("minimize sum_squares(X @ w - 1)\nsubject to\n    norm(w) <= 1\n    nnz(w) <= 4\n")
    assert e.span.line == 5 and "accepted only in the sparse PCA form" in e.message


def test_an_indefinite_matrix_is_refused():
    prob = sm.parse(
        HEAD + "data P : matrix\nmaximize quad_form(w, P)\nsubject to\n    norm(w) <= 1\n    nnz(w) <= 4\n",
        data={"X": X, "P": np.diag(np.r_[1.0, -1.0, np.ones(10)])},
    )
    e = prob.convexity_error()
    assert e is not None and "not positive semidefinite" in e.message and e.span.line == 4


def test_other_non_convex_models_keep_the_convexity_refusal_naming_the_form():
    e = refused("maximize sum(exp(w))\nsubject to\n    nnz(w) <= 4\n")
    assert "concave" in e.message and "sparse PCA" in e.hint


def test_a_lower_bound_on_the_norm_is_refused():
    with pytest.raises(ModelError, match="from below") as e:
        parse("maximize quad_form(w, cov(X))\nsubject to\n    norm(w) >= 1\n    nnz(w) <= 4\n")
    assert e.value.span.line == 5


def test_norm_of_a_matrix_is_refused():
    with pytest.raises(ModelError, match="vector variable"):
        sm.norm(sm.Variable((3, 3), name="W"))
