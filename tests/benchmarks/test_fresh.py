"""The fresh=true benchmark walks the README's steps on a new server, beside a named load."""

from __future__ import annotations

import pytest

from benchmarks.fresh import main


def test_one_run_beside_a_load_answers_and_reports(capsys: pytest.CaptureFixture[str]) -> None:
    runs = main(["--runs", "1", "--load", "sleep 600", "--settle", "0", "--fresh-timeout", "60"])
    assert [run.status for run in runs] == [200]
    out = capsys.readouterr().out
    assert "load: 'sleep 600'" in out
    assert "1/1 answered 200 within 60 s" in out
    assert "load average (1 min) while measuring" in out
