"""A consensus rebuilt from stored accuracies, without EM: a process that holds no fit.

:func:`reasoning.consensus.consensus` fits every annotator's accuracy by EM and re-solves
every pair (seconds at 100,000 answers). A service keeps the accuracies of its last full fit
(``docs/consensus.md``, "Incremental consensus"); :func:`rebuild` turns them, the answers and
the labels as they stand back into a :class:`~reasoning.consensus.Consensus` in one
vectorised E-step:

* each answered pair's posterior from its counting answers with the accuracies held fixed
  (as :func:`reasoning.consensus.incremental.pair_state` computes it for one pair; an
  annotator the accuracies do not name counts at ``prior``), a reviewer's last answer final;
* its likelier value, whether it is a tie (:data:`~reasoning.consensus.TIE_DELTA`), settled
  (:data:`~reasoning.consensus.SETTLE_ODDS`, :data:`~reasoning.consensus.SETTLE_ANSWERS`)
  and contested, as :func:`~reasoning.consensus.consensus` defines them;
* the labels are the closure's asserted labels on the answered pairs (no greedy runs): a
  pair whose likelier value the closure contradicts and that carries no label *gave way*; one
  whose label is the opposite of its answers' value (a label held for a refit) is contested.

Rebuilt from the accuracies of ``consensus(answers)`` and the closure of its labels, the
result is that consensus: the same labels, values, ties, pairs that gave way, contested pairs
and accuracies; the posteriors agree to the EM's tolerance (``consensus`` keeps the posterior
of its last E-step, computed with the accuracies before its last M-step).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

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

__all__ = ["rebuild"]

Pair = tuple[Hashable, Hashable]


@dataclass(frozen=True)
class _Items:
    """The counting answers as aligned arrays over the answered pairs (items)."""

    pairs: list[Pair]
    plain: list[Vote]
    item: np.ndarray  # per plain answer: its item
    positive: np.ndarray  # per plain answer: its value
    weight: np.ndarray  # per plain answer: its annotator's log-odds
    reviewed: np.ndarray  # per item: NaN, or the reviewer's value


def _items(answers: Sequence[Vote], accuracy: Mapping[str | None, float],
           prior: float) -> _Items:
    plain, review = effective_answers(answers)
    index: dict[Pair, int] = {}
    people: dict[str | None, int] = {}
    m = len(plain)
    keys = [(v.a, v.b) for v in plain]
    names = [v.annotator for v in plain]
    index.update((pair, k) for k, pair in enumerate(dict.fromkeys(keys)))
    people.update((name, k) for k, name in enumerate(dict.fromkeys(names)))
    item = np.fromiter(map(index.__getitem__, keys), np.int64, m)
    who = np.fromiter(map(people.__getitem__, names), np.int64, m)
    for pair in review:
        index.setdefault(pair, len(index))
    weight = log_odds(np.clip([float(accuracy.get(name, prior)) for name in people],
                              *ACCURACY_RANGE))
    reviewed = np.full(len(index), np.nan)
    for pair, ans in review.items():
        reviewed[index[pair]] = float(ans.positive)
    return _Items(list(index), plain, item, np.fromiter((v.positive for v in plain), bool, m),
                  weight[who] if m else np.zeros(0), reviewed)


def _concept_index(closure: Closure, pairs: Sequence[Pair]) -> tuple[np.ndarray, np.ndarray]:
    """The closure's indices of each pair's concepts; ValueError for a pair it cannot hold."""
    known = {c: k for k, c in enumerate(closure.concepts)}
    for a, b in pairs:
        if a not in known or b not in known or a == b:
            raise ValueError(f"invalid pair ({a!r}, {b!r})")
    return (np.fromiter((known[a] for a, _ in pairs), np.int64, len(pairs)),
            np.fromiter((known[b] for _, b in pairs), np.int64, len(pairs)))


def rebuild(accuracy: Mapping[str | None, float], answers: Sequence[Vote], closure: Closure,
            *, prior: float = 0.9) -> Consensus:
    """The consensus of ``answers`` with ``accuracy`` held fixed and ``closure``'s labels.

    Parameters
    ----------
    accuracy : mapping
        Per annotator (None: anonymous) the accuracy of a full fit
        (:attr:`Consensus.accuracy`); kept as the result's.
    answers : sequence of Vote
        Every answer that counts (per annotator and pair the latest counts, a reviewer's
        last answer is final for its pair, as in :func:`~reasoning.consensus.consensus`).
    closure : Closure
        The closure of the labels as they stand, kept on the result (not copied): its
        asserted labels on the answered pairs are the result's labels.
    prior : float
        The accuracy of an annotator ``accuracy`` does not name.

    Returns
    -------
    Consensus

    Examples
    --------
    >>> c = Closure("xyz")
    >>> _ = c.add_label("x", "y", True)
    >>> fit = rebuild({"ann": 0.9, "bob": 0.7},
    ...               [Vote("x", "y", True, "ann"), Vote("x", "y", False, "bob")], c)
    >>> fit.labels, round(fit.posterior[("x", "y")], 3), sorted(fit.contested)
    ({('x', 'y'): True}, 0.794, [('x', 'y')])
    """
    items = _items(answers, accuracy, prior)
    n = len(items.pairs)
    sign = np.where(items.positive, 1.0, -1.0)
    llr = np.bincount(items.item, weights=sign * items.weight, minlength=n)
    reviewed = ~np.isnan(items.reviewed)
    post = np.where(reviewed, np.nan_to_num(items.reviewed), 1.0 / (1.0 + np.exp(-llr)))
    yes = np.bincount(items.item, weights=items.positive, minlength=n)
    no = np.bincount(items.item, weights=~items.positive, minlength=n)
    split = (yes > 0) & (no > 0)
    tied = (np.abs(post - 0.5) <= TIE_DELTA + 1e-12) & split & ~reviewed
    value = post >= 0.5
    unsettled = (np.abs(llr) < np.log(SETTLE_ODDS)) | (np.where(value, yes, no)
                                                         < SETTLE_ANSWERS)
    state = closure.values_by_index(*_concept_index(closure, items.pairs))
    asserted = closure.asserted
    labels = {p: asserted[p] for p in items.pairs if p in asserted}
    labelled = np.fromiter(map(labels.__contains__, items.pairs), bool, n)
    gave = (state >= 0) & ((state == 1) != value) & ~labelled & ~tied
    held = labelled & ((state == 1) != value) & ~tied
    disputed = ((split & (unsettled | tied)) | gave | held) & ~reviewed
    return _consensus(items, closure, labels, accuracy, post, state, tied, gave, disputed)


def _consensus(items: _Items, closure: Closure, labels: dict[Pair, bool],
               accuracy: Mapping[str | None, float], post: np.ndarray, state: np.ndarray,
               tied: np.ndarray, gave: np.ndarray, disputed: np.ndarray) -> Consensus:
    """The result's dictionaries from the per-item arrays (as ``consensus`` builds them)."""
    pairs = items.pairs
    closed = state == 1
    conf = np.where(state < 0, np.maximum(post, 1.0 - post), np.where(closed, post, 1.0 - post))
    contested: dict[Pair, list[Vote]] = {pairs[k]: [] for k in np.flatnonzero(disputed)}
    for k in np.flatnonzero(disputed[items.item]).tolist():  # their answers, in order
        ans = items.plain[k]
        contested[(ans.a, ans.b)].append(ans)
    decided = np.flatnonzero(state >= 0).tolist()
    return Consensus(
        labels=labels,
        confidence=dict(zip(pairs, conf.tolist(), strict=True)),
        accuracy=dict(accuracy),
        gave_way=[pairs[k] for k in np.flatnonzero(gave)],
        contested=contested,
        values=dict(zip([pairs[k] for k in decided], closed[decided].tolist(), strict=True)),
        closure=closure,
        tied=[pairs[k] for k in np.flatnonzero(tied)],
        posterior=dict(zip(pairs, post.tolist(), strict=True)),
    )
