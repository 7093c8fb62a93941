"""The team-over-HTTP benchmark drives a real server with a simulated team, beside simulate."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.team_http import RunFigures, main, summarize, write_domain


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
    assert list(out.glob("tiny-0/server-*.log")), "the server's log stays with the run"


def test_the_summary_gives_mean_and_half_width_per_domain_and_mode():
    def run(mode: str, repeat: int, wrong: int) -> RunFigures:
        return RunFigures("d", mode, repeat, 100, 150, wrong, 0.9, 10, 5, 1.0, perfect=100)

    table = summarize([run("http", 0, 1), run("http", 1, 3), run("simulate", 0, 2)])
    half = 12.706 * math.sqrt(2) / math.sqrt(2)  # t(0.975, 1) × stdev / sqrt(n), in points
    assert f"| d | http | 2 | 2 ± {half:.2g} | 1.5 ± 0 |" in table
    assert "| d | simulate | 1 | 2 | 1.5 |" in table
