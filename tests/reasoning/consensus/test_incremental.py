"""The local repair of a consensus (accuracies held fixed) against the full recompute."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning.closure import Closure, Label
from reasoning.consensus import Consensus, Vote, consensus
from reasoning.consensus.incremental import pair_state, repair

N = 8
TEAM = ("t0", "t1", "t2", "t3", "t4")


def _planted(seed: int, *, eps: float = 0.1, share: float = 0.4) -> tuple[Closure, list[Vote]]:
    """A random strict order on ``N`` concepts; five annotators (each answer wrong with
    probability ``eps``) answer a share of the ordered pairs, two or three each."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(N)
    truth = Closure(range(N))
    for i, j in itertools.combinations(range(N), 2):
        a, b = int(perm[i]), int(perm[j])
        if rng.random() < 0.35 and truth.status(a, b).value is None:
            truth.add_label(a, b, True)
    answers: list[Vote] = []
    for a, b in itertools.permutations(range(N), 2):
        if rng.random() < share:
            for who in rng.choice(len(TEAM), int(rng.integers(2, 4)), replace=False):
                value = bool(truth.status(a, b).value) ^ bool(rng.random() < eps)
                answers.append(Vote(a, b, value, TEAM[who], order=len(answers)))
    return truth, answers


def _rest(labels: dict, pair) -> bool | None:
    """The value the closure of every label but ``pair``'s gives ``pair``."""
    others = [Label(a, b, v) for (a, b), v in labels.items() if (a, b) != pair]
    closed = Closure.closed(others, range(N))
    assert closed is not None
    return closed.status(*pair).value


def _on(answers: list[Vote], pair) -> list[Vote]:
    return [v for v in answers if (v.a, v.b) == pair]


def _local(base: Consensus, labels: dict, answers: list[Vote], pair) -> dict:
    """The labels after repairing ``pair`` locally (every other label kept)."""
    fixed = repair(base, _on(answers, pair), pair, labels.get(pair), _rest(labels, pair))
    out = {p: v for p, v in labels.items() if p != pair}
    if fixed.label is not None:
        out[pair] = fixed.label
    return out


@pytest.mark.parametrize("seed", range(8))
def test_on_unchanged_answers_the_repair_is_the_full_fit_itself(seed):
    """With the fit's own accuracies, each pair is computed as ``consensus`` computed it."""
    _, answers = _planted(seed)
    base = consensus(answers, range(N))
    for pair in {(v.a, v.b) for v in answers}:
        fixed = repair(base, _on(answers, pair), pair, base.labels.get(pair),
                       _rest(base.labels, pair))
        assert fixed.action == "keep"
        assert fixed.state.posterior == pytest.approx(base.posterior[pair])
        assert fixed.state.tied == (pair in base.tied)
        assert fixed.gave_way == (pair in base.gave_way)
        assert fixed.contested == (pair in base.contested)
        assert fixed.fit.labels == base.labels
        assert set(fixed.fit.contested) == set(base.contested)


def _contested(answers: list[Vote], rng: np.random.Generator) -> tuple[list[Vote], tuple]:
    """``answers`` and one more, against the majority of a random answered pair, by an
    annotator of the team or a new one."""
    pairs = sorted({(v.a, v.b) for v in answers})
    pair = pairs[int(rng.integers(len(pairs)))]
    yes = sum(1 if v.positive else -1 for v in _on(answers, pair))
    who = ["new", *TEAM][int(rng.integers(len(TEAM) + 1))]
    return [*answers, Vote(*pair, yes < 0, who, order=len(answers))], pair


def _outside_bound(seed: int, steps: int) -> tuple[int, int]:
    """Contested answers one after another, each repaired locally against the first full
    fit: (pairs where the labels differ from a full recompute outside the documented bound,
    pairs where they differ at all)."""
    rng = np.random.default_rng(1000 + seed)
    _, answers = _planted(seed)
    base = consensus(answers, range(N))
    labels, pending = dict(base.labels), set()
    outside = differ = 0
    for _ in range(steps):
        answers, pair = _contested(answers, rng)
        pending.add(pair)
        labels = _local(base, labels, answers, pair)
        assert Closure.closed([Label(a, b, v) for (a, b), v in labels.items()],
                              range(N)) is not None  # always a strict order's labels
        full = consensus(answers, range(N))
        # outside the pending pairs: exactly the last full fit's labels
        assert {p: v for p, v in labels.items() if p not in pending} == {
            p: v for p, v in base.labels.items() if p not in pending}
        wrong = {p for p in set(labels) | set(full.labels) if labels.get(p) != full.labels.get(p)}
        moved = {p for p in wrong - pending
                 if not (pair_state(_on(answers, p), full).split or p in full.gave_way
                         or p in base.gave_way)}
        outside += len(moved)
        differ += len(wrong)
    return outside, differ


@pytest.mark.parametrize("seed", range(10))
def test_before_the_refit_the_labels_differ_only_within_the_bound(seed):
    outside, _ = _outside_bound(seed, steps=6)
    assert outside == 0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), steps=st.integers(1, 5))
def test_the_bound_holds_on_random_planted_teams(seed, steps):
    assert _outside_bound(seed, steps)[0] == 0


def test_after_the_refit_the_labels_are_the_full_recompute():
    """The refit is the full consensus: a repair on top of it changes nothing more."""
    rng = np.random.default_rng(7)
    _, answers = _planted(3)
    answers, pair = _contested(answers, rng)
    settled = consensus(answers, range(N))
    again = _local(settled, dict(settled.labels), answers, pair)
    assert again == settled.labels


def test_a_contradicted_value_gives_way_and_stays_contested():
    base = consensus([Vote(0, 1, True, "a"), Vote(1, 2, True, "a"),
                      Vote(0, 1, True, "b"), Vote(1, 2, True, "b")], range(3))
    votes = [Vote(0, 2, False, "a"), Vote(0, 2, False, "b")]
    fixed = repair(base, votes, (0, 2), None, rest=True)
    assert (fixed.label, fixed.gave_way, fixed.contested, fixed.action) == (
        None, True, True, "keep")
    assert (0, 2) in fixed.fit.gave_way and fixed.fit.values[(0, 2)] is True


def test_a_flip_a_retraction_and_a_reviewer():
    base = consensus([Vote(0, 1, True, "a"), Vote(0, 1, True, "b")], range(3))
    votes = [Vote(0, 1, True, "a"), Vote(0, 1, False, "b"), Vote(0, 1, False, "c")]
    flipped = repair(base, votes, (0, 1), True, None)
    assert (flipped.label, flipped.action, flipped.contested) == (False, "flip", False)
    tie = repair(base, votes[:2], (0, 1), True, None)
    assert (tie.label, tie.action, tie.state.tied) == (None, "retract", True)
    review = repair(base, [*votes, Vote(0, 1, True, "r", reviewer=True)], (0, 1), False, None)
    assert (review.label, review.action, review.contested) == (True, "flip", False)


def test_a_held_label_stays_contested_for_the_refit():
    base = consensus([Vote(0, 1, True, "a"), Vote(0, 1, True, "b")], range(3))
    votes = [Vote(0, 1, True, "a"), Vote(0, 1, False, "b"), Vote(0, 1, False, "c")]
    held = repair(base, votes, (0, 1), True, None, hold=True)
    assert (held.label, held.action, held.held, held.contested) == (True, "keep", True, True)
    assert held.fit.labels[(0, 1)] is True and (0, 1) in held.fit.contested
