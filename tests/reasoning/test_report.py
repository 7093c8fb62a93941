"""The summary statistics of a simulation, computed by hand on tiny curves."""

from __future__ import annotations

import pytest

from reasoning.report import markdown_table, paired_differences, summarize


def curve(strategy, repeat, auc, labeled=20, queries=50):
    return {"domain": "d", "strategy": strategy, "repeat": repeat, "queries": queries,
            "labeled": labeled, "auc": auc}


def test_summary_interval_is_the_student_t_half_width():
    rows = [curve("LC", r, a) for r, a in enumerate([0.6, 0.7, 0.8])]
    (s,) = summarize(rows)
    # mean 0.7, sd 0.1, t(0.975, 2) = 4.3027: half-width 4.3027 * 0.1 / sqrt(3)
    assert s["auc_mean"] == pytest.approx(0.7)
    assert s["auc_half_width"] == pytest.approx(4.302653 * 0.1 / 3 ** 0.5, rel=1e-5)
    assert "0.700 ± 0.248" in markdown_table([s])


def test_paired_differences_compare_the_same_repeats():
    rows = [curve("LC-R", 0, 0.80, 40), curve("LC-R", 1, 0.70, 50),
            curve("LC", 0, 0.75), curve("LC", 1, 0.72), curve("LC", 2, 0.10)]
    (d,) = paired_differences(rows, comparisons=[("LC-R", "LC")], marks=[50])
    # repeat 2 has no LC-R run and is left out: differences +0.05 and -0.02
    assert d["runs"] == 2 and d["ahead"] == 1
    assert d["auc_difference"] == pytest.approx(0.015)
    assert (d["labeled_first"], d["labeled_second"]) == (45, 20)
