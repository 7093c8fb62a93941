"""The quality calibration benchmark's bookkeeping: its summary line per domain and part, and
the kept team runs it reads back instead of simulating again."""

from __future__ import annotations

import pickle
from pathlib import Path

from benchmarks.quality_calibration import DEFAULT_POLICY, _simulate, summary


def _row(wrong: int, estimate: float, low: int, high: int) -> dict:
    return {"domain": "d", "decided_wrong": wrong, "decided_estimate": estimate,
            "decided_low": low, "decided_high": high, "predicted_wrong": ""}


def test_the_summary_counts_coverage_error_and_width() -> None:
    rows = [_row(5, 4.0, 2, 8), _row(9, 5.0, 1, 7), _row(0, 1.0, 0, 3), _row(4, 4.0, 3, 5)]
    # three of four inside; errors 1, 4, 1, 0; widths 6, 6, 3, 2; no predicted part
    assert list(summary(rows)) == ["| d | decided | 4 | 75% | 1.5 | 4.2 | 4.5 |"]


def test_a_kept_run_is_read_back_without_simulating(tmp_path: Path) -> None:
    """Each team policy keeps its own runs: the service's (the default) and another."""
    kept = (["an answer"], {(0, 1): 0.25})
    other = (["another answer"], {(0, 1): 0.75})
    for policy, run in ((DEFAULT_POLICY, kept), ("consensus", other)):
        with (tmp_path / f"geometry-3-0.1-5-{policy}.pkl").open("wb") as handle:
            pickle.dump(run, handle)
    assert _simulate(None, "geometry", 3, 0.1, 5, tmp_path, DEFAULT_POLICY) == kept
    assert _simulate(None, "geometry", 3, 0.1, 5, tmp_path, "consensus") == other


def test_the_default_team_asks_as_the_service_does() -> None:
    from app.services.asking import POLICY
    from reasoning.consensus.asking import AskPolicy
    from reasoning.simulation.teams import CONSENSUS_VARIANTS

    assert CONSENSUS_VARIANTS[DEFAULT_POLICY].policy(AskPolicy()) == POLICY
