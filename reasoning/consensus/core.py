"""The consensus of a team's answers: one consistent set of labels that best explains them.

:func:`consensus` runs in three steps (``docs/consensus.md``):

1. **Reliability**: a one-coin Dawid–Skene model fitted by EM (:mod:`~reasoning.consensus.em`)
   gives each annotator an accuracy and each answered pair a posterior. A reviewer's answer is
   final for its pair (the later of two stands) and scores the annotators who answered it.
2. **Consistency**: the pairs' most likely values are added to a
   :class:`~reasoning.closure.Closure` by descending confidence (reviewer labels first, pairs
   answered only as check questions last); a value that contradicts the labels added before it
   *gives way*: the closure's value stands instead.
3. **The order as evidence**: an answer on a pair that gave way contradicts the closure of the
   stronger labels, and a check question's answer agrees with the labels it checks or not, so
   the fit is run once more with the closure's value as those pairs' truth (it counts for or
   against their annotators), and step 2 again.

The labels are always consistent (a strict partial order's labels); they are not an exact
maximum-likelihood optimum, which is NP-hard in general (the greedy is a heuristic).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from reasoning.closure import Closure, Label, bit_positions
from reasoning.consensus.em import Fit, fit_one_coin

__all__ = [
    "SETTLE_ANSWERS",
    "SETTLE_ODDS",
    "TIE_DELTA",
    "Vote",
    "Consensus",
    "check_candidates",
    "consensus",
    "effective_answers",
    "p_wrong",
]

SETTLE_ODDS = 4.0
"""A pair answered both ways is settled when the answers' likelihood ratio for the winning
value reaches these odds and :data:`SETTLE_ANSWERS` answers give it (two agreeing answers
against one at accuracy 0.8 do, 1:1 never)."""

SETTLE_ANSWERS = 2
"""A pair answered both ways is settled only when at least this many answers give its likelier
value: one answer against one stays contested however the annotators are rated (it is decided
for the better rated one, unless a tie), and a third answer or a reviewer settles it."""

TIE_DELTA = 0.1
"""A pair answered both ways whose posterior lies within ``[0.5 - TIE_DELTA, 0.5 + TIE_DELTA]``
(odds of at most 1.5 : 1 either way) is a tie: its answers leave it undecided between the two
values, so it is not asserted (the closure of the other labels may still decide it) and it stays
contested. One "yes" against one "no" of annotators of equal standing is a tie; so is one
against one between estimated accuracies of 0.9 and 0.86. A pair answered once is never a tie
(its posterior is its annotator's accuracy; second opinions and check questions deal with
annotators estimated near one half)."""

_ROUNDS = 2
"""The fits: one on the answers, one more with the order's evidence when it has any."""

Pair = tuple[Hashable, Hashable]


@dataclass(frozen=True)
class Vote:
    """One answer of one annotator on the pair ``(a, b)``.

    ``annotator`` None is anonymous (two anonymous answers are never each other's second
    opinion: the later replaces the earlier); ``reviewer`` marks a resolution, final for its
    pair (the later of two stands); ``check`` an answer to a check question; ``order`` the
    arrival order (answer id or time).
    """

    a: Hashable
    b: Hashable
    positive: bool
    annotator: str | None
    reviewer: bool = False
    check: bool = False
    order: int = 0


