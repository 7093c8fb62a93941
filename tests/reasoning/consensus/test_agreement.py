"""The agreement view of a team's answers: Cohen's kappa, Krippendorff's alpha, intervals,
and what a lead acts on (false no / false yes, minority answers, the prior, the trend)."""

from __future__ import annotations

import numpy as np
import pytest

from reasoning.consensus import (
    KAPPA_MIN_SHARED,
    PRIOR_MIN_SHARED,
    TREND_WINDOW,
    TREND_WINDOWS,
    AnnotatorAgreement,
    Vote,
    agreement,
    consensus,
)


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
    assert set(shape) == {"annotators", "pairs", "alpha", "answers", "reviewers"}
    assert set(shape["annotators"][0]["accuracy"]) == {"estimate", "low", "high"}
    assert set(shape["annotators"][0]["checks"]) == {"asked", "failed"}


def test_agreement_of_one_annotator_has_no_kappa_nor_alpha():
    answers = [Vote("x", "y", True, "a")]
    view = agreement(answers, consensus(answers, "xy"))
    assert view.pairs == [] and view.alpha is None


# ------------------------------------------------------------------ what a lead acts on
TRUTHFUL = ("t1", "t2", "t3")


def _planted(k_no: int = 4, m_yes: int = 3) -> tuple[list[Vote], set[int], set[int]]:
    """Three truthful annotators and two planted ones on 12 pairs of a chain's order (6
    positive, 6 negative): ``x`` answers "no" on ``k_no`` positive pairs, ``y`` "yes" on
    ``m_yes`` negative ones, both truthful elsewhere. Also the orders of their wrong answers."""
    positive = [(i, i + 1) for i in range(6)]
    negative = [(i + 1, i) for i in range(6)]
    answers: list[Vote] = []
    wrong: dict[str, set[int]] = {"x": set(), "y": set()}
    for pair in positive + negative:
        truth = pair in positive
        for who in (*TRUTHFUL, "x", "y"):
            flip = (who == "x" and truth and positive.index(pair) < k_no) or (
                who == "y" and not truth and negative.index(pair) < m_yes)
            if flip:
                wrong[who].add(len(answers))
            answers.append(Vote(*pair, truth ^ flip, who, order=len(answers)))
    return answers, wrong["x"], wrong["y"]


def test_false_no_false_yes_and_minority_of_a_planted_team():
    answers, x_wrong, y_wrong = _planted(4, 3)
    result = consensus(answers, range(7))
    assert result.values == {(a.a, a.b): a.positive for a in answers if a.annotator == "t1"}
    view = agreement(answers, result)
    rows = {row.annotator: row for row in view.annotators}
    assert (rows["x"].false_no, rows["x"].false_yes, rows["x"].minority) == (4, 0, 4)
    assert (rows["y"].false_no, rows["y"].false_yes, rows["y"].minority) == (0, 3, 3)
    for name in TRUTHFUL:
        assert (rows[name].false_no, rows[name].false_yes, rows[name].minority) == (0, 0, 0)
    assert view.minority["x"] == sorted(x_wrong) and view.minority["y"] == sorted(y_wrong)
    assert view.minority["t1"] == []
    assert all(row.shared_pairs == 12 and row.undecided == 0 for row in rows.values())
    assert rows["x"].agreement == pytest.approx(8 / 12)
    assert "minority" not in view.as_dict()  # the service lists the answers themselves


def test_the_estimate_rests_on_the_prior_until_enough_pairs_are_shared():
    def view(shared: int) -> AnnotatorAgreement:
        # "solo" answers 30 pairs, ``shared`` of which "other" answers too
        answers = [Vote(k, k + 100, True, "solo") for k in range(30)]
        answers += [Vote(k, k + 100, True, "other") for k in range(shared)]
        rows = {r.annotator: r for r in agreement(answers, consensus(answers, range(200)))
                .annotators}
        return rows["solo"]

    few, enough = view(PRIOR_MIN_SHARED - 1), view(PRIOR_MIN_SHARED)
    assert (few.shared_pairs, few.rests_on_prior) == (PRIOR_MIN_SHARED - 1, True)
    assert "mostly the prior (90%)" in few.note
    assert (enough.shared_pairs, enough.rests_on_prior, enough.note) == (
        PRIOR_MIN_SHARED, False, None)
    alone = view(0)
    assert alone.rests_on_prior and alone.accuracy.estimate == pytest.approx(0.9, abs=1e-6)


def test_check_questions_count_towards_what_the_estimate_rests_on():
    answers = [Vote(k, k + 100, True, "solo", check=k < PRIOR_MIN_SHARED) for k in range(30)]
    (row,) = agreement(answers, consensus(answers, range(200))).annotators
    assert row.shared_pairs == 0 and not row.rests_on_prior


