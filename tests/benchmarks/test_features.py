"""The features benchmark runs end to end on a small corpus and writes what it promises."""

from __future__ import annotations

import csv

from benchmarks.features import main


def test_features_benchmark_writes_signal_time_and_summary(tmp_path):
    main(["--out", str(tmp_path), "--n", "40", "--pool", "240", "--words", "60",
          "--repeats", "1", "--queries", "5", "--forest-trees", "10",
          "--time-n", "50", "--time-words", "50", "--time-pool", "200"])
    with (tmp_path / "signal.csv").open(newline="") as handle:
        signal = list(csv.DictReader(handle))
    assert [row["features"] for row in signal] == ["computed", "noise"]
    assert all(0 <= float(row["auc"]) <= 1 for row in signal)
    with (tmp_path / "time.csv").open(newline="") as handle:
        (timing,) = csv.DictReader(handle)
    assert timing["pool"] == "200" and float(timing["total_s"]) >= 0
    assert "mean AUC" in (tmp_path / "summary.md").read_text()


def test_features_benchmark_times_the_service(tmp_path):
    main(["--out", str(tmp_path), "--skip-signal", "--skip-time", "--service",
          "--time-n", "30", "--time-words", "40", "--time-pool", "100"])
    with (tmp_path / "service.csv").open(newline="") as handle:
        (row,) = csv.DictReader(handle)
    assert row["pool"] == "100"
    assert all(float(row[key]) >= 0 for key in ("concepts_with_texts_s", "links_s",
                                                 "pairs_computed_s", "recompute_on_a_link_s"))


def test_features_benchmark_follows_a_recompute_job_and_times_the_job(tmp_path, monkeypatch):
    monkeypatch.setenv("SPORAL_RECOMPUTE_ASYNC_THRESHOLD", "1")  # every recompute is a job
    main(["--out", str(tmp_path), "--skip-signal", "--skip-time", "--service",
          "--time-n", "30", "--time-words", "40", "--time-pool", "100"])
    with (tmp_path / "service.csv").open(newline="") as handle:
        (row,) = csv.DictReader(handle)
    assert float(row["link_answer_s"]) >= 0 and float(row["recompute_on_a_link_s"]) >= 0
