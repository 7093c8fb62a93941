"""The agreement view of a team's answers: Cohen's kappa, Krippendorff's alpha, intervals."""

from __future__ import annotations

import numpy as np
import pytest

from reasoning.consensus import KAPPA_MIN_SHARED, Vote, agreement, consensus


def test_agreement_kappa_alpha_and_intervals():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(5)
    items = KAPPA_MIN_SHARED + 10
    concepts = list(range(2 * items))
    truth = rng.random(items) < 0.5
    answers = []
    for k in range(items):
        for who, eps in (("a", 0.05), ("b", 0.2)):
            answers.append(Vote(2 * k, 2 * k + 1, bool(truth[k] ^ (rng.random() < eps)),
                                  who))
        if k < KAPPA_MIN_SHARED - 1:
            answers.append(Vote(2 * k, 2 * k + 1, bool(truth[k]), "c"))
    result = consensus(answers, concepts)
    view = agreement(answers, result)
    assert [(p.a, p.b) for p in view.pairs] == [("a", "b")]  # c shares too few pairs
    first = [x.positive for x in answers if x.annotator == "a"]
    second = [x.positive for x in answers if x.annotator == "b"]
    assert view.pairs[0].kappa == pytest.approx(cohen_kappa_score(first, second))
    assert view.pairs[0].shared == items
    assert view.alpha is not None and -1 <= view.alpha <= 1
    assert view.answers == len(answers)
    for row in view.annotators:
        assert row.accuracy.low <= row.accuracy.estimate <= row.accuracy.high
        expected = np.mean([result.values.get((x.a, x.b)) == x.positive
                            for x in answers if x.annotator == row.annotator])
        assert row.agreement == pytest.approx(expected)
    shape = view.as_dict()
    assert set(shape) == {"annotators", "pairs", "alpha", "answers"}
    assert set(shape["annotators"][0]["accuracy"]) == {"estimate", "low", "high"}
    assert set(shape["annotators"][0]["checks"]) == {"asked", "failed"}


def test_agreement_of_one_annotator_has_no_kappa_nor_alpha():
    answers = [Vote("x", "y", True, "a")]
    view = agreement(answers, consensus(answers, "xy"))
    assert view.pairs == [] and view.alpha is None
