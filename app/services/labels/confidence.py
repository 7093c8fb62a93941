"""How sure each decided pair is, and whether it is contested (``docs/teams.md``).

A decided pair's **confidence**:

* an asserted pair: its label's. In ``consensus`` the posterior probability of the label's
  value given the live answers on its pair (:attr:`reasoning.consensus.Consensus.posterior`,
  the consensus of every live answer that counts, reviewers' resolutions final, excluded
  annotators' answers left out). In ``strict``, 1.0 when
  every live answer on the pair gives the label's value (``strict`` trusts its answers and
  estimates no one), else that same posterior (answers it refused, or answers from a time in
  ``consensus``, count against it). A label with no live answer (imported before answers were
  kept) is 1.0;
* an inferred pair: the weakest label of its strongest proof
  (:func:`reasoning.consensus.confidence.derived_confidence`).

**Contested**: the pair has an open disagreement.

Everything is computed from what is stored (the live labels, the live answers, the policy and
the open disagreements), never from a model or an earlier fit, so that an export, an import of
it and an export again give the same numbers. The computation (one consensus and one
``O(n³)`` bottleneck closure) is cached per project until the answers or the labels change.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.services.team import (
    LiveAnswer,
    answers_fingerprint,
    counting,
    excluded_annotators,
    live_answers,
    votes,
)
from models import Answer, AssertedLabel, Concept, Disagreement, Project
from reasoning.closure import Closure, Label
from reasoning.consensus import consensus
from reasoning.consensus.confidence import Derived, derived_confidence

__all__ = ["PairConfidence", "label_confidences", "pair_confidence"]

Pair = tuple[int, int]


@dataclass(frozen=True)
class PairConfidence:
    """Each decided pair's confidence and the contested pairs of one project (by concept
    ids). :meth:`of` is asked of decided pairs only."""

    derived: Derived
    contested: frozenset[Pair]

    def of(self, a_id: int, b_id: int) -> float | None:
        """The confidence of the decided pair ``(a_id, b_id)`` (None: undecided), rounded to
        six digits so that every export writes the same text."""
        value = self.derived.of(a_id, b_id)
        return None if value is None else round(value, 6)

    def is_contested(self, a_id: int, b_id: int) -> bool:
        return (a_id, b_id) in self.contested


def label_confidences(labels: Mapping[Pair, bool], rows: Sequence[LiveAnswer], policy: str,
                      concepts: Sequence[int]) -> dict[Pair, float]:
    """Per asserted pair, its label's confidence (module docstring) from the live ``rows``."""
    by_pair: dict[Pair, list[LiveAnswer]] = {}
    for row in rows:
        by_pair.setdefault((row.a_id, row.b_id), []).append(row)

    def trusted(pair: Pair, value: bool) -> bool:
        answers = by_pair.get(pair, [])
        return not answers or (policy == "strict"
                               and all(r.positive == value for r in answers))

    out = {pair: 1.0 for pair, value in labels.items() if trusted(pair, value)}
    if len(out) < len(labels):
        result = consensus(votes(rows), concepts)
        for pair, value in labels.items():
            if pair not in out:
                q = result.posterior.get(pair, 1.0 if value else 0.0)
                out[pair] = q if value else 1.0 - q
    return out


_cache: dict[tuple[int, str, int], tuple[tuple[int, ...], Derived]] = {}
_cache_lock = threading.Lock()
_CACHED = 8


def _contradicted(session: Session, project_id: int) -> bool:
    """Whether some live answer contradicts the live label on its pair."""
    found = session.scalar(select(Answer.id).join(AssertedLabel, and_(
        AssertedLabel.project_id == Answer.project_id, AssertedLabel.a_id == Answer.a_id,
        AssertedLabel.b_id == Answer.b_id, AssertedLabel.retracted_at.is_(None),
        AssertedLabel.positive != Answer.positive)).where(
        Answer.project_id == project_id, Answer.retracted_at.is_(None)).limit(1))
    return found is not None


def _derived(session: Session, project_id: int) -> Derived:
    """The project's :class:`Derived` confidences, cached until its answers or labels change
    or its policy change (the fingerprint moves with the project's version)."""
    policy = session.scalar(select(Project.policy).where(Project.id == project_id)) or "strict"
    mark = (*answers_fingerprint(session, project_id), hash(policy))
    engine = session.get_bind().engine
    key = (id(engine), str(engine.url), project_id)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached[0] == mark:
        return cached[1]
    concepts = list(session.scalars(select(Concept.id).where(Concept.project_id == project_id,
                                                             Concept.deleted_at.is_(None))
                                    .order_by(Concept.id)))
    labels = {(a, b): bool(v) for a, b, v in session.execute(
        select(AssertedLabel.a_id, AssertedLabel.b_id, AssertedLabel.positive).where(
            AssertedLabel.project_id == project_id, AssertedLabel.retracted_at.is_(None))
        .order_by(AssertedLabel.id))}
    if policy == "strict" and not _contradicted(session, project_id):
        derived = Derived.alike(1.0)  # every label trusted: nothing to compute
    else:
        closure = Closure.from_labels([Label(a, b, v) for (a, b), v in labels.items()],
                                      concepts)
        rows = counting(live_answers(session, project_id),
                        excluded_annotators(session, project_id))
        derived = derived_confidence(closure, label_confidences(labels, rows, policy, concepts))
    with _cache_lock:
        if len(_cache) >= _CACHED and key not in _cache:
            _cache.pop(next(iter(_cache)))
        _cache[key] = (mark, derived)
    return derived


def pair_confidence(session: Session, project_id: int) -> PairConfidence:
    """Each decided pair's confidence and the contested pairs, as stored in ``session``'s
    transaction."""
    contested = frozenset((int(a), int(b)) for a, b in session.execute(
        select(Disagreement.a_id, Disagreement.b_id).where(
            Disagreement.project_id == project_id, Disagreement.closed_at.is_(None))))
    return PairConfidence(_derived(session, project_id), contested)
