"""The table of cases of docs/teams.md ("When a disagreement opens, and ties"), one test per row.

Each row gives the answers on the pair ``(x, y)`` (and, where the row says so, a record of
earlier answers or the labels around it) and what :func:`reasoning.consensus.consensus` makes
of them: whether the pair is asserted and with which value, its value in the closure (None:
undecided), and whether it is contested (an open disagreement in the service).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import pytest

from reasoning.closure import Closure, ContradictionError, Label
from reasoning.consensus import SETTLE_ANSWERS, SETTLE_ODDS, TIE_DELTA, Vote, consensus
from reasoning.consensus.confidence import derived_confidence

X, Y = "x", "y"
CONCEPTS = ["x", "y", "z"] + [f"u{k}" for k in range(6)] + [f"v{k}" for k in range(6)]


def _on(*values: tuple[str, bool], reviewer: tuple[str, bool] | None = None) -> list[Vote]:
    """Answers on ``(x, y)``: (annotator, value) in arrival order, then a reviewer's."""
    out = [Vote(X, Y, v, who, order=k) for k, (who, v) in enumerate(values)]
    if reviewer is not None:
        out.append(Vote(X, Y, reviewer[1], reviewer[0], reviewer=True, order=len(out)))
    return out


def _record(wrong: int, who: str = "b") -> list[Vote]:
    """Six earlier pairs answered alike by ``a`` and ``c``; ``who`` against them on ``wrong``."""
    out = []
    for k in range(6):
        truth = k % 2 == 0
        out += [Vote(f"u{k}", f"v{k}", truth, "a", order=-100 + 3 * k),
                Vote(f"u{k}", f"v{k}", truth, "c", order=-99 + 3 * k),
                Vote(f"u{k}", f"v{k}", truth != (k < wrong), who, order=-98 + 3 * k)]
    return out


def _chain() -> list[Vote]:
    """x < z and z < y, each answered "yes" by a and c: the closure makes (x, y) positive."""
    return [Vote(p, q, True, who, order=-10 + k) for k, (p, q, who) in enumerate(
        [("x", "z", "a"), ("x", "z", "c"), ("z", "y", "a"), ("z", "y", "c")])]


@dataclass(frozen=True)
class Case:
    answers: list[Vote]
    asserted: bool | None  # the asserted label's value; None: not asserted
    value: bool | None  # the pair's value in the closure; None: undecided
    contested: bool


