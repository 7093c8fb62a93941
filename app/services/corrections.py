"""Correcting data: rename a concept, delete a concept or a pool pair, merge two concepts.

Each is one unit of work (compute, then a short write transaction) after which every
process's cached state is rebuilt (:func:`app.services.corpus.rebuild_state`): names, the pool
and the closure change in ways the cache cannot follow by appending.

* A concept or pool pair that a live asserted label uses is not deleted: 409 ``in-use`` names
  the labels (retract them first).
* A merge moves the labels of the merged concept onto the kept one and closes them again in
  the order they were asserted; a contradiction (``a`` before ``b`` and ``b`` before ``a``,
  or a concept before itself) refuses the merge with the proof, in the original labels.
  A label that becomes a duplicate of an earlier one with the same value, or a negative
  between the two concepts, is dropped (retracted). The merged concept's text is kept when
  the kept concept has none; its links move. Its answers move too (those between the two
  are retracted and stay where they were).
* In ``consensus`` a merge is never refused: the merged concept's labels are retracted, its
  open disagreements closed (reason ``merge``), and the consensus of the moved answers is
  computed again through the change path (:mod:`app.services.labels.change`): a merged pair
  whose answers now split opens a disagreement. In ``strict`` a merge is as above.
* Nothing a team said is lost: a deleted or merged-away concept becomes a tombstone
  (:func:`_tombstone`, :class:`models.Concept`), so the answers, disagreements and retracted
  labels on it stay in the history and the export; deleting one retracts its live answers
  (in ``consensus`` through the change path, so the labels are the consensus without them)
  and closes its disagreements (reason ``deletion``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from app.errors import Contradiction, InUse, InvalidItems
from app.schemas import ConceptDeleted, ConceptsMerged, label_value
from app.services.annotators import retract_label_answers, stamp_retracted
from app.services.concepts import resolve
from app.services.corpus import (
    Corpus,
    CorpusChange,
    CorpusPlan,
    apply_change,
    plan_change,
    read_corpus,
    rebuild_state,
)
from app.services.labels import change as team
from app.services.labels.consensus import CONSENSUS
from app.services.labels.store import Rewrite, prepare_rewrite, replay_live, rewrite
from app.services.state import ProjectState, encode_features
from app.services.unit import ProjectWork
from models import (
    Answer,
    AssertedLabel,
    CheckQuestion,
    ClosureEffect,
    Concept,
    ConceptLink,
    ConceptText,
    Disagreement,
    PoolPair,
    Project,
    utcnow,
)
from models.tables import tombstone_name
from reasoning.closure import Closure, ContradictionError, Label, Update

__all__ = ["delete_concept", "delete_pair", "merge_concepts", "rename_concept"]

CONSENSUS_POLICY = CONSENSUS.name


def _labels_using(state: ProjectState, concept_ids: set[int] | None = None,
                  pair: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    name = state.name_of
    return [{"id": live.id, "a": name[a], "b": name[b], "label": label_value(live.positive)}
            for (a, b), live in sorted(state.labels.items(), key=lambda item: item[1].id)
            if (pair is not None and (a, b) == pair)
            or (concept_ids is not None and (a in concept_ids or b in concept_ids))]


# ---------------------------------------------------------------------------- rename
def rename_concept(work: ProjectWork, name: str, new_name: str, *,
                   recompute: bool = True) -> Concept:
    """Give a concept another name; labels, pool and proofs follow (they hold its id).

    In a project with computed features the pool's features are computed again (names are
    titles), unless ``recompute`` is False (a job recomputes them after).
    """

    def compute(work: ProjectWork) -> tuple[int, CorpusPlan | None]:
        (concept_id,) = resolve(work.state, [name])
        if new_name != name and new_name in work.state.id_of:
            raise InvalidItems([{"name": new_name, "reason": "a concept of this name exists: "
                                 "merge the two instead"}], "names")
        if new_name == name:
            return concept_id, None
        return concept_id, plan_change(work, CorpusChange(renamed={concept_id: new_name}),
                                       force=True, recompute=recompute)

    def store(work: ProjectWork, project: Project,
              plan: tuple[int, CorpusPlan | None]) -> Concept:
        concept_id, corpus_plan = plan
        concept = work.session.get(Concept, concept_id)
        assert concept is not None
        if corpus_plan is not None:
            concept.name = new_name
            project.corpus_version += 1
            work.session.flush()
            apply_change(work, project, corpus_plan, rebuild=False)
            rebuild_state(work, project)
        return concept

    return work.write(compute, store)


# ---------------------------------------------------------------------------- deletions
def _tombstone(session: Session, project_id: int, concept_id: int, now: datetime) -> None:
    """Make a concept a tombstone (:class:`models.Concept`): gone from the project, its
    name free again, the answers, disagreements and retracted labels on it kept. Its text,
    links, pool pairs, unanswered check questions and stored closure lines go."""
    on_it = {"a": (PoolPair.a_id == concept_id) | (PoolPair.b_id == concept_id),
             "q": (CheckQuestion.a_id == concept_id) | (CheckQuestion.b_id == concept_id)}
    session.execute(delete(ConceptText).where(ConceptText.concept_id == concept_id))
    session.execute(delete(ConceptLink).where(
        (ConceptLink.source_id == concept_id) | (ConceptLink.target_id == concept_id)))
    session.execute(delete(PoolPair).where(PoolPair.project_id == project_id, on_it["a"]))
    session.execute(delete(CheckQuestion).where(
        CheckQuestion.project_id == project_id, CheckQuestion.answer_id.is_(None), on_it["q"]))
    session.execute(delete(ClosureEffect).where(ClosureEffect.project_id == project_id,
                                                ClosureEffect.line_id == concept_id))
    session.execute(update(Concept).where(Concept.id == concept_id).values(
        deleted_at=now, deleted_name=Concept.name, name=tombstone_name(concept_id))
        .execution_options(synchronize_session=False))


def _close_disagreements(session: Session, project_id: int, concept_id: int, reason: str,
                         now: datetime) -> int:
    """Close every open disagreement on a pair of ``concept_id`` (kept, with ``reason``);
    how many closed."""
    closed = session.execute(update(Disagreement).where(
        Disagreement.project_id == project_id, Disagreement.closed_at.is_(None),
        (Disagreement.a_id == concept_id) | (Disagreement.b_id == concept_id))
        .values(closed_at=now, closed_reason=reason)
        .execution_options(synchronize_session=False))
    return int(getattr(closed, "rowcount", 0) or 0)


def _recompute(work: ProjectWork, project: Project, change: team.TeamChange,
               now: datetime) -> team.Applied | None:
    """After a correction of the concepts (the state rebuilt): in ``consensus``, the
    consensus of the live answers computed again through the change path (its answers
    retracted, the disagreements its refit closes closed with ``change.closes``); in
    ``strict``, the answers retracted only. Planned in the write transaction: the plan
    reads what the correction wrote."""
    if project.policy != CONSENSUS_POLICY:
        stamp_retracted(work.session, change.retract, now)
        return None
    return team.store_change(work, project, change, team.plan_change(work, change))


def delete_concept(work: ProjectWork, name: str, *,
                   deleted_at: datetime | None = None) -> ConceptDeleted:
    """Delete a concept: it becomes a tombstone (:func:`_tombstone`) and the answers on it
    stay in the history, retracted (in ``consensus`` the consensus is computed again without
    them); refused while live labels use it. ``deleted_at``: when (default now; an import
    gives the time a project export recorded)."""

    def compute(work: ProjectWork) -> tuple[int, int, CorpusPlan, Rewrite | None]:
        state = work.state
        (concept_id,) = resolve(state, [name])
        labels = _labels_using(state, concept_ids={concept_id})
        if labels:
            raise InUse(f"concept {name!r}", labels)
        pool_pairs = int((state.pool.concepts == concept_id).any(axis=1).sum())
        corpus = read_corpus(work.session, state)
        change = CorpusChange(texts={concept_id: None}, links_removed={
            link for link in corpus.links if concept_id in link})
        stored = None
        if state.labels:  # the ordinals after the deleted concept move down by one
            stored = prepare_rewrite(*replay_live(state, concepts=[
                c for c in state.closure.concepts if c != concept_id]))
        return concept_id, pool_pairs, plan_change(work, change), stored

    def store(work: ProjectWork, project: Project,
              plan: tuple[int, int, CorpusPlan, Rewrite | None]) -> ConceptDeleted:
        concept_id, pool_pairs, corpus_plan, stored = plan
        session, now = work.session, deleted_at or utcnow()
        apply_change(work, project, corpus_plan, rebuild=False)
        _tombstone(session, project.id, concept_id, now)
        rebuild_state(work, project)
        if stored is not None:
            rewrite(session, project.id, stored)
        on_it = (Answer.a_id == concept_id) | (Answer.b_id == concept_id)
        live = frozenset(session.scalars(select(Answer.id).where(
            Answer.project_id == project.id, Answer.retracted_at.is_(None), on_it)))
        if live:
            _recompute(work, project, team.TeamChange(retract=live, closes="deletion"), now)
        _close_disagreements(session, project.id, concept_id, "deletion", now)
        kept = session.scalar(select(func.count(Answer.id)).where(
            Answer.project_id == project.id, on_it)) or 0
        return ConceptDeleted(name=name, pool_pairs=pool_pairs, answers_kept=kept)

    return work.write(compute, store)


def delete_pair(work: ProjectWork, a: str, b: str) -> None:
    """Delete a pool pair; refused while a live label is asserted on it."""

    def compute(work: ProjectWork) -> int:
        state = work.state
        pair = tuple(resolve(state, [a, b]))
        row = state.pool.row_of.get(pair)  # type: ignore[arg-type]
        if row is None:
            raise InvalidItems([{"a": a, "b": b, "reason": "not a pool pair"}], "pairs")
        labels = _labels_using(state, pair=pair)  # type: ignore[arg-type]
        if labels:
            raise InUse(f"pool pair ({a!r}, {b!r})", labels)
        return int(state.pool.ids[row])

    def store(work: ProjectWork, project: Project, pair_id: int) -> None:
        work.session.execute(delete(PoolPair).where(PoolPair.id == pair_id))
        rebuild_state(work, project)

    work.write(compute, store)


# ---------------------------------------------------------------------------- merge
@dataclass(frozen=True)
class _Merge:
    keep: int
    merge: int
    moved_labels: list[tuple[int, int, int]]  # (label id, new a, new b)
    dropped_labels: list[int]
    stored: Rewrite  # the stored closure of the live labels after the merge
    moved_pairs: list[tuple[int, int, int]]  # (pool pair id, new a, new b)
    dropped_pairs: list[int]
    links: set[tuple[int, int]]  # the links after the merge
    text: str | None  # the kept concept's text after the merge
    features: dict[int, np.ndarray] | None  # pool pair id -> new features (computed projects)


def _relabel(state: ProjectState, keep: int, merge: int, keep_name: str, merge_name: str
             ) -> tuple[list[tuple[int, Label]], list[tuple[int, int, int]], list[int]]:
    """The live labels with ``merge`` read as ``keep``, in assertion order; moved; dropped."""
    def moved(c: int) -> int:
        return keep if c == merge else c

    kept: dict[tuple[int, int], tuple[int, bool]] = {}
    labels: list[tuple[int, Label]] = []
    moves: list[tuple[int, int, int]] = []
    dropped: list[int] = []
    for (a, b), live in sorted(state.labels.items(), key=lambda item: item[1].id):
        pair = (moved(a), moved(b))
        ref = {"id": live.id, "a": state.name_of[a], "b": state.name_of[b],
               "label": label_value(live.positive)}
        if pair[0] == pair[1]:
            if live.positive:
                raise Contradiction(
                    f"{keep_name!r} and {merge_name!r} cannot be one concept: the label in "
                    "`proof` puts one before the other", a=keep_name, b=merge_name,
                    proof=[ref], chains=[])
            dropped.append(live.id)
            continue
        earlier = kept.get(pair)
        if earlier is not None:
            if earlier[1] != live.positive:
                first = state.pair_of_label[earlier[0]]
                raise Contradiction(
                    f"merging {merge_name!r} into {keep_name!r} gives two labels of opposite "
                    "value on one pair (`proof`)", a=keep_name, b=merge_name, chains=[],
                    proof=[{"id": earlier[0], "a": state.name_of[first[0]],
                            "b": state.name_of[first[1]],
                            "label": label_value(earlier[1])}, ref])
            dropped.append(live.id)
            continue
        kept[pair] = (live.id, live.positive)
        labels.append((live.id, Label(pair[0], pair[1], live.positive)))
        if pair != (a, b):
            moves.append((live.id, *pair))
    return labels, moves, dropped


def _unlabel(state: ProjectState, merge: int
             ) -> tuple[list[tuple[int, Label]], list[tuple[int, int, int]], list[int]]:
    """``consensus``: every live label of ``merge`` retracted (the consensus of the moved
    answers asserts the labels again), the others kept in assertion order (a part of a
    consistent set of labels, so their replay cannot contradict)."""
    labels: list[tuple[int, Label]] = []
    dropped: list[int] = []
    for (a, b), live in sorted(state.labels.items(), key=lambda item: item[1].id):
        if merge in (a, b):
            dropped.append(live.id)
        else:
            labels.append((live.id, Label(a, b, live.positive)))
    return labels, [], dropped


def _closed(state: ProjectState, labels: list[tuple[int, Label]], keep: int, merge: int,
            keep_name: str, merge_name: str) -> tuple[Closure, list[Update]]:
    """The replay of the merged labels; a contradiction refuses with its proof."""
    concepts = [c for c in sorted(state.name_of) if c != merge]  # the ordinals after it
    try:
        return Closure.replay_effects([lab for _, lab in labels], concepts)
    except ContradictionError as exc:
        name: dict[Any, str] = state.name_of
        by_pair = {(lab.a, lab.b): label_id for label_id, lab in labels}
        proof = []
        # the label that could not be added, then the ones that force the opposite
        refused = Label(exc.proof.a, exc.proof.b, not exc.proof.positive)
        for lab in (refused, *exc.proof.labels):
            label_id = by_pair[(lab.a, lab.b)]
            a, b = state.pair_of_label[label_id]
            proof.append({"id": label_id, "a": state.name_of[a], "b": state.name_of[b],
                          "label": label_value(lab.positive)})
        raise Contradiction(
            f"merging {merge_name!r} into {keep_name!r} contradicts the labels in `proof` "
            "(read with the two as one concept)", a=keep_name, b=merge_name, proof=proof,
            chains=[[name[c] for c in chain] for chain in exc.proof.chains]) from None


def _merged_pool(state: ProjectState, keep: int, merge: int
                 ) -> tuple[list[tuple[int, int, int]], list[int], list[tuple[int, int, int]]]:
    """Pool pairs moved onto ``keep``, dropped (a self pair or a duplicate), and the result."""
    existing = {tuple(p) for p in state.pool.concepts.tolist()}
    moved: list[tuple[int, int, int]] = []
    dropped: list[int] = []
    result: list[tuple[int, int, int]] = []
    for pair_id, (a, b) in zip(state.pool.ids.tolist(), state.pool.concepts.tolist(),
                               strict=True):
        if merge not in (a, b):
            result.append((pair_id, a, b))
            continue
        new = (keep if a == merge else a, keep if b == merge else b)
        if new[0] == new[1] or new in existing:
            dropped.append(pair_id)
            continue
        existing.add(new)
        moved.append((pair_id, *new))
        result.append((pair_id, *new))
    return moved, dropped, result


def merge_concepts(work: ProjectWork, keep: str, merge: str) -> ConceptsMerged:
    """Merge concept ``merge`` into ``keep`` (see the module docstring)."""

    def store(work: ProjectWork, project: Project, plan: _Merge) -> ConceptsMerged:
        _store_merge(work, project, plan)
        opened = closed = 0
        if project.policy == CONSENSUS_POLICY:  # the merged answers decide together
            now = utcnow()
            closed = _close_disagreements(work.session, project.id, plan.merge, "merge", now)
            applied = _recompute(work, project, team.TeamChange(closes="merge"), now)
            states = [ref.state for ref in applied.changed.values()] if applied else []
            opened, closed = states.count("opened"), closed + states.count("closed")
        return ConceptsMerged(keep=keep, merged=merge, labels_moved=len(plan.moved_labels),
                              labels_dropped=len(plan.dropped_labels),
                              pool_pairs_moved=len(plan.moved_pairs),
                              pool_pairs_dropped=len(plan.dropped_pairs),
                              disagreements_opened=opened, disagreements_closed=closed)

    return work.write(lambda work: _plan_merge(work, keep, merge), store)


def _plan_merge(work: ProjectWork, keep: str, merge: str) -> _Merge:
    """The merge computed on the cached state; a contradiction refuses it with the proof."""
    state = work.state
    keep_id, merge_id = resolve(state, [keep, merge])
    if keep_id == merge_id:
        raise InvalidItems([{"keep": keep, "merge": merge,
                             "reason": "a concept cannot be merged into itself"}], "names")
    if work.project.policy == CONSENSUS_POLICY:
        labels, moves, dropped = _unlabel(state, merge_id)
        merged, updates = Closure.replay_effects(
            [lab for _, lab in labels], [c for c in sorted(state.name_of) if c != merge_id])
    else:
        labels, moves, dropped = _relabel(state, keep_id, merge_id, keep, merge)
        merged, updates = _closed(state, labels, keep_id, merge_id, keep, merge)
    stored = prepare_rewrite(merged, labels, updates)
    moved_pairs, dropped_pairs, pool = _merged_pool(state, keep_id, merge_id)
    corpus = read_corpus(work.session, state)
    links = {(keep_id if u == merge_id else u, keep_id if v == merge_id else v)
             for u, v in corpus.links}
    links = {(u, v) for u, v in links if u != v}
    text = corpus.texts.get(keep_id) or corpus.texts.get(merge_id)
    features = None
    if work.project.features_computed and pool:
        texts = {c: t for c, t in corpus.texts.items() if c != merge_id}
        if text is not None:
            texts[keep_id] = text
        ids = [c for c in corpus.ids if c != merge_id]
        after = Corpus(ids, [state.name_of[c] for c in ids], texts, links)
        vectors = after.features(after.statistics(),
                                 np.array([(a, b) for _, a, b in pool], dtype=np.int64))
        features = {pair_id: vectors[i] for i, (pair_id, _, _) in enumerate(pool)}
    return _Merge(keep_id, merge_id, moves, dropped, stored, moved_pairs, dropped_pairs,
                  links, text, features)


def _store_merge(work: ProjectWork, project: Project, plan: _Merge) -> None:
    """Write the merge (in the write transaction) and rebuild the cached state."""
    session, pid = work.session, project.id
    if plan.dropped_labels:  # before the moves: a dropped label may hold the moved pair
        session.execute(update(AssertedLabel).where(
            AssertedLabel.id.in_(plan.dropped_labels)).values(
                retracted_at=utcnow(), retracted_version=project.version + 1, caused_by=None))
    for label_id, a, b in plan.moved_labels:
        session.execute(update(AssertedLabel).where(AssertedLabel.id == label_id)
                        .values(a_id=a, b_id=b))
    if plan.dropped_pairs:
        session.execute(delete(PoolPair).where(PoolPair.id.in_(plan.dropped_pairs)))
    for pair_id, a, b in plan.moved_pairs:
        session.execute(update(PoolPair).where(PoolPair.id == pair_id)
                        .values(a_id=a, b_id=b))
    if project.policy != CONSENSUS_POLICY:  # consensus: the answers decide again, all kept
        retract_label_answers(session, list(plan.dropped_labels))
    both = (plan.keep, plan.merge)  # an answer on the two merged concepts names no pair now:
    session.execute(update(Answer).where(  # retracted, and kept on the tombstone's pair
        Answer.project_id == pid, Answer.a_id.in_(both), Answer.b_id.in_(both),
        Answer.retracted_at.is_(None)).values(retracted_at=utcnow()))
    for column, other in ((Answer.a_id, Answer.b_id), (Answer.b_id, Answer.a_id)):
        session.execute(update(Answer).where(Answer.project_id == pid, column == plan.merge,
                                             other != plan.keep)
                        .values({column: plan.keep}))
    _store_corpus(work, project, plan)
    _tombstone(session, pid, plan.merge, utcnow())
    if plan.features is not None:
        session.execute(update(PoolPair), [
            {"id": pair_id, "features": encode_features(vector)}
            for pair_id, vector in plan.features.items()])
    rebuild_state(work, project)  # the version after it is the dropped labels' retraction
    rewrite(session, pid, plan.stored)


def _store_corpus(work: ProjectWork, project: Project, plan: _Merge) -> None:
    session, pid = work.session, project.id
    stored = {(u, v) for u, v in session.execute(
        select(ConceptLink.source_id, ConceptLink.target_id).where(
            ConceptLink.project_id == pid))}
    touched = {link for link in stored if plan.merge in link}
    if touched:
        session.execute(delete(ConceptLink).where(
            ConceptLink.project_id == pid,
            (ConceptLink.source_id == plan.merge) | (ConceptLink.target_id == plan.merge)))
    new = sorted(plan.links - (stored - touched))
    if new:
        session.execute(insert(ConceptLink), [
            {"project_id": pid, "source_id": u, "target_id": v} for u, v in new])
    text_before = session.get(ConceptText, plan.keep)
    if plan.text is not None and text_before is None:
        session.execute(insert(ConceptText), [
            {"concept_id": plan.keep, "project_id": pid, "text": plan.text}])
    if touched or (plan.text is not None and text_before is None):
        project.corpus_version += 1
