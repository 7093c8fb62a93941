"""A bounded local repair of a consensus after answers on one pair, the accuracies held fixed.

:func:`consensus` refits every annotator's accuracy and re-solves every pair; a new answer on
one pair changes that pair's evidence first and everything else only through the accuracies
(one answer among thousands moves them by about one answer's worth) and through the closure.
:func:`repair` is the warm start: with the accuracies of the last full fit held fixed it
computes the changed pair exactly as :func:`consensus` would with those accuracies (its
posterior, whether it is a tie, settled, contested) and the label change limited to it, the
other labels fixed:

* its likelier value is asserted unless the closure of the *other* labels (``rest``) decides
  the opposite: then it gives way (no label, contested), as the greedy treats a weaker label
  against the stronger ones it cannot move;
* a tie asserts nothing; a pair whose label must go is retracted (``retract``) or given its
  other value (``flip``).

The bound (``docs/consensus.md``, "Incremental consensus"): outside the pending pairs (the
pairs repaired since the last full fit) the labels are exactly the last full fit's; a
pending pair carries :func:`repair`'s decision. A full recompute may move a pending pair,
and elsewhere only a pair whose decision depends on the accuracies or on the greedy's order:
one answered both ways, or one that gave way (in the last fit or in the recompute).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from reasoning.closure import Closure
from reasoning.consensus.core import (
    SETTLE_ANSWERS,
    SETTLE_ODDS,
    TIE_DELTA,
    Consensus,
    Vote,
    effective_answers,
)
from reasoning.consensus.em import ACCURACY_RANGE, log_odds

__all__ = ["Action", "PairState", "Repair", "accuracy_of", "pair_state", "repair"]

Pair = tuple[Hashable, Hashable]
Action = Literal["keep", "assert", "retract", "flip"]


@dataclass(frozen=True)
class PairState:
    """One pair's consensus from its answers, the accuracies fixed.

    ``posterior``: P(positive); ``value``: the likelier value (None: a tie, or no answer);
    ``tied``, ``split`` (answered both ways), ``settled`` (:data:`SETTLE_ODDS`,
    :data:`SETTLE_ANSWERS`), ``reviewed`` (a reviewer's answer decides it); ``answers``:
    the answers that count on it (per annotator the latest, the reviewer's last).
    """

    posterior: float
    value: bool | None
    tied: bool
    split: bool
    settled: bool
    reviewed: bool
    answers: tuple[Vote, ...]

    @property
    def disputed(self) -> bool:
        """Contested by its answers alone (before any giving way)."""
        return self.split and (not self.settled or self.tied) and not self.reviewed


def accuracy_of(base: Consensus, annotator: str | None, prior: float = 0.9) -> float:
    """The accuracy ``base`` holds for ``annotator``; for one it has not seen, ``prior``."""
    found = base.accuracy.get(annotator)
    return float(prior if found is None else found)


def pair_state(votes: Sequence[Vote], base: Consensus, prior: float = 0.9) -> PairState:
    """The consensus of one pair's ``votes`` with ``base``'s accuracies (the E-step of
    :func:`reasoning.consensus.em.fit_one_coin` for one item, the M-step skipped)."""
    plain, review = effective_answers(votes)
    if review:
        last = next(iter(review.values()))
        post = 1.0 if last.positive else 0.0
        return PairState(post, last.positive, False, _split(plain), True, True,
                         (*plain, last))
    if not plain:
        return PairState(0.5, None, False, False, False, False, ())
    weight = log_odds(np.clip([accuracy_of(base, v.annotator, prior) for v in plain],
                              *ACCURACY_RANGE))
    sign = np.array([1.0 if v.positive else -1.0 for v in plain])
    llr = float((sign * weight).sum())
    post = float(1.0 / (1.0 + np.exp(-llr)))
    split = _split(plain)
    tied = split and bool(abs(post - 0.5) <= TIE_DELTA + 1e-12)
    value = bool(post >= 0.5)
    support = sum(1 for v in plain if v.positive == value)
    settled = bool(abs(llr) >= np.log(SETTLE_ODDS)) and support >= SETTLE_ANSWERS
    return PairState(float(post), None if tied else value, tied, split, settled, False,
                     tuple(plain))


def _split(plain: Sequence[Vote]) -> bool:
    return len({v.positive for v in plain}) > 1


@dataclass(frozen=True)
class Repair:
    """What :func:`repair` decided for one pair.

    ``label``: the pair's label after it (None: none); ``action``: what becomes of the label
    it had; ``gave_way``: its likelier value contradicts the other labels; ``contested``: it
    is in dispute (its disagreement open); ``fit``: the base consensus with this pair
    repaired (accuracies unchanged); ``held``: the label was kept for a refit to change
    (``hold``).
    """

    pair: Pair
    state: PairState
    label: bool | None
    action: Action
    gave_way: bool
    contested: bool
    fit: Consensus
    held: bool = False


def _action(current: bool | None, label: bool | None) -> Action:
    if current == label:
        return "keep"
    if current is None:
        return "assert"
    return "retract" if label is None else "flip"


def repair(base: Consensus, votes: Sequence[Vote], pair: Pair, current: bool | None,
           rest: bool | None, *, closure: Closure | None = None, hold: bool = False,
           prior: float = 0.9) -> Repair:
    """The pair's consensus after its answers changed, the rest of ``base`` held fixed.

    Parameters
    ----------
    base : Consensus
        The last full fit (its accuracies are used, not refitted).
    votes : sequence of Vote
        Every answer that counts on ``pair``.
    pair : tuple
        The changed pair.
    current : bool or None
        The pair's asserted label now (None: none).
    rest : bool or None
        The value the closure of every *other* asserted label gives the pair (None:
        undecided).
    closure : Closure, optional
        The closure after the repair, kept on the returned fit.
    hold : bool
        Keep the ``current`` label where the decision would retract or flip it (that change
        left to a full refit, which replays the closure): the pair is then contested, and
        ``held`` says so.
    prior : float
        The accuracy of an annotator ``base`` has not seen.

    Examples
    --------
    >>> from reasoning.consensus import consensus
    >>> base = consensus([Vote("x", "y", True, "ann")], "xyz")
    >>> late = [Vote("x", "y", True, "ann"), Vote("x", "y", False, "bob")]
    >>> fixed = repair(base, late, ("x", "y"), True, None)
    >>> fixed.label, fixed.action, fixed.state.tied, fixed.contested
    (None, 'retract', True, True)
    """
    state = pair_state(votes, base, prior)
    gave = state.value is not None and rest is not None and rest != state.value
    label = None if gave or state.value is None else state.value
    contested = (state.disputed or gave) and not state.reviewed
    held = hold and current is not None and label != current
    if held:
        label, contested = current, True
    fit = _patched(base, pair, state, label, gave, contested, rest, closure)
    return Repair(pair, state, label, _action(current, label), gave, contested, fit, held)


def _patched(base: Consensus, pair: Pair, state: PairState, label: bool | None, gave: bool,
             contested: bool, rest: bool | None, closure: Closure | None) -> Consensus:
    """``base`` with ``pair``'s entries replaced by the repaired ones."""
    labels = {p: v for p, v in base.labels.items() if p != pair}
    if label is not None:
        labels[pair] = label
    value = label if label is not None else rest
    values = {p: v for p, v in base.values.items() if p != pair}
    if value is not None:
        values[pair] = value
    post = state.posterior
    strength = max(post, 1.0 - post)
    confidence = dict(base.confidence)
    confidence[pair] = strength if value is None else (post if value else 1.0 - post)
    posterior = {**base.posterior, pair: post}
    disputes = {p: v for p, v in base.contested.items() if p != pair}
    if contested:
        disputes[pair] = list(state.answers)
    return replace(
        base, labels=labels, values=values, confidence=confidence, posterior=posterior,
        contested=disputes, closure=closure if closure is not None else base.closure,
        gave_way=[p for p in base.gave_way if p != pair] + ([pair] if gave else []),
        tied=[p for p in base.tied if p != pair] + ([pair] if state.tied else []))
