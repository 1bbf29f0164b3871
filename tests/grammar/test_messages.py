"""Messages a new user meets: a did-you-mean for misspelled keywords at the
right line and column, the unused map key named, and --data rebinding that says which of the
model's reading clauses apply to the new file."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.cli import main
from sparsemodel.errors import DataError, DataWarning, ParseError

HEAD = "data X : matrix\nvar w[cols(X)]\nminimize sum_squares(X @ w)\n"
X = np.random.default_rng(0).standard_normal((20, 4))


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as e:
        sm.parse(text, data={"X": X}, name="m.sm")
    return e.value


@pytest.mark.parametrize(
    "text, line, col, word, want",
    [
        (HEAD + "subjet to\n    nnz(w) <= 2\n", 4, 1, "subjet", "subject"),
        (HEAD + "  subjet to nnz(w) <= 2\n", 4, 3, "subjet", "subject"),
        ("data X : matrix\nvar w[cols(X)]\nminimze sum_squares(X @ w)\n", 3, 1, "minimze", "minimize"),
        ("data X : matrix\nparm lam = 1\n", 2, 1, "parm", "param"),
        (HEAD + "subject too\n    nnz(w) <= 2\n", 4, 9, "too", "subject to"),
        (HEAD + "solve wiht grahtp\n", 4, 7, "wiht", "solve with"),
        ('data X : matrix form "X.csv"\n', 1, 17, "form", "from"),
    ],
)
def test_a_misspelled_keyword_gets_a_suggestion_at_its_place(text, line, col, word, want):
    err = parse_error(text)
    assert (err.span.line, err.span.column) == (line, col), err.render()
    assert err.span.text == word
    assert f"did you mean '{want}'" in err.hint
    assert err.render().startswith(f"m.sm:{line}:{col}: syntax error")


def test_correct_lines_are_not_mistaken_for_misspellings():
    """A constraint on a variable whose name is close to a keyword parses as before."""
    prob = sm.parse(
        "data X : matrix\nvar dat[cols(X)]\nminimize sum_squares(X @ dat)\nsubject to\n  dat >= 0\n", data={"X": X}
    )
    assert [c.kind for c in prob.constraints] == ["box"]


@pytest.fixture
def labels_csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    Z = rng.standard_normal((40, 3))
    y = np.where(Z[:, 0] > 0, "Yes", "No")
    rows = ["a,b,c,Purchase"] + [f"{r[0]:.4f},{r[1]:.4f},{r[2]:.4f},{lab}" for r, lab in zip(Z, y)]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    np.save(tmp_path / "labels.npy", np.where(y == "Yes", 1.0, -1.0))
    np.save(tmp_path / "Z.npy", Z)
    return tmp_path


def model(clause: str) -> str:
    return (
        'data X : matrix from "d.csv" except "Purchase"\n'
        f'data y : vector from "d.csv:Purchase" map {clause}\n'
        "var w[cols(X)]\nminimize mean(logistic(-y * (X @ w)))\nsubject to\n    nnz(w) <= 1\n"
    )


def test_the_unused_map_key_is_named_with_the_fix(labels_csv):
    (labels_csv / "m.sm").write_text(model('{"Yes": 1, "no": -1}'))
    with pytest.raises(DataError) as e:
        sm.load(labels_csv / "m.sm")
    hint = e.value.hint
    assert 'the map key "no" matches no cell' in hint and "did you mean 'No'?" in hint
    assert 'map {"Yes": 1, "No": -1}' in hint  # the value of the misspelled key is kept: no label 0
    assert (e.value.span.line, e.value.span.column) == (2, 22)


def test_a_missing_label_is_suggested_from_the_others(labels_csv):
    (labels_csv / "m.sm").write_text(model('{"Yes": 1}'))
    with pytest.raises(DataError) as e:
        sm.load(labels_csv / "m.sm")
    assert 'map {"Yes": 1, "No": -1}' in e.value.hint  # the other label of -1/+1, not 0


def test_an_unused_map_key_that_does_no_harm_is_a_warning(labels_csv):
    (labels_csv / "m.sm").write_text(model('{"Yes": 1, "No": -1, "Maybe": 0}'))
    with pytest.warns(DataWarning, match='map key "Maybe" matches no cell'):
        sm.load(labels_csv / "m.sm")


def test_data_rebinding_says_which_clauses_apply(capsys, labels_csv):
    (labels_csv / "m.sm").write_text(model('{"Yes": 1, "No": -1}'))
    base = sm.load(labels_csv / "m.sm")
    with pytest.warns(DataWarning, match=r"rebound to \".*labels.npy\": the model's map .* does not apply"):
        rebound = sm.load(labels_csv / "m.sm", data={"y": str(labels_csv / "labels.npy")})
    assert np.array_equal(rebound.data["y"].value, base.data["y"].value)  # the numbers as they are
    assert rebound.solve().support_names == base.solve().support_names == ["a"]
    code = main(["solve", str(labels_csv / "m.sm"), "--quiet", "--data", f"y={labels_csv / 'labels.npy'}"])
    out, err = capsys.readouterr()
    assert code == 0 and "selected    1: a" in out
    assert "warning: " in err and "map" in err and "does not apply to the numbers of a npy file" in err
    code = main(["solve", str(labels_csv / "m.sm"), "--quiet", "--data", f"X={labels_csv / 'Z.npy'}"])
    out, err = capsys.readouterr()
    assert code == 0 and 'except "Purchase" drops CSV columns and does not apply' in err


def test_a_rebound_csv_takes_the_models_clauses(labels_csv):
    """A CSV given with --data is read with the model's except and map, as the model's file is."""
    (labels_csv / "m.sm").write_text(model('{"Yes": 1, "No": -1}'))
    other = labels_csv / "other.csv"
    other.write_text((labels_csv / "d.csv").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # everything applies: nothing to warn about
        prob = sm.load(labels_csv / "m.sm", data={"X": str(other), "y": f"{other}:Purchase"})
    assert prob.data["X"].value.shape == (40, 3) and set(np.unique(prob.data["y"].value)) == {-1.0, 1.0}


# ----------------------------------------------------------------------------- reports as the user wrote them


def test_printing_a_check_report_prints_what_the_command_line_prints(capsys, tmp_path):
    np.save(tmp_path / "X.npy", X)
    path = tmp_path / "m.sm"
    path.write_text(
        'data X : matrix from "X.npy"\nparam k = 3\nparam lam = 1e-5\n'
        + HEAD.split("\n", 1)[1]
        + "subject to\n    nnz(w) <= k\n"
    )
    report = sm.load(path).check()
    assert str(report) == report.render() and not str(report).startswith("CheckReport(")
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.strip() == str(report)
    assert "param       k = 3\n" in out and "param       lam = 1e-05\n" in out  # not 3.0
    shown: list[str] = []  # what a notebook shows: IPython's pretty printer calls _repr_pretty_

    class Printer:
        def text(self, t: str) -> None:
            shown.append(t)

    report._repr_pretty_(Printer(), False)
    assert shown == [str(report)]


def test_zero_one_labels_negated_by_numpy_get_the_fix_for_the_users_vector():
    """-y * (X @ w) with y a NumPy array of 0/1 labels: NumPy negates y before the model sees it,
    so the data vector holds {-1, 0}; the fix recodes y (2 * (y > 0) - 1), not the negated vector
    (whose recoding, 2 * (y == 0) - 1, would flip every label)."""
    y = (X[:, 0] > 0).astype(float)
    w = sm.Variable(4, name="w")
    for scale in (1, 2):
        prob = sm.Problem(sm.minimize(sm.mean(sm.logistic(-scale * y * (X @ w)))), [sm.nnz(w) <= 2])
        (e,) = prob.check().errors
        assert f"the values {{-{scale}, 0}}, the negation of labels y in {{0, 1}}" in e.message
        assert "y = 2 * (y > 0) - 1" in e.hint and "y == 0" not in e.hint
        recoded = 2 * (y > 0) - 1
        assert sm.Problem(sm.minimize(sm.mean(sm.logistic(-recoded * (X @ w)))), [sm.nnz(w) <= 2]).check().ok
    plain = sm.Problem(sm.minimize(sm.mean(sm.logistic(y * (X @ w)))), [sm.nnz(w) <= 2])
    (e,) = plain.check().errors
    assert "{0, 1}" in e.message and "recode y as 2 * (y == 1) - 1" in e.hint and "data line" not in e.hint


@pytest.mark.parametrize(
    "bound, prelude, said",
    [
        ("4000", "", "the bound is 4000, but w has only 40 coordinates"),
        ("k", "param k = 4000\n", "the bound is k = 4000"),
    ],
)
def test_a_bound_above_the_size_repeats_the_bound_written(bound, prelude, said):
    text = f"{prelude}var w[40]\nminimize sum_squares(w - 1)\nsubject to\n    nnz(w) <= {bound}\n"
    with pytest.raises(sm.ModelError) as e:
        sm.parse(text, name="m.sm")
    assert said in e.value.message and "got k = 4000" in e.value.hint
