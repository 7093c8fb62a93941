"""The closure benchmark runs end to end on small inputs and writes every file it promises."""

from __future__ import annotations

import csv

import pytest

from benchmarks.closure import COLUMNS, main


def _rows(path):
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        return reader.fieldnames, list(reader)


def _check_outputs(out, domains, scale: bool):
    expected = ["closure.csv", "gains.csv", "round.csv"] + (["scale.csv"] if scale else [])
    for name in expected:
        header, rows = _rows(out / name)
        assert header == COLUMNS[name]
        assert rows, f"{name} is empty"
    _, closure_rows = _rows(out / "closure.csv")
    assert {(r["domain"], r["method"]) for r in closure_rows} == {
        (d, m) for d in domains for m in ("core", "literal", "literal_unpruned")}
    assert all(int(r["updates"]) > 0 for r in closure_rows if r["method"] == "core")
    _, round_rows = _rows(out / "round.csv")
    assert {r["domain"] for r in round_rows} == set(domains)
    assert all(int(r["queries"]) > 0 for r in round_rows)
    assert (out / "closure_vs_H.png").stat().st_size > 0
    assert "literal/core" in (out / "summary.txt").read_text()


def test_benchmark_on_a_generated_order_writes_every_output(tmp_path):
    main(["--generated", "40:200", "--out", str(tmp_path), "--cap-seconds", "2",
          "--gain-cap-seconds", "0.5", "--gain-points", "2", "--repeats", "1",
          "--scale-sizes", "60:300", "--no-progress"])
    _check_outputs(tmp_path, ["generated-40"], scale=True)
    _, scale_rows = _rows(tmp_path / "scale.csv")
    assert [(r["n"], r["pool"]) for r in scale_rows] == [("60", "300")]
    assert float(scale_rows[0]["peak_rss_mb"]) > 0


def test_benchmark_caps_the_literal_round_on_a_real_domain(al_cpl, tmp_path):
    main(["--data", str(al_cpl), "--domains", "data_mining", "--out", str(tmp_path),
          "--cap-seconds", "0", "--gain-cap-seconds", "0", "--gain-points", "1",
          "--repeats", "1", "--skip-scale", "--no-progress"])
    _check_outputs(tmp_path, ["data_mining"], scale=False)
    _, rows = _rows(tmp_path / "closure.csv")
    updates = {r["method"]: int(r["updates"]) for r in rows}
    assert updates["literal"] < updates["core"], "a zero cap must stop the literal round early"
    assert "(capped)" in (tmp_path / "summary.txt").read_text()


@pytest.mark.parametrize("spec", ["0:10", "x"])
def test_bad_sizes_are_refused(spec, tmp_path):
    with pytest.raises((ValueError, SystemExit)):
        main(["--generated", spec, "--out", str(tmp_path), "--skip-scale", "--no-progress"])
