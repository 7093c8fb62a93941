"""Which question a team member gets next: a new pair, a second opinion, a disagreement, a check.

:class:`AskPolicy` is pure: given what the team answered (:class:`TeamView`: the answers per
pair, the consensus and its closure, the model's probabilities and what each answer decided)
and the annotator asking, :meth:`AskPolicy.choose` returns the pair to ask and why
(:class:`Choice`), in this order:

1. ``disagreement``: a link of an open disagreement (the contested pair itself, or for a pair
   that gave way, an asserted label of the proof that overrules it) that this annotator has
   not answered; the least settled first (confidence nearest one half), then the one with the
   most pool pairs at stake;
2. ``second-opinion``: the decided pair with the greatest value of information
   ``P(wrong) × stake`` (P from the answers' accuracies and the model's probability,
   :func:`~reasoning.consensus.core.p_wrong` generalised to several answers; ``stake`` by the
   policy's :attr:`AskPolicy.stake` rule: :func:`asked_stake`, the pool pairs its answer
   decided; :func:`covering_stake` or :func:`now_stake`, the pool pairs that rest on it now,
   :func:`resting`) when it reaches :attr:`AskPolicy.threshold`; before it, a pair a
   lead re-asked (:attr:`TeamView.reask`) that this annotator has not answered. After an annotator
   failed a check question, their negative answers on pairs that a path could still make
   positive count as answered at the check failure rate's accuracy: they get second opinions
   first, and never from another annotator who failed a check;
3. a **check question**, with probability :attr:`AskPolicy.check_rate` (the caller's uniform
   ``draw``; :attr:`AskPolicy.passed_rate` once the annotator passed more checks than they
   failed): a pool pair decided positive only through two or more steps
   (:func:`~reasoning.consensus.core.check_candidates`); its reason says ``new``, like any
   other, so that the annotator cannot tell;
4. ``new``: the strategy's choice among the undecided pool pairs (the caller's ``new_pair``,
   called only when needed: fitting the strategy's model is the expensive part).

Never a pair the annotator already answered (anonymous answers included); never showing
earlier answers (a :class:`Choice` carries none).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reasoning.closure import Closure
from reasoning.consensus.core import Consensus, Vote, check_candidates
from reasoning.consensus.em import ACCURACY_RANGE

__all__ = [
    "CHECK_RATE",
    "CHECK_RATE_PASSED",
    "REASONS",
    "RESTING_CELLS",
    "RESTING_CONCEPTS",
    "SECOND_OPINION_VALUE",
    "AskPolicy",
    "Choice",
    "StakeRule",
    "TeamView",
    "asked_stake",
    "covering_stake",
    "held_alone",
    "now_stake",
    "resting",
    "resting_or_stake",
    "rests_densely",
    "stakes",
]

CHECK_RATE = 0.05
"""The share of an annotator's questions that are check questions (one in twenty) until they
pass one, and for as long as they have failed more than they passed: enough to catch an
annotator who answers the direct relation within their first few dozen answers."""

CHECK_RATE_PASSED = 0.01
"""The share of check questions for an annotator who passed more checks than they failed."""

SECOND_OPINION_VALUE = 0.3
"""The least value of information, P(wrong) × pool pairs at stake, worth a second opinion."""

PRIOR_ACCURACY = 0.9
"""The accuracy an annotator is taken at before their answers say otherwise (the consensus's
prior, :func:`reasoning.consensus.consensus`)."""

REASONS = ("new", "second-opinion", "disagreement")

Pair = tuple[Hashable, Hashable]


@dataclass(frozen=True)
class Choice:
    """The pair to ask, why (one of :data:`REASONS`), and whether it is a check question."""

    a: Hashable
    b: Hashable
    reason: str
    check: bool = False


@dataclass
class TeamView:
    """What the team answered, as the policy reads it.

    Attributes
    ----------
    result : Consensus
        The consensus of every answer (its ``closure`` set).
    answers : mapping
        Per answered pair, the answers that count on it.
    pool : collection
        The pool pairs (checks and new pairs come from it).
    proba : mapping
        The model's P(positive) per pair (missing: one half).
    stake : mapping, optional
        Per answered pair, the pool pairs at stake: those its first answer newly decided (the
        service's ``decided`` of that answer; the simulation counts them). Without it,
        :func:`stakes` of the closure (an upper bound that counts pairs other labels decide
        too; in simulation it asked more second opinions for fewer errors caught).
    reask : sequence, optional
        Pairs a lead re-asked, oldest first: second opinions before any other.
    rest : mapping, optional
        Per asserted label, the pool pairs that rest on it alone now (:func:`resting`, or the
        stake where :func:`rests_densely` is false), computed and kept by the caller (the
        service keeps it with the project's state); without it, computed here.
    """

    result: Consensus
    answers: Mapping[Pair, list[Vote]]
    pool: Collection[Pair]
    proba: Mapping[Pair, float] = field(default_factory=dict)
    stake: Mapping[Pair, int] | None = None
    reask: Sequence[Pair] = ()
    rest: Mapping[Pair, int] | None = None
    _resting: tuple[Any, dict[Pair, int]] | None = field(
        default=None, init=False, repr=False, compare=False)

    def resting(self) -> Mapping[Pair, int]:
        """``rest``, or :func:`resting_or_stake` of the consensus closure, kept until the
        closure changes."""
        if self.rest is not None:
            return self.rest
        closure = self.closure
        mark = (id(closure), closure.n_positive, closure.n_negative, len(self.result.labels))
        if self._resting is None or self._resting[0] != mark:
            self._resting = (mark, resting_or_stake(closure, self.pool, self.stakes))
        return self._resting[1]

    def stakes(self) -> Mapping[Pair, int]:
        """The pool pairs at stake per asserted label (``stake``, or computed)."""
        if self.stake is not None:
            return self.stake
        return stakes(self.closure, self.result.labels, self.pool)

    @property
    def closure(self) -> Closure:
        closure = self.result.closure
        assert closure is not None, "a consensus without its closure"
        return closure

    def answered(self, pair: Pair, annotator: str | None) -> bool:
        """True when ``annotator`` (None: anonymous) has an answer on ``pair``."""
        return any(ans.annotator == annotator for ans in self.answers.get(pair, ()))

    def checks(self, annotator: str | None) -> tuple[int, int]:
        """The check questions ``annotator`` answered, and how many negative."""
        asked = failed = 0
        for answers in self.answers.values():
            for ans in answers:
                if ans.annotator == annotator and ans.check:
                    asked += 1
                    failed += not ans.positive
        return asked, failed


def stakes(closure: Closure, labels: Mapping[Pair, bool], pool: Collection[Pair]
           ) -> dict[Pair, int]:
    """Per label, the pool pairs decided through it (what a wrong answer there gets wrong).

    A negative ``(a, b)`` decides ``D*(a) × A*(b)`` negative; a positive one ``A*(a) × D*(b)``
    positive and their mirrors negative (closure.md). The count includes pool pairs that
    other labels decide as well: an upper bound, computed for every label at once from the
    closure's dense relation.
    """
    if not labels or not pool:
        return {}
    index = {c: k for k, c in enumerate(closure.concepts)}
    positive, _ = closure.matrices()
    reach = positive | np.eye(closure.n, dtype=bool)  # reach[u, x]: x in D*(u)
    px = np.fromiter((index[p[0]] for p in pool), dtype=np.int64, count=len(pool))
    py = np.fromiter((index[p[1]] for p in pool), dtype=np.int64, count=len(pool))
    keys = list(labels)
    la = np.fromiter((index[p[0]] for p in keys), dtype=np.int64, count=len(keys))
    lb = np.fromiter((index[p[1]] for p in keys), dtype=np.int64, count=len(keys))
    value = np.fromiter((labels[p] for p in keys), dtype=bool, count=len(keys))
    out = np.zeros(len(keys), dtype=np.int64)
    neg = np.flatnonzero(~value)
    if len(neg):
        out[neg] = (reach[la[neg]][:, px] & reach[py][:, lb[neg]].T).sum(axis=1)
    pos = np.flatnonzero(value)
    if len(pos):
        ancestors = reach[:, la[pos]].T  # [k, x]: x in A*(a_k)
        descendants = reach[lb[pos]]  # [k, y]: y in D*(b_k)
        out[pos] = ((ancestors[:, px] & descendants[:, py]).sum(axis=1)
                    + (ancestors[:, py] & descendants[:, px]).sum(axis=1))
    return {p: int(max(c, 1)) for p, c in zip(keys, out.tolist(), strict=True)}


def _label_matrices(closure: Closure) -> tuple[np.ndarray, np.ndarray, list, np.ndarray]:
    """The asserted labels as index arrays: (a, b), their values, the labels, and the
    paths over the positive labels (``paths[x, y]``: label paths from x to y, one for x = y)."""
    asserted = closure.asserted
    keys = list(asserted)
    index = {c: k for k, c in enumerate(closure.concepts)}
    ab = np.array([(index[a], index[b]) for a, b in keys], dtype=np.int64).reshape(-1, 2)
    value = np.fromiter((asserted[p] for p in keys), dtype=bool, count=len(keys))
    step = np.zeros((closure.n, closure.n))
    step[ab[value, 0], ab[value, 1]] = 1.0
    paths = np.linalg.inv(np.eye(closure.n) - step)  # Σ step^k: the labels form a DAG
    return ab, value, keys, paths


def held_alone(closure: Closure, pool: Collection[Pair]) -> tuple[list[Pair], np.ndarray]:
    """The asserted labels, and per label the pool pairs that rest on it alone now.

    Returns the labels (assertion order) and a boolean ``[label, pool pair]`` matrix (pool in
    iteration order). A positive label ``(a, b)`` holds a positive pair ``(x, y)`` alone when
    every path of positive labels from x to y runs through it (the paths through it,
    ``paths[x, a] × paths[b, y]``, are all of them), and the mirror ``(y, x)`` with it where
    no negative label decides that too; only a covering pair of the map (a direct edge)
    holds any. A negative label holds the pairs of its product set that no other negative
    label's holds and no positive mirrors. (The negatives that a positive label's reach
    lends to a negative label's product set are left to the negative label.)
    """
    if not pool or not closure.asserted:
        return list(closure.asserted), np.zeros((len(closure.asserted), len(pool)), dtype=bool)
    index = {c: k for k, c in enumerate(closure.concepts)}
    px = np.fromiter((index[p[0]] for p in pool), dtype=np.int64, count=len(pool))
    py = np.fromiter((index[p[1]] for p in pool), dtype=np.int64, count=len(pool))
    ab, value, keys, paths = _label_matrices(closure)
    positive, _ = closure.matrices()
    reach = positive | np.eye(closure.n, dtype=bool)
    negative = np.zeros((closure.n, closure.n))
    negative[ab[~value, 0], ab[~value, 1]] = 1.0
    r = reach.astype(float)
    cover = r.T @ negative @ r.T  # cover[x, y]: negative labels whose product set holds it
    out = np.zeros((len(keys), len(px)), dtype=bool)
    pos = np.flatnonzero(value)
    for x, y, mirror in ((px, py, False), (py, px, True)):
        held = positive[x, y] & ((cover[y, x] < 0.5) if mirror else True)
        through = paths[x][:, ab[pos, 0]].T * paths[ab[pos, 1]][:, y]  # [k, pool]
        out[pos] |= np.isclose(through, paths[x, y], rtol=1e-9, atol=0.0) & held
    neg = np.flatnonzero(~value)
    if len(neg):
        inside = reach[ab[neg, 0]][:, px] & reach[py][:, ab[neg, 1]].T
        out[neg] = inside & (np.abs(cover[px, py] - 1.0) < 0.5) & ~positive[py, px]
    return keys, out


def resting(closure: Closure, pool: Collection[Pair]) -> dict[Pair, int]:
    """Per asserted label, the pool pairs that rest on it alone now (:func:`held_alone`), at
    least 1: what a wrong answer there gets wrong that no other label holds."""
    keys, held = held_alone(closure, pool)
    return {p: int(max(c, 1)) for p, c in zip(keys, held.sum(axis=1).tolist(), strict=True)}


RESTING_CELLS = 4_000_000
"""The most positive labels × pool pairs :func:`held_alone` computes densely (a float matrix of
that many cells, 32 MB); a larger map counts each label's stake instead."""

RESTING_CONCEPTS = 1_500
"""The most concepts :func:`held_alone` inverts the label graph of (a dense ``n × n``
inverse)."""


def rests_densely(closure: Closure, pool: Collection[Pair]) -> bool:
    """Whether :func:`resting` is computed for this map (:data:`RESTING_CELLS`,
    :data:`RESTING_CONCEPTS`): every AL-CPL domain is, a project of thousands of concepts and
    hundreds of thousands of pool pairs is not."""
    positives = sum(1 for value in closure.asserted.values() if value)
    return closure.n <= RESTING_CONCEPTS and positives * len(pool) <= RESTING_CELLS


def resting_or_stake(closure: Closure, pool: Collection[Pair],
                     stake: Callable[[], Mapping[Pair, int]]) -> dict[Pair, int]:
    """:func:`resting` where :func:`rests_densely`, else ``stake()`` (the pool pairs each
    label decided when it was given: what :func:`asked_stake` counts)."""
    if rests_densely(closure, pool):
        return resting(closure, pool)
    return dict(stake())


StakeRule = Callable[[TeamView], Mapping[Pair, int]]
"""How a policy counts the pool pairs at stake on each asserted label (:attr:`AskPolicy.stake`)."""


def asked_stake(view: TeamView) -> Mapping[Pair, int]:
    """The pool pairs each label's first answer decided when it was given
    (:meth:`TeamView.stakes`)."""
    return view.stakes()


def now_stake(view: TeamView) -> Mapping[Pair, int]:
    """The pool pairs that rest on each label alone now (:func:`resting`; on a map too large
    for it, :func:`rests_densely`, the stake :func:`asked_stake` counts)."""
    return view.resting()


def covering_stake(view: TeamView) -> Mapping[Pair, int]:
    """:func:`asked_stake`, raised to :func:`now_stake` on the positive labels (the covering
    pairs of the map: a wrong one there takes every pair whose only path runs through it)."""
    asked, now = view.stakes(), view.resting()
    labels = view.result.labels
    return {p: max(asked.get(p, 1), now.get(p, 1)) if labels.get(p) else asked.get(p, 1)
            for p in set(asked) | set(now)}


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1.0 - 1e-6)
    return math.log(p / (1.0 - p))


@dataclass(frozen=True)
class AskPolicy:
    """The question-choosing policy of a team (module docstring); pure and reusable."""

    check_rate: float = CHECK_RATE
    threshold: float = SECOND_OPINION_VALUE
    passed_rate: float = CHECK_RATE_PASSED
    stake: StakeRule = asked_stake
    """The pool pairs at stake on a label (:func:`asked_stake`, :func:`now_stake`,
    :func:`covering_stake`)."""
    prior_answers: float = 0.0
    """Answers' worth of :data:`PRIOR_ACCURACY` added to each annotator's estimated accuracy
    where P(wrong) is computed (0: the consensus's estimate as it is), weighed against the
    annotator's answers on pairs that several answered (all the estimate learns from)."""

    def rate(self, view: TeamView, annotator: str | None) -> float:
        """The chance that ``annotator``'s next question is a check question."""
        asked, failed = view.checks(annotator)
        return self.passed_rate if asked - failed > failed else self.check_rate

    def choose(self, view: TeamView, annotator: str | None, *, draw: float = 1.0,
               new_pair: Callable[[], Pair | None] = lambda: None) -> Choice | None:
        """The next question for ``annotator``, or None when there is none for them.

        ``draw`` is a uniform number in [0, 1) from the caller (below :attr:`check_rate`: a
        check question, if one is left).
        """
        found = self.disagreement(view, annotator)
        if found is not None:
            return found
        found = self.second_opinion(view, annotator)
        if found is not None:
            return found
        rate = min(self.rate(view, annotator), self.check_rate)
        if draw < rate:
            found = self.check(view, annotator, draw / rate)
            if found is not None:
                return found
        pair = new_pair()
        return None if pair is None else Choice(pair[0], pair[1], "new")

    def disagreement(self, view: TeamView, annotator: str | None) -> Choice | None:
        """A link of an open disagreement that ``annotator`` has not answered."""
        result = view.result
        best: tuple[float, int] | None = None
        choice = None
        gave = set(result.gave_way)
        stake = view.stakes() if result.contested else {}
        for pair in result.contested:
            links = [pair]
            if pair in gave:
                proof = view.closure.proof(*pair)
                if proof is not None:
                    links += [(lab.a, lab.b) for lab in proof.labels]
            for link in links:
                if view.answered(link, annotator):
                    continue
                key = (abs(result.confidence.get(link, 0.5) - 0.5), -stake.get(link, 1))
                if best is None or key < best:
                    best, choice = key, link
        return None if choice is None else Choice(choice[0], choice[1], "disagreement")

    def accuracies(self, view: TeamView) -> Mapping[str | None, float]:
        """The accuracies P(wrong) reads: the consensus's estimates, drawn towards
        :data:`PRIOR_ACCURACY` by :attr:`prior_answers` answers' worth."""
        accuracy = view.result.accuracy
        if self.prior_answers <= 0:
            return accuracy
        informative: dict[str | None, int] = {}
        for answers in view.answers.values():
            if len(answers) > 1:
                for ans in answers:
                    informative[ans.annotator] = informative.get(ans.annotator, 0) + 1
        weight = self.prior_answers
        return {name: (acc * informative.get(name, 0) + PRIOR_ACCURACY * weight)
                / (informative.get(name, 0) + weight) for name, acc in accuracy.items()}

    def p_wrong(self, view: TeamView, pair: Pair, value: bool,
                suspects: Mapping[str | None, float],
                accuracy: Mapping[str | None, float] | None = None) -> float:
        """P(the consensus value of ``pair`` is wrong): its answers' accuracies (default
        :meth:`accuracies`) and the model's probability, Bayes (independent answers)."""
        accuracy = self.accuracies(view) if accuracy is None else accuracy
        odds = _logit(view.proba.get(pair, 0.5)) * (1 if value else -1)
        for ans in view.answers.get(pair, ()):
            acc = accuracy.get(ans.annotator, PRIOR_ACCURACY)
            if not ans.positive and ans.annotator in suspects:
                acc = min(acc, suspects[ans.annotator])
            acc = min(max(acc, ACCURACY_RANGE[0]), ACCURACY_RANGE[1])
            odds += _logit(acc) * (1 if ans.positive == value else -1)
        return 1.0 / (1.0 + math.exp(odds))

    def suspects(self, view: TeamView) -> dict[str | None, float]:
        """Annotators who failed a check, with the accuracy their negatives are taken at."""
        out: dict[str | None, float] = {}
        for name in view.result.accuracy:
            asked, failed = view.checks(name)
            if failed:
                out[name] = 1.0 - (failed + 0.1) / (asked + 1.0)
        return out

    def second_opinion(self, view: TeamView, annotator: str | None) -> Choice | None:
        """A re-asked pair ``annotator`` has not answered, else the decided pair of greatest
        value of information, if it reaches the threshold."""
        result = view.result
        for pair in view.reask:
            if pair not in result.contested and not view.answered(pair, annotator):
                return Choice(pair[0], pair[1], "second-opinion")
        suspects = self.suspects(view)
        down, _, _, _ = view.closure.reach()
        index = {c: k for k, c in enumerate(view.closure.concepts)}
        best, choice = self.threshold, None
        stake = self.stake(view)
        accuracy = self.accuracies(view)
        doubtful = annotator in suspects  # their "no" says nothing: no negatives for them
        for pair, value in result.labels.items():
            if pair in result.contested or view.answered(pair, annotator):
                continue
            if doubtful and not value:
                continue
            wrong = self.p_wrong(view, pair, value, suspects, accuracy)
            if not value and any(a.annotator in suspects for a in view.answers.get(pair, ())):
                if down[index[pair[1]]] >> index[pair[0]] & 1:
                    continue  # b precedes a: no path can make (a, b) positive
            score = wrong * stake.get(pair, 1)
            if score >= best:
                best, choice = score, pair
        return None if choice is None else Choice(choice[0], choice[1], "second-opinion")

    def check(self, view: TeamView, annotator: str | None, draw: float) -> Choice | None:
        """A pool pair decided positive only through two or more steps, unanswered by
        ``annotator`` (``draw`` in [0, 1) picks among them)."""
        candidates = [p for p in check_candidates(view.closure, view.answers)
                      if p in view.pool and not view.answered(p, annotator)]
        if not candidates:
            return None
        pair = candidates[min(int(draw * len(candidates)), len(candidates) - 1)]
        return Choice(pair[0], pair[1], "new", check=True)