@dataclass(frozen=True)
class Consensus:
    """The consensus of a set of answers.

    Attributes
    ----------
    labels : dict
        The asserted labels ``(a, b) -> positive``: every answered pair but those that gave
        way and the ties; consistent.
    confidence : dict
        Per answered pair, the posterior probability of its consensus value (1.0 for a
        reviewer's; below one half for a pair that gave way; for a tie the closure leaves
        undecided, the posterior of the likelier value, at most ``0.5 + TIE_DELTA``).
    accuracy : dict
        Per annotator (None: anonymous), the estimated probability that an answer is correct.
    gave_way : list
        The answered pairs whose most likely value contradicted stronger labels.
    contested : dict
        The pairs in dispute and the answers on them: answered both ways and not settled
        (:data:`SETTLE_ODDS`, :data:`SETTLE_ANSWERS`; a tie never is), or gave way; never one
        a reviewer resolved.
    values : dict
        Per answered pair that the closure of ``labels`` decides, its value there (a tie the
        other labels do not decide is absent).
    tied : list
        The answered pairs whose answers leave them a tie (:data:`TIE_DELTA`): not in
        ``labels``; contested when answered both ways.
    closure : Closure or None
        The closure of ``labels`` (do not mutate; :meth:`Closure.copy` first).
    posterior : dict
        Per answered pair, the probability that it is positive given its answers (1.0 or 0.0
        for a reviewer's).
    """

    labels: dict[Pair, bool]
    confidence: dict[Pair, float]
    accuracy: dict[str | None, float]
    gave_way: list[Pair]
    contested: dict[Pair, list[Vote]]
    values: dict[Pair, bool] = field(default_factory=dict)
    closure: Closure | None = field(default=None, compare=False, repr=False)
    tied: list[Pair] = field(default_factory=list)
    posterior: dict[Pair, float] = field(default_factory=dict)


def effective_answers(answers: Iterable[Vote]) -> tuple[list[Vote], dict[Pair, Vote]]:
    """The answers that count: per (annotator, pair) the latest, and per pair the latest
    reviewer answer (returned apart)."""
    latest: dict[tuple[str | None, Pair], Vote] = {}
    review: dict[Pair, Vote] = {}
    for ans in answers:
        pair = (ans.a, ans.b)
        if ans.reviewer:
            if pair not in review or ans.order >= review[pair].order:
                review[pair] = ans
            continue
        key = (ans.annotator, pair)
        if key not in latest or ans.order >= latest[key].order:
            latest[key] = ans
    return list(latest.values()), review


class _Greedy(Closure):
    """A closure that takes labels by concept index and says whether each one fit."""

    def offer(self, i: int, j: int, positive: bool) -> bool:
        """Assert ``(i, j)`` unless the closure holds the opposite (then False, no change)."""
        current = self._value(i, j)
        if current is not None:
            if current != positive:
                return False
            if (i, j) not in self._asserted:
                self._record(i, j, positive)
            return True
        self._record(i, j, positive)
        if positive:
            self._add_positive(i, j)
        else:
            self._add_negative(i, j)
        return True


@dataclass
class _Table:
    """The answers as aligned arrays over items (pairs) and annotators."""

    pairs: list[Pair]
    annotators: list[str | None]
    item: np.ndarray
    annotator: np.ndarray
    positive: np.ndarray
    reviewed: np.ndarray  # per item: NaN, or the reviewer's value
    check_only: np.ndarray  # per item: every answer on it is a check answer
    answers: list[Vote]
    ia: np.ndarray  # per item: the concept index of a
    ib: np.ndarray  # per item: the concept index of b
    review_order: list[int]  # the reviewed items, the latest resolution first


def _table(answers: Sequence[Vote], known: dict[Hashable, int]) -> _Table:
    plain, review = effective_answers(answers)
    items: dict[Pair, int] = {}
    people: dict[str | None, int] = {}
    item, who, value = [], [], []
    for ans in [*plain, *review.values()]:
        if ans.a not in known or ans.b not in known or ans.a == ans.b:
            raise ValueError(f"invalid pair ({ans.a!r}, {ans.b!r})")
        items.setdefault((ans.a, ans.b), len(items))
    plain_only = [False] * len(items)
    check_only = [True] * len(items)
    for ans in plain:
        k = items[(ans.a, ans.b)]
        item.append(k)
        who.append(people.setdefault(ans.annotator, len(people)))
        value.append(ans.positive)
        check_only[k] = check_only[k] and ans.check
        plain_only[k] = True
    reviewed = np.full(len(items), np.nan)
    for pair, ans in review.items():
        reviewed[items[pair]] = float(ans.positive)
    check = np.array(check_only, dtype=bool) & np.array(plain_only, dtype=bool)
    ia = np.array([known[p[0]] for p in items], dtype=np.int64)
    ib = np.array([known[p[1]] for p in items], dtype=np.int64)
    order = sorted(review.values(), key=lambda ans: -ans.order)
    return _Table(list(items), list(people), np.array(item, dtype=np.int64),
                  np.array(who, dtype=np.int64), np.array(value, dtype=bool), reviewed,
                  check, plain, ia, ib, [items[(ans.a, ans.b)] for ans in order])


