"""The consensus scale benchmark measures what it says against a real server."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.consensus_scale import (
    Figures,
    Reads,
    _against,
    _burst_cell,
    _row,
    _team_answers,
    run,
)


def test_a_contested_answer_goes_against_the_pairs_majority():
    given = {("a", "b"): [True, True, False], ("b", "c"): [False, False, True]}
    assert _against(given, ("a", "b"), "x")["label"] == "negative"
    assert _against(given, ("b", "c"), "x")["label"] == "positive"


def test_the_team_answers_every_pair_once_each():
    items, given = _team_answers(100, 30, 0.1, np.random.default_rng(0))
    assert len(items) == 100 and len(given) == 20
    assert all(len(values) == 5 for values in given.values())
    per = {(i["a"], i["b"], i["annotator"]) for i in items}
    assert len(per) == 100  # no annotator answers a pair twice


def test_a_row_says_the_burst_or_that_there_was_none():
    reads = Reads([0.01, 0.03], [False, True], 2.5, 0.004, 0.06)
    f = Figures(10, 1.0, [0.01], [0.02], reads, 0.02, (1.0, 1.0))
    assert _burst_cell(f) == "–" and _row(f).startswith("| 10 |")
    assert "20 / 30 ms (1/2 current), current after 2.5 s, cached 4 ms, restarted 60 ms" \
        in _row(f)
    g = Figures(10, 1.0, [0.01], [0.02], reads, 0.02, (1.0, 1.0), [0.1, 0.3], 0.5)
    assert "4.0 answers/s" in _burst_cell(g)


@pytest.mark.slow
def test_a_small_project_is_measured_on_a_real_server():
    figures = run(300, concepts=40, noise=0.1, n=3, pause=0.0, seed=1, burst=1)
    assert figures.answers == 300
    assert len(figures.contested) == 3 and len(figures.agreeing) == 3
    assert len(figures.burst) == 5 and figures.burst_wall > 0
    assert all(t > 0 for t in [*figures.contested, *figures.agreeing, figures.disagreements,
                               *figures.agreement.after_answer, figures.agreement.restarted])
