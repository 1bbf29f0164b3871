"""Data files: formats, header detection, column picks, recoding, and the validation messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import sparsemodel as sm
from sparsemodel.datasets import caravan_path
from sparsemodel.errors import DataError
from sparsemodel.io import parse_spec, read_data, read_libsvm, validate

CARAVAN = Path(caravan_path())  # the bundled copy of the shared data set


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- CSV


def test_csv_with_header_and_column_pick(tmp_path):
    write(tmp_path / "t.csv", "a,b,c\n1,2,3\n4,5,6\n")
    X = read_data("t.csv", "matrix", base_dir=tmp_path)
    np.testing.assert_array_equal(X, [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(read_data("t.csv:b", "vector", base_dir=tmp_path), [2, 5])
    np.testing.assert_array_equal(read_data("t.csv:2", "vector", base_dir=tmp_path), [3, 6])
    np.testing.assert_array_equal(read_data("t.csv", "matrix", base_dir=tmp_path, exclude=["b"]), [[1, 3], [4, 6]])


def test_csv_without_header_keeps_first_row(tmp_path):
    write(tmp_path / "t.csv", "1.5,2\n3,4e-1\n")
    np.testing.assert_array_equal(read_data("t.csv", "matrix", base_dir=tmp_path), [[1.5, 2], [3, 0.4]])
    np.testing.assert_array_equal(read_data("t.csv:1", "vector", base_dir=tmp_path), [2, 0.4])


def test_csv_quoted_single_column_header_semicolons_and_whitespace(tmp_path):
    write(tmp_path / "y.csv", '"x"\n2\n4\n1\n')
    np.testing.assert_array_equal(read_data("y.csv", "vector", base_dir=tmp_path), [2, 4, 1])
    write(tmp_path / "s.csv", "p;q\n1;2\n3;4\n")
    np.testing.assert_array_equal(read_data("s.csv:q", "vector", base_dir=tmp_path), [2, 4])
    write(tmp_path / "w.txt", "1 2  3\n\n4 5 6\n")
    assert read_data("w.txt", "matrix", base_dir=tmp_path).shape == (2, 3)


def test_csv_unknown_column_suggests_the_closest(tmp_path):
    write(tmp_path / "t.csv", "alpha,beta\n1,2\n")
    with pytest.raises(DataError) as e:
        read_data("t.csv:betta", "vector", base_dir=tmp_path, name="y")
    assert "betta" in e.value.message and "did you mean 'beta'" in e.value.hint


def test_csv_text_column_needs_except_or_map(tmp_path):
    write(tmp_path / "c.csv", "f1,f2,Purchase\n1,2,No\n3,4,Yes\n5,6,No\n")
    with pytest.raises(DataError) as e:
        read_data("c.csv", "matrix", base_dir=tmp_path, name="X")
    msg = e.value.message
    assert "column 'Purchase'" in msg and "3 cell(s)" in msg and "line 2" in msg
    assert 'except "Purchase"' in e.value.hint and 'map {"No": -1, "Yes": 1}' in e.value.hint
    X = read_data("c.csv", "matrix", base_dir=tmp_path, exclude=["Purchase"])
    np.testing.assert_array_equal(X, [[1, 2], [3, 4], [5, 6]])
    y = read_data("c.csv:Purchase", "labels", base_dir=tmp_path, mapping={"Yes": 1, "No": -1})
    np.testing.assert_array_equal(y, [-1, 1, -1])


def test_csv_ragged_rows_are_refused(tmp_path):
    write(tmp_path / "r.csv", "a,b\n1,2\n3\n")
    with pytest.raises(DataError, match="line 3 .* has 1 fields"):
        read_data("r.csv", "matrix", base_dir=tmp_path)


def test_caravan_like_yes_no_mapping_in_a_model(tmp_path):
    rng = np.random.default_rng(0)
    F = rng.integers(0, 5, size=(60, 4))
    lab = np.where(rng.random(60) < 0.3, "Yes", "No")
    lines = ["MOSTYPE,MAANTHUI,MGEMOMV,MGEMLEEF,Purchase"]
    lines += [",".join(map(str, row)) + f",{lab[i]}" for i, row in enumerate(F)]
    write(tmp_path / "Caravan.csv", "\n".join(lines) + "\n")
    write(
        tmp_path / "caravan.sm",
        'data X : matrix from "Caravan.csv" except "Purchase"\n'
        'data y : labels from "Caravan.csv:Purchase" map {"Yes": 1, "No": -1}\n'
        "var w[cols(X) + 1]\n"
        "minimize mean(logistic(-y * (X @ w[1:] + w[0])))\n"
        "subject to\n    nnz(w[1:]) <= 2\n",
    )
    prob = sm.load(tmp_path / "caravan.sm")
    np.testing.assert_array_equal(prob.symbols["X"].value, F)
    np.testing.assert_array_equal(prob.symbols["y"].value, np.where(lab == "Yes", 1.0, -1.0))
    assert prob.variables[0].shape == (5,)
    assert prob.check().ok


def test_real_caravan_header_and_purchase_column():
    X = read_data(CARAVAN, "matrix", exclude=["Purchase"])
    y = read_data(f"{CARAVAN}:Purchase", "labels", mapping={"Yes": 1, "No": -1})
    assert X.shape == (5822, 85) and y.shape == (5822,)
    assert set(np.unique(y)) == {-1.0, 1.0} and int((y == 1).sum()) == 348


# ----------------------------------------------------------------------------- NumPy, Matrix Market, libsvm


def test_npy_npz_keys_and_sparse_npz(tmp_path):
    A = np.arange(6.0).reshape(2, 3)
    np.save(tmp_path / "A.npy", A)
    np.savez(tmp_path / "D.npz", A=A, b=np.array([1.0, 2.0]))
    np.savez(tmp_path / "one.npz", only=A)
    sp.save_npz(tmp_path / "S.npz", sp.csr_matrix(A))
    np.testing.assert_array_equal(read_data("A.npy", base_dir=tmp_path), A)
    np.testing.assert_array_equal(read_data("D.npz:A", base_dir=tmp_path), A)
    np.testing.assert_array_equal(read_data("D.npz:b", "vector", base_dir=tmp_path), [1, 2])
    np.testing.assert_array_equal(read_data("one.npz", base_dir=tmp_path), A)
    S = read_data("S.npz", base_dir=tmp_path)
    assert sp.issparse(S) and S.format == "csr"
    np.testing.assert_array_equal(S.toarray(), A)
    with pytest.raises(DataError) as e:
        read_data("D.npz", base_dir=tmp_path)
    assert "several arrays (A, b)" in e.value.message and "D.npz:A" in e.value.hint
    with pytest.raises(DataError) as e:
        read_data("D.npz:B", base_dir=tmp_path)
    assert "no array named 'B'" in e.value.message and "did you mean" in e.value.hint


def test_mtx_loads_as_sparse_csr(tmp_path):
    M = sp.random(30, 12, density=0.2, random_state=1, format="coo")
    scipy.io.mmwrite(str(tmp_path / "M.mtx"), M)
    S = read_data("M.mtx", base_dir=tmp_path)
    assert sp.issparse(S) and S.format == "csr" and S.shape == (30, 12)
    np.testing.assert_allclose(S.toarray(), M.toarray())


def test_libsvm_labels_and_features(tmp_path):
    write(tmp_path / "d.svm", "# header comment\n+1 1:0.5 3:2\n-1 2:1.5 # trailing\n1 qid:7 4:-1\n")
    y, X = read_libsvm(tmp_path / "d.svm")
    np.testing.assert_array_equal(y, [1, -1, 1])
    np.testing.assert_array_equal(X.toarray(), [[0.5, 0, 2, 0], [0, 1.5, 0, 0], [0, 0, 0, -1]])
    assert sp.issparse(read_data("d.svm", "matrix", base_dir=tmp_path))
    write(tmp_path / "d.data", (tmp_path / "d.svm").read_text())
    np.testing.assert_array_equal(read_data("libsvm:d.data", "labels", base_dir=tmp_path), [1, -1, 1])
    assert parse_spec("libsvm:d.data").fmt == "libsvm"


def test_libsvm_errors_name_the_line(tmp_path):
    write(tmp_path / "bad.svm", "1 1:2\n-1 0:3\n")
    with pytest.raises(DataError, match="line 2 .* '0:3'"):
        read_data("bad.svm", "matrix", base_dir=tmp_path)
    write(tmp_path / "bad2.svm", "yes 1:2\n")
    with pytest.raises(DataError, match="label 'yes' is not a number"):
        read_data("bad2.svm", "vector", base_dir=tmp_path)


def test_libsvm_zero_one_labels_need_a_map(tmp_path):
    write(tmp_path / "z.svm", "0 1:1\n1 2:1\n0 1:2\n")
    with pytest.raises(DataError) as e:
        read_data("z.svm", "labels", base_dir=tmp_path, name="y")
    assert "{0, 1}" in e.value.message and "map {0: -1, 1: 1}" in e.value.hint
    y = read_data("z.svm", "labels", base_dir=tmp_path, mapping={0: -1, 1: 1})
    np.testing.assert_array_equal(y, [-1, 1, -1])


# ----------------------------------------------------------------------------- validation


def test_missing_file_names_the_file_and_the_place(tmp_path):
    with pytest.raises(DataError) as e:
        read_data("nope.csv", base_dir=tmp_path, name="X")
    assert '"nope.csv" does not exist' in e.value.message and str(tmp_path) in e.value.message
    (tmp_path / "sub.csv").mkdir()
    with pytest.raises(DataError, match="is not a file"):
        read_data("sub.csv", base_dir=tmp_path)
    with pytest.raises(DataError, match="cannot tell the format"):
        read_data("data.xlsx", base_dir=tmp_path)


def test_unreadable_npy_is_a_data_error(tmp_path):
    write(tmp_path / "junk.npy", "this is not a numpy file")
    with pytest.raises(DataError, match="cannot read"):
        read_data("junk.npy", base_dir=tmp_path)
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(DataError, match='cannot read "junk.npz" as npz'):
        read_data("junk.npz", base_dir=tmp_path)
    (tmp_path / "bin.csv").write_bytes(b"\x00\xff\xfe,1\n")
    with pytest.raises(DataError, match='cannot read "bin.csv"'):
        read_data("bin.csv", base_dir=tmp_path)


def test_nan_and_inf_are_counted_with_the_first_position(tmp_path):
    write(tmp_path / "n.csv", "a,b\n1,2\n3,\nNaN,inf\n")
    with pytest.raises(DataError) as e:
        read_data("n.csv", "matrix", base_dir=tmp_path, name="X")
    msg = e.value.message
    assert '"n.csv"' in msg and "2 NaN/missing values" in msg and "1 infinite value" in msg
    assert "[1, 1]" in msg and "line 3" in msg
    S = sp.csr_matrix(np.array([[0.0, np.nan], [1.0, 0.0]]))
    with pytest.raises(DataError, match=r"1 NaN/missing value; first at index \[0, 1\]"):
        validate(S, "matrix", name="S")


def test_wrong_kind_messages():
    with pytest.raises(DataError, match=r"declared as a matrix, but the value holds an array of shape \(4,\)"):
        validate(np.ones(4), "matrix")
    with pytest.raises(DataError, match=r"declared as a vector, but .* shape \(3,4\)"):
        validate(np.ones((3, 4)), "vector")
    with pytest.raises(DataError, match="declared as a scalar"):
        validate(np.ones(2), "scalar")
    assert validate(np.ones((5, 1)), "vector").shape == (5,)
    assert validate(np.array([[2.5]]), "scalar").shape == ()


def test_labels_must_be_plus_minus_one():
    assert validate(np.array([1, -1, 1]), "labels").shape == (3,)
    with pytest.raises(DataError) as e:
        validate(np.array([1, 2, 2, 1]), "labels", name="y")
    assert "{1, 2}" in e.value.message and "map {1: -1, 2: 1}" in e.value.hint
    with pytest.raises(DataError, match="4 distinct values"):
        validate(np.array([1, 2, 3, 4]), "labels")


def test_number_map_on_numeric_files(tmp_path):
    np.save(tmp_path / "y.npy", np.array([0.0, 1.0, 1.0]))
    np.testing.assert_array_equal(
        read_data("y.npy", "labels", base_dir=tmp_path, mapping={0: -1, 1: 1}),
        [-1, 1, 1],
    )
    with pytest.raises(DataError, match="text keys"):
        read_data("y.npy", "vector", base_dir=tmp_path, mapping={"Yes": 1})