CASES = {
    # split: one annotator
    "1:0 a lone yes": Case(_on(("a", True)), True, True, False),
    # splits between annotators of equal standing
    "1:1 a tie": Case(_on(("a", True), ("b", False)), None, None, True),
    "2:2 a tie": Case(_on(("a", True), ("b", False), ("c", True), ("d", False)),
                      None, None, True),
    "2:1 a no against two yes": Case(_on(("a", True), ("b", False), ("c", True)),
                                     True, True, False),
    "1:2 a yes against two no": Case(_on(("a", True), ("b", False), ("c", False)),
                                     False, False, False),
    "3:1": Case(_on(("a", True), ("b", False), ("c", True), ("d", True)), True, True, False),
    # one against one, annotators rated apart by their record
    "1:1 against one rated less reliable": Case(
        _record(1) + _on(("a", True), ("b", False)), True, True, True),
    "1:1 against one rated far less reliable": Case(
        _record(4) + _on(("a", True), ("b", False)), True, True, True),
    "1:1 rated alike by a clean record": Case(
        _record(0) + _on(("a", True), ("b", False)), None, None, True),
    # 2:1 where the two are the ones rated less reliable
    "2:1, the two rated less reliable": Case(
        _record(4, "b") + _record(4, "d")[2::3]
        + _on(("b", True), ("d", True), ("a", False)), True, True, False),
    # a reviewer
    "a reviewer against two": Case(_on(("a", True), ("b", True), reviewer=("rev", False)),
                                   False, False, False),
    "a reviewer settles a tie": Case(_on(("a", True), ("b", False), reviewer=("rev", True)),
                                     True, True, False),
    # the closure
    "an answer against the closure gives way": Case(_chain() + _on(("b", False)),
                                                    None, True, True),
    "a tie the closure decides": Case(_chain() + _on(("b", True), ("d", False)),
                                      None, True, True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_case(name: str) -> None:
    case = CASES[name]
    result = consensus(case.answers, CONCEPTS)
    pair = (X, Y)
    assert result.labels.get(pair) is case.asserted
    assert result.values.get(pair) is case.value
    assert (pair in result.contested) is case.contested
    if case.asserted is None and case.value is None:  # a tie left undecided
        assert pair in result.tied and abs(result.confidence[pair] - 0.5) <= TIE_DELTA


def test_the_rated_cases_are_what_their_names_say() -> None:
    """The records behind the rated rows rate ``b`` below ``a`` (and the 1:1 rows are not
    settled by the odds alone: ``SETTLE_ANSWERS`` keeps them contested)."""
    for wrong in (1, 4):
        result = consensus(_record(wrong) + _on(("a", True), ("b", False)), CONCEPTS)
        assert result.accuracy["b"] < result.accuracy["a"] - 0.1
        odds = result.confidence[(X, Y)] / (1 - result.confidence[(X, Y)])
        assert odds >= SETTLE_ODDS and SETTLE_ANSWERS == 2


def test_a_third_answer_closes_a_tie_and_a_retraction_reopens_it() -> None:
    tie = _on(("a", True), ("b", False))
    assert (X, Y) in consensus(tie, CONCEPTS).contested
    settled = consensus(tie + [Vote(X, Y, False, "c", order=9)], CONCEPTS)
    assert (X, Y) not in settled.contested and settled.labels[(X, Y)] is False
    assert (X, Y) in consensus(tie, CONCEPTS).contested  # "c" retracted: the tie again


def test_an_annotator_changing_their_mind_replaces_their_answer() -> None:
    answers = _on(("a", True), ("b", False)) + [Vote(X, Y, True, "b", order=5)]
    result = consensus(answers, CONCEPTS)
    assert result.labels[(X, Y)] is True and result.contested == {}


@pytest.mark.parametrize("seed", range(5))
def test_the_consensus_is_a_function_of_the_answers_only(seed: int) -> None:
    """Replaying the same live answers in their arrival order gives the same consensus:
    nothing else (no model, no earlier fit, no other state) enters it."""
    rng = random.Random(seed)
    answers = []
    for k in range(40):
        p, q = rng.sample(CONCEPTS, 2)
        answers.append(Vote(p, q, rng.random() < 0.5, rng.choice("abcd"), order=k,
                            reviewer=rng.random() < 0.05, check=rng.random() < 0.05))
    first = consensus(answers, CONCEPTS)
    shuffled = answers[:]
    rng.shuffle(shuffled)
    consensus(shuffled, CONCEPTS)  # another fit in between changes nothing
    again = consensus(sorted(shuffled, key=lambda v: v.order), CONCEPTS)
    assert (again.labels, again.values, again.accuracy) == (
        first.labels, first.values, first.accuracy)
    assert again.confidence == pytest.approx(first.confidence)
    assert set(again.contested) == set(first.contested) and again.tied == first.tied


# ---------------------------------------------------------------------------- confidence
@pytest.mark.parametrize("seed", range(6))
def test_an_inferred_pairs_confidence_is_its_strongest_proofs_weakest_label(seed: int) -> None:
    """The greatest t such that the labels of confidence at least t still decide the pair."""
    rng = random.Random(seed)
    names = list(range(6))
    closure = Closure(names)
    weights = {}
    for _ in range(9):
        a, b = rng.sample(names, 2)
        positive = rng.random() < 0.6
        try:
            closure.add_label(a, b, positive)
        except ContradictionError:
            continue
        weights[(a, b)] = rng.choice([0.55, 0.7, 0.8, 0.9, 0.99])
    derived = derived_confidence(closure, weights)
    for a, b in itertools.permutations(names, 2):
        value = closure.status(a, b).value
        if (a, b) in closure.asserted:
            assert derived.of(a, b) == weights[(a, b)]
            continue
        if value is None:
            assert derived.of(a, b) is None
            continue
        best = 0.0
        for t in sorted(set(weights.values())):
            strong = [Label(p, q, v) for (p, q), v in closure.asserted.items()
                      if weights[(p, q)] >= t]
            if Closure.from_labels(strong, names).status(a, b).value is value:
                best = t
        assert derived.of(a, b) == best, (a, b, value)


def test_a_ties_posterior_is_near_one_half_and_a_reviewers_is_final() -> None:
    result = consensus(_on(("a", True), ("b", False)), CONCEPTS)
    assert result.posterior[(X, Y)] == pytest.approx(0.5)
    result = consensus(_on(("a", True), ("b", True), reviewer=("rev", False)), CONCEPTS)
    assert result.posterior[(X, Y)] == 0.0
