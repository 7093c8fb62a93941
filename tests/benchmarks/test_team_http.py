"""The team-over-HTTP benchmark drives a real server with a simulated team, beside simulate."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.team_http import RunFigures, main, quality_lines, summarize, write_domain


@pytest.mark.slow  # about 8 s: .ci/run's slow step
def test_a_perfect_team_gets_the_true_map_over_http_and_in_simulation(tmp_path):
    data = write_domain(tmp_path / "data", "tiny", 10, 30, seed=3)
    out = tmp_path / "out"
    assert main(["--data", str(data), "--domains", "tiny", "--repeats", "1", "--noise", "0",
                 "--annotators", "2", "--out", str(out)]) == 0
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert [r["mode"] for r in runs] == ["simulate", "http"]
    for run in runs:  # nobody errs: every pool pair decided, and decided right
        assert run["pool"] == 30 and run["wrong_pairs"] == 0 and run["positive_f1"] == 1.0
        assert 0 < run["answers"] <= 30
    assert runs[1]["perfect"] == runs[0]["perfect"] > 0
    summary = (out / "summary.md").read_text()
    assert "| tiny | http | 1 | 0 |" in summary and "load" in summary
    quality = runs[1]["extra"]  # GET quality at the end, beside the true count
    assert quality["decided_wrong_true"] == 0
    assert quality["quality"]["decided"] == 30 and "True counts inside" in summary
    assert list(out.glob("tiny-0/server-*.log")), "the server's log stays with the run"


def test_the_summary_gives_mean_and_half_width_per_domain_and_mode():
    def run(mode: str, repeat: int, wrong: int) -> RunFigures:
        return RunFigures("d", mode, repeat, 100, 150, wrong, 0.9, 10, 5, 1.0, perfect=100)

    table = summarize([run("http", 0, 1), run("http", 1, 3), run("simulate", 0, 2)])
    half = 12.706 * math.sqrt(2) / math.sqrt(2)  # t(0.975, 1) × stdev / sqrt(n), in points
    assert f"| d | http | 2 | 2 ± {half:.2g} | 1.5 ± 0 |" in table
    assert "| d | simulate | 1 | 2 | 1.5 |" in table


def test_the_quality_lines_say_whether_each_true_count_lies_in_its_interval():
    def run(repeat: int, decided_true: int, predicted_true: int | None) -> RunFigures:
        extra = {"quality": {"decided_wrong": {"estimate": 3.0, "low": 1, "high": 6},
                             "predicted_wrong": None if predicted_true is None else
                             {"estimate": 10.0, "low": 5, "high": 15}},
                 "decided_wrong_true": decided_true}
        if predicted_true is not None:
            extra["predicted_wrong_true"] = predicted_true
        return RunFigures("d", "http", repeat, 100, 150, 1, 0.9, 10, 5, 1.0, extra=extra)

    text = quality_lines([run(0, 2, 20), run(1, 7, None),
                          RunFigures("d", "simulate", 0, 100, 150, 1, 0.9, 10, 5, 1.0)])
    assert "| d | 0 | 150 | 3.0 (1–6) | 2 | yes | 10.0 (5–15) | 20 | no |" in text
    assert "| d | 1 | 150 | 3.0 (1–6) | 7 | no | – | – | – |" in text
    assert "True counts inside the 90% interval: 1 of 3." in text
