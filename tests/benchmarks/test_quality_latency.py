"""The GET quality latency benchmark times the calls it says, against a real server."""

from __future__ import annotations

import json

import httpx
import pytest

from benchmarks.quality_latency import figures, main, time_calls
from benchmarks.team_http import write_domain


def test_each_call_is_timed_alone_after_its_untimed_preparation():
    done: list[str] = []

    def call() -> httpx.Response:
        done.append("call")
        return httpx.Response(200, request=httpx.Request("GET", "http://x/quality"))

    ms = time_calls(call, lambda i: done.append(f"before {i}"), 3)
    assert done == ["before 0", "call", "before 1", "call", "before 2", "call"]
    assert len(ms) == 3 and all(m >= 0 for m in ms)
    assert figures([1.0, 2.0, 3.0, 100.0]) == {"calls": 4, "p50_ms": 2.5, "p99_ms": 97.1,
                                                "max_ms": 100.0}
    with pytest.raises(httpx.HTTPStatusError):  # a failed call is not a figure
        time_calls(lambda: httpx.Response(500, request=httpx.Request("GET", "http://x")),
                   None, 1)


@pytest.mark.slow  # about 30 s (a server, a team, new models, a restart): .ci/run's slow step
def test_a_small_team_s_quality_is_timed_cached_cold_and_after_a_restart(tmp_path):
    data = write_domain(tmp_path / "data", "tiny", 10, 30, seed=3)
    out = tmp_path / "out"
    assert main(["--data", str(data), "--domain", "tiny", "--calls", "4", "--restarts", "1",
                 "--max-answers", "8", "--out", str(out)]) == 0
    result = json.loads((out / "quality_latency.json").read_text())
    assert result["pool"] == 30 and result["answers"] == 8
    assert result["quality"]["decided"] + result["quality"]["undecided"] == 30
    assert result["quality"]["undecided"] > 0  # so that new labels could be timed
    assert [result[k]["calls"] for k in ("cached", "cold", "restart")] == [4, 4, 1]
    assert 1 <= result["label"]["calls"] <= 4
    assert "| cold | 4 |" in (out / "quality_latency.md").read_text()