def _split(table: _Table) -> np.ndarray:
    """Per item, whether it has answers both ways."""
    n = len(table.pairs)
    return (np.bincount(table.item, weights=table.positive, minlength=n) > 0) & (
        np.bincount(table.item, weights=~table.positive, minlength=n) > 0)


def _tied(table: _Table, fit: Fit) -> np.ndarray:
    """Per item, whether its answers leave it a tie (:data:`TIE_DELTA`): answered both ways,
    no reviewer's resolution, the posterior near one half."""
    reviewed = ~np.isnan(table.reviewed)
    return (np.abs(fit.posterior - 0.5) <= TIE_DELTA + 1e-12) & _split(table) & ~reviewed


def _unsettled(table: _Table, fit: Fit) -> np.ndarray:
    """Per item, whether its answers have not settled it: the likelihood ratio of the likelier
    value is below :data:`SETTLE_ODDS`, or fewer than :data:`SETTLE_ANSWERS` answers give it."""
    n = len(table.pairs)
    yes = np.bincount(table.item, weights=table.positive, minlength=n)
    no = np.bincount(table.item, weights=~table.positive, minlength=n)
    support = np.where(fit.posterior >= 0.5, yes, no)
    return (np.abs(fit.llr) < np.log(SETTLE_ODDS)) | (support < SETTLE_ANSWERS)


def _consistent(table: _Table, fit: Fit, concepts: Sequence[Hashable], review_order: list[int],
                *, try_bulk: bool = True) -> tuple[Closure, list[int]]:
    """Add every item's most likely value by descending confidence: the closure, and the
    items that gave way."""
    value = fit.posterior >= 0.5
    strength = np.maximum(fit.posterior, 1.0 - fit.posterior)
    reviewed = ~np.isnan(table.reviewed)
    rest = np.flatnonzero(~reviewed & ~_tied(table, fit))
    rest = rest[np.lexsort((rest, -strength[rest], table.check_only[rest]))]
    order = review_order + rest.tolist()
    pairs = table.pairs
    labels = [Label(pairs[k][0], pairs[k][1], bool(value[k])) for k in order]
    if try_bulk:  # most sets hold no contradiction: nothing gives way
        fast = Closure.closed(labels, concepts)
        if fast is not None:
            return fast, []
    closure = _Greedy(concepts)
    gave: list[int] = []
    ia, ib = table.ia.tolist(), table.ib.tolist()
    for k in order:
        if not closure.offer(ia[k], ib[k], bool(value[k])):
            gave.append(k)  # a stronger label decided the opposite: this one gives way
    return closure, gave


def consensus(answers: Sequence[Vote], concepts: Sequence[Hashable], *,
              weighted: bool = True, prior: float = 0.9) -> Consensus:
    """The consistent labels that best explain ``answers`` (module docstring: the algorithm).

    Parameters
    ----------
    answers : sequence of Vote
    concepts : sequence of hashable
        Every concept an answer may name.
    weighted : bool
        False: every annotator is taken as equally reliable (one shared accuracy).
    prior : float
        The prior accuracy of an annotator.

    Returns
    -------
    Consensus

    Examples
    --------
    >>> c = consensus([Vote("x", "y", True, "ann"), Vote("x", "y", True, "bob"),
    ...                Vote("x", "y", False, "cy")], "xyz")
    >>> c.labels, sorted(c.contested)
    ({('x', 'y'): True}, [])
    """
    known = {c: k for k, c in enumerate(dict.fromkeys(concepts))}
    table = _table(answers, known)
    reviewed = ~np.isnan(table.reviewed)
    scored = np.full(len(table.pairs), np.nan)
    gave: list[int] = []
    seen: set[tuple[int, ...]] = set()
    for _ in range(_ROUNDS):
        fit = fit_one_coin(table.item, table.annotator, table.positive,
                           n_items=len(table.pairs), n_annotators=len(table.annotators),
                           evidence=table.reviewed, scored=scored, weighted=weighted,
                           prior=prior)
        closure, gave = _consistent(table, fit, concepts, table.review_order,
                                    try_bulk=not seen)
        key = tuple(sorted(gave))
        if key in seen or (not gave and not table.check_only.any()):
            break
        seen.add(key)
        scored = _order_evidence(table, fit, gave)
    return _result(table, fit, closure, gave, reviewed)


