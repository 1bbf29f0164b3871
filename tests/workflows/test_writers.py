"""The writers every report shares (workflows/report.py): a path's and a selection's CSV and JSON read
back to the rows they hold, every float to the last digit, a failed point's empty cells as empty, and
neither writes over an existing file without overwrite."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

import sparsemodel as sm
from sparsemodel.errors import OutputError


def problem():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 12))
    beta = np.zeros(12)
    beta[[1, 4, 7]] = [2.0, -1.5, 1.0]
    y = X @ beta + 0.3 * rng.standard_normal(60)
    w = sm.Variable(12, name="w")
    return sm.Problem(sm.minimize(sm.sum_squares(X @ w - y) / 120), [sm.nnz(w) <= 3])


def read_back(text: str):
    """A CSV cell as written: '' for None, an int, a float (repr), or the text."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def check_round_trip(report, rows, tmp_path):
    cols = list(report.columns)
    report.to_csv(tmp_path / "r.csv")
    with open(tmp_path / "r.csv", newline="") as fh:
        got = list(csv.DictReader(fh))
    assert list(got[0]) == cols and len(got) == len(rows)
    for g, r in zip(got, rows):
        for c in cols:
            want = r[c]
            back = g[c] if isinstance(want, str) else read_back(g[c])
            if isinstance(want, float) and math.isnan(want):
                assert back is not None and math.isnan(back)
            else:
                assert back == want, (c, g[c], want)
    report.to_json(tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text()) == report.to_dict()
    with pytest.raises(OutputError):
        report.to_csv(tmp_path / "r.csv")
    with pytest.raises(OutputError):
        report.to_json(tmp_path / "r.json")
    report.to_json(tmp_path / "r.json", overwrite=True)


def test_a_path_reads_back_from_its_csv_and_json(tmp_path):
    path = problem().path(k=[1, 2, 3, 4], solver="grahtp")
    rows = path.rows()
    assert any(isinstance(r["objective"], float) for r in rows)
    check_round_trip(path, rows, tmp_path)
    data = json.loads((tmp_path / "r.json").read_text())
    assert [p["k"] for p in data["points"]] == [1, 2, 3, 4]
    assert [p["objective"] for p in data["points"]] == [r["objective"] for r in rows]


def test_a_selection_reads_back_from_its_csv_and_json(tmp_path):
    sel = problem().select(k=range(0, 6), by="bic", solver="grahtp")
    check_round_trip(sel, sel.curve, tmp_path)
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["k"] == sel.k and [r["k"] for r in data["curve"]] == sel.ks
