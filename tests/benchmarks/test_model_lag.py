"""The model-lag benchmark (issue 9) on the real data: its quick profile end to end."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from benchmarks.model_lag import main as model_lag_main


def _rows(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_benchmark_quick_profile_runs_end_to_end_on_the_real_data(al_cpl, tmp_path):
    differences = model_lag_main(["--data", str(al_cpl), "--out", str(tmp_path), "--quick",
                                  "--lags", "2,5,8", "--jobs", "2", "--no-progress"])
    assert [(d["lag"], d["queries"]) for d in differences] == [(2, 30), (5, 30)]
    per_repeat = _rows(tmp_path / "auc.csv")
    assert {(r["lag"], r["repeat"], r["queries"]) for r in per_repeat} == {
        (lag, rep, "30") for lag in ("0", "2", "5") for rep in ("0", "1")}
    assert all(float(r["difference"]) == 0.0 for r in per_repeat if r["lag"] == "0")
    for d in differences:
        lagged = [float(r["difference"]) for r in per_repeat if r["lag"] == str(d["lag"])]
        assert d["auc_difference"] == pytest.approx(np.mean(lagged), abs=1e-6)
        assert d["passed"] == (abs(d["auc_difference"]) <= 0.005)
    curves = _rows(tmp_path / "curves.csv")
    assert {r["queries"] for r in curves} == {"0", "10", "20", "30"}
    summary = (tmp_path / "summary.md").read_text()
    assert "| 2 |" in summary and "| 5 |" in summary and "| 8 |" not in summary
    assert ("PASS" in summary or "FAIL" in summary) and "--quick" in summary
    assert (tmp_path / "difference.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