def _order_evidence(table: _Table, fit: Fit, gave: list[int]) -> np.ndarray:
    """What the order says of some answers: a pair that gave way has the closure's value (the
    opposite of its answers' best), and a pair answered only as a check question the value of
    the labels it checks (it was added last: its own where they leave it free)."""
    scored = np.full(len(table.pairs), np.nan)
    value = fit.posterior >= 0.5
    scored[table.check_only] = value[table.check_only]
    for k in gave:
        scored[k] = float(not value[k])
    return scored


def _result(table: _Table, fit: Fit, closure: Closure, gave: list[int],
            reviewed: np.ndarray) -> Consensus:
    pairs = table.pairs
    state = closure.values_by_index(table.ia, table.ib)  # 1, 0, or -1 (undecided)
    closed = state == 1
    post = np.where(reviewed, np.nan_to_num(table.reviewed), fit.posterior)
    conf = np.where(state < 0, np.maximum(post, 1.0 - post), np.where(closed, post, 1.0 - post))
    tied = _tied(table, fit)
    skip = set(gave) | set(np.flatnonzero(tied).tolist())
    labels = {p: bool(closed[k]) for k, p in enumerate(pairs) if k not in skip}
    both = _split(table)
    unsettled = _unsettled(table, fit) | tied
    disputed = ((both & unsettled) | np.isin(np.arange(len(pairs)), gave)) & ~reviewed
    contested: dict[Pair, list[Vote]] = {pairs[k]: [] for k in np.flatnonzero(disputed)}
    for ans in table.answers:
        bucket = contested.get((ans.a, ans.b))
        if bucket is not None:
            bucket.append(ans)
    return Consensus(
        labels=labels,
        confidence={p: float(conf[k]) for k, p in enumerate(pairs)},
        accuracy={name: float(fit.accuracy[j]) for j, name in enumerate(table.annotators)},
        gave_way=[pairs[k] for k in gave],
        contested=contested,
        values={p: bool(closed[k]) for k, p in enumerate(pairs) if state[k] >= 0},
        closure=closure,
        tied=[pairs[k] for k in np.flatnonzero(tied)],
        posterior={p: float(post[k]) for k, p in enumerate(pairs)},
    )


def p_wrong(accuracy: float, p_model: float | None, positive: bool) -> float:
    """P(an answer is wrong) given its annotator's accuracy and a model's P(positive).

    Bayes with the model's probability as the prior of the pair's truth (one half without a
    model).

    Examples
    --------
    >>> round(p_wrong(0.9, None, True), 3), round(p_wrong(0.9, 0.1, True), 3)
    (0.1, 0.5)
    """
    p = 0.5 if p_model is None else min(max(float(p_model), 1e-6), 1.0 - 1e-6)
    prior_right = p if positive else 1.0 - p
    wrong = (1.0 - accuracy) * (1.0 - prior_right)
    right = accuracy * prior_right
    return wrong / (wrong + right) if wrong + right > 0 else 0.5


def check_candidates(closure: Closure, asserted: Iterable[Pair]) -> list[Pair]:
    """The pairs decided positive only through two or more steps: check questions.

    Positive in ``closure``, not in ``asserted`` (nor asserted in the closure), and not an edge
    of the transitive reduction of the positives (some concept lies strictly between).

    Examples
    --------
    >>> c = Closure("abc")
    >>> _ = c.add_label("a", "b", True), c.add_label("b", "c", True)
    >>> check_candidates(c, [])
    [('a', 'c')]
    """
    down, up, _, _ = closure.reach()
    names = closure.concepts
    index = {c: k for k, c in enumerate(names)}
    skip = {(index[a], index[b]) for a, b in asserted if a in index and b in index}
    skip |= {(index[a], index[b]) for a, b in closure.asserted}
    out = []
    for x, row in enumerate(down):
        if not row:
            continue
        for y in bit_positions(row):
            if down[x] & up[y] and (x, y) not in skip:
                out.append((names[x], names[y]))
    return out