def test_the_reviewer_is_listed_apart_from_the_annotators():
    answers = [Vote("x", "y", True, "ann", order=1), Vote("x", "y", False, "bo", order=2),
               Vote("x", "y", True, "lead", reviewer=True, order=3),
               Vote("y", "z", True, "lead", reviewer=True, order=4),
               Vote("y", "z", False, "boss", reviewer=True, order=5)]
    view = agreement(answers, consensus(answers, "xyz"))
    assert [row.annotator for row in view.annotators] == ["ann", "bo"]
    assert [(r.annotator, r.resolutions, r.final) for r in view.reviewers] == [
        ("boss", 1, 1), ("lead", 2, 1)]
    rows = {row.annotator: row for row in view.annotators}
    assert rows["bo"].false_no == 1 and rows["bo"].shared_pairs == 1
    assert rows["ann"].identifiable and rows["bo"].identifiable  # the reviewer says who is right


def test_the_trend_is_windows_of_answers_ending_at_the_latest():
    # 20 wrong answers, then 10 windows' worth of right ones and 5 more: only the last 10 shown
    n = TREND_WINDOW * (TREND_WINDOWS + 1) + 5
    answers = []
    for k in range(n):
        truth = k % 2 == 0
        answers += [Vote(k, k + 1000, truth, who, order=3 * k + j)
                    for j, who in enumerate(("t1", "t2"))]
        answers.append(Vote(k, k + 1000, truth ^ (k < TREND_WINDOW), "late", order=3 * k + 2))
    rows = {r.annotator: r for r in agreement(answers, consensus(answers, range(2000)))
            .annotators}
    trend = rows["late"].trend
    assert len(trend) == TREND_WINDOWS and all(w.answers == TREND_WINDOW for w in trend)
    assert all(w.agreement == 1.0 for w in trend)  # the early mistakes are older than shown
    short = [Vote(k, k + 1, True, "t") for k in range(0, 2 * (TREND_WINDOW + 5), 2)]
    (row,) = agreement(short, consensus(short, range(100))).annotators
    assert [w.answers for w in row.trend] == [5, TREND_WINDOW]


def test_the_trend_shows_an_annotator_getting_worse():
    answers = []
    for k in range(3 * TREND_WINDOW):
        answers += [Vote(k, k + 100, True, who, order=3 * k + j)
                    for j, who in enumerate(("t1", "t2"))]
        # right in the first window, wrong on every other answer in the second, then wrong
        wrong = k >= 2 * TREND_WINDOW or (k >= TREND_WINDOW and k % 2 == 0)
        answers.append(Vote(k, k + 100, not wrong, "tired", order=3 * k + 2))
    rows = {r.annotator: r for r in agreement(answers, consensus(answers, range(200)))
            .annotators}
    assert [w.agreement for w in rows["tired"].trend] == [1.0, 0.5, 0.0]


def _two(checks: bool) -> dict[str | None, AnnotatorAgreement]:
    """A perfect annotator and one wrong on 18 of 60 pairs; with ``checks``, each also answers
    10 check questions (pairs decided only through two steps), the weak one failing 3."""
    rng = np.random.default_rng(3)
    truth = rng.random(60) < 0.5
    wrong = set(rng.choice(60, 18, replace=False).tolist())
    answers: list[Vote] = []
    for k in range(60):
        answers.append(Vote(2 * k, 2 * k + 1, bool(truth[k]), "good", order=len(answers)))
        answers.append(Vote(2 * k, 2 * k + 1, bool(truth[k]) ^ (k in wrong), "weak",
                            order=len(answers)))
    for t in range(10 if checks else 0):
        x, y, z = (f"c{3 * t + i}" for i in range(3))
        for who in ("good", "weak"):
            answers += [Vote(x, y, True, who), Vote(y, z, True, who)]
        answers += [Vote(x, z, True, "good", check=True),
                    Vote(x, z, t >= 3, "weak", check=True)]
    concepts = [*range(120), *(f"c{i}" for i in range(30))]
    return {r.annotator: r for r in agreement(answers, consensus(answers, concepts))
            .annotators}


def test_two_annotators_without_evidence_are_flagged_not_told_apart():
    rows = _two(checks=False)
    good, weak = rows["good"], rows["weak"]
    # nothing says who is right: the same estimate for both, and the view says so
    assert good.accuracy == weak.accuracy and good.agreement == weak.agreement
    assert not good.identifiable and not weak.identifiable
    assert "one answer against one" in good.note
    assert good.undecided == weak.undecided == 18 and good.minority == weak.minority == 0


def test_check_questions_tell_two_annotators_apart():
    rows = _two(checks=True)
    good, weak = rows["good"], rows["weak"]
    assert good.identifiable and weak.identifiable and good.note is None
    assert good.accuracy.estimate > 0.95 > weak.accuracy.high
    assert (good.minority, weak.minority) == (0, 18 + 3)
    assert weak.checks.failed == 3 and good.agreement == 1.0
