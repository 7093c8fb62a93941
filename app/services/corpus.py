"""Concept texts and links, and the pool features sporal computes from them.

A project's features are either the client's (sent with each pool pair) or *computed*
(``Project.features_computed``): from the concepts' names, texts and links by
:mod:`reasoning.features`, one vector of ``len(FEATURE_NAMES)`` per pair (docs/features.md).
A project becomes computed when its first pool pairs arrive without features (or an import's
``project`` record says ``"features": "computed"``).

When texts, links or names change, ``corpus_version`` grows and, in a computed project, every
pool pair's features are computed again: the new vectors are computed first, with no database
lock held (the ``compute`` step of the unit of work), then stored in the write transaction,
which also marks the project for a rebuild of every process's cached state (the pool's
features are replaced, not appended, so the cache cannot be extended).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from app.errors import InvalidItems, UnknownConcepts
from app.services.state import ProjectState, catch_up, encode_features
from app.services.unit import ProjectOpener, ProjectView, ProjectWork
from models import ConceptLink, ConceptText, PoolPair, Project
from reasoning.features import FEATURE_NAMES, CorpusStatistics, corpus_statistics, pair_features

if TYPE_CHECKING:
    from app.services.jobs import JobContext

__all__ = [
    "FEATURE_LENGTH",
    "Corpus",
    "CorpusChange",
    "apply_change",
    "change_corpus",
    "computed_features",
    "list_links",
    "plan_change",
    "read_corpus",
    "rebuild_state",
    "recompute_features",
    "recompute_size",
    "set_texts",
    "statistics",
]

FEATURE_LENGTH = len(FEATURE_NAMES)

_CACHE_SIZE = 4
_cache: OrderedDict[tuple[int, int, int, int], CorpusStatistics] = OrderedDict()
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class Corpus:
    """A project's concepts (ids in id order), their names, texts and links (by ids)."""

    ids: list[int]
    names: list[str]
    texts: dict[int, str]
    links: set[tuple[int, int]]

    def statistics(self) -> CorpusStatistics:
        row = {concept_id: i for i, concept_id in enumerate(self.ids)}
        return corpus_statistics(
            self.names, [self.texts.get(concept_id, "") for concept_id in self.ids],
            np.array([(row[u], row[v]) for u, v in sorted(self.links)],
                     dtype=np.int64).reshape(-1, 2))

    def features(self, stats: CorpusStatistics, pairs: np.ndarray) -> np.ndarray:
        """The features of ``pairs`` of concept ids, shape ``(m, FEATURE_LENGTH)``."""
        return features_by_ids(self.ids, stats, pairs)


def features_by_ids(ids: list[int], stats: CorpusStatistics, pairs: np.ndarray) -> np.ndarray:
    """The features of ``pairs`` of concept ids; ``ids[i]`` is row ``i`` of ``stats``."""
    row = {concept_id: i for i, concept_id in enumerate(ids)}
    rows = np.array([(row[a], row[b]) for a, b in np.asarray(pairs).tolist()],
                    dtype=np.int64).reshape(-1, 2)
    return pair_features(stats, rows)


def read_corpus(session: Session, state: ProjectState) -> Corpus:
    """The corpus as stored now (names from the caught-up ``state``)."""
    pid = state.project_id
    ids = sorted(state.name_of)
    rows = session.execute(select(ConceptText.concept_id, ConceptText.text)
                           .where(ConceptText.project_id == pid)).all()
    texts: dict[int, str] = {row.concept_id: row.text for row in rows}
    links: set[tuple[int, int]] = {(u, v) for u, v in session.execute(
        select(ConceptLink.source_id, ConceptLink.target_id)
        .where(ConceptLink.project_id == pid))}
    return Corpus(ids, [state.name_of[i] for i in ids], texts, links)


def statistics(session: Session, state: ProjectState,
               project: Project) -> tuple[list[int], CorpusStatistics]:
    """The stored corpus's statistics (cached) and the concept id of each of their rows.

    The statistics are kept per ``(project, corpus_version, concepts, newest concept)``: a
    new concept (its name is a title that texts may mention) or a corpus change reads again;
    otherwise the texts are not read at all.
    """
    key = (project.id, project.corpus_version, len(state.name_of), state.max_concept_id)
    ids = sorted(state.name_of)
    with _cache_lock:
        stats = _cache.get(key)
    if stats is None:
        stats = read_corpus(session, state).statistics()
        with _cache_lock:
            _cache[key] = stats
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return ids, stats


def computed_features(session: Session, state: ProjectState, project: Project,
                      pairs: np.ndarray) -> np.ndarray:
    """Features of ``pairs`` (concept ids) from the stored corpus."""
    ids, stats = statistics(session, state, project)
    return features_by_ids(ids, stats, pairs)


@dataclass
class CorpusChange:
    """Texts set (``None`` or ``""`` removes one), links added or removed, names changed."""

    texts: dict[int, str | None] = field(default_factory=dict)
    links_added: set[tuple[int, int]] = field(default_factory=set)
    links_removed: set[tuple[int, int]] = field(default_factory=set)
    renamed: dict[int, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.texts or self.links_added or self.links_removed or self.renamed)


@dataclass(frozen=True)
class CorpusPlan:
    """What :func:`apply_change` stores: the effective change and the pool's new features."""

    texts: dict[int, str | None]
    links_added: set[tuple[int, int]]
    links_removed: set[tuple[int, int]]
    pool_features: np.ndarray | None

    @property
    def changed(self) -> bool:
        return bool(self.texts or self.links_added or self.links_removed)


def plan_change(work: ProjectWork, change: CorpusChange, *, force: bool = False,
                recompute: bool = True) -> CorpusPlan:
    """The effective part of ``change`` and, in a computed project, the pool's new features.

    Runs in the ``compute`` step: reads the corpus, computes with no write lock held.
    ``force`` recomputes the pool's features even when the texts and links stay (a rename);
    without ``recompute`` only the change is planned (a job recomputes the features after:
    :func:`recompute_features`).
    """
    state = work.state
    corpus = read_corpus(work.session, state)
    texts = {c: (t or None) for c, t in change.texts.items()
             if (t or None) != corpus.texts.get(c)}
    added = change.links_added - corpus.links
    removed = change.links_removed & corpus.links
    pool = None
    if recompute and work.project.features_computed and len(state.pool) and (
            texts or added or removed or force):
        new_texts = {**corpus.texts, **{c: t for c, t in texts.items() if t is not None}}
        for c, t in texts.items():
            if t is None:
                new_texts.pop(c, None)
        names = [change.renamed.get(c, name) for c, name in zip(corpus.ids, corpus.names,
                                                                  strict=True)]
        after = Corpus(corpus.ids, names, new_texts, (corpus.links | added) - removed)
        pool = after.features(after.statistics(), state.pool.concepts)
    return CorpusPlan(texts, added, removed, pool)


def apply_change(work: ProjectWork, project: Project, plan: CorpusPlan, *,
                 rebuild: bool = True) -> None:
    """Store ``plan`` in the write transaction (the ``store`` step); the cache follows.

    Bumps ``corpus_version`` when the corpus changed; when new pool features are stored the
    project is marked for a rebuild and (unless ``rebuild`` is False: the caller rebuilds
    after more writes) this process's state is rebuilt at once.
    """
    session, pid = work.session, project.id
    if plan.texts:
        session.execute(delete(ConceptText).where(ConceptText.project_id == pid,
                                                  ConceptText.concept_id.in_(list(plan.texts))))
        rows = [{"concept_id": c, "project_id": pid, "text": t}
                for c, t in plan.texts.items() if t is not None]
        if rows:
            session.execute(insert(ConceptText), rows)
    for u, v in plan.links_removed:
        session.execute(delete(ConceptLink).where(
            ConceptLink.project_id == pid, ConceptLink.source_id == u, ConceptLink.target_id == v))
    if plan.links_added:
        session.execute(insert(ConceptLink), [
            {"project_id": pid, "source_id": u, "target_id": v}
            for u, v in sorted(plan.links_added)])
    if plan.changed:
        project.corpus_version += 1
        project.version += 1
    if plan.pool_features is not None:
        write_pool_features(session, work.state, plan.pool_features)
        if rebuild:
            rebuild_state(work, project)


def write_pool_features(session: Session, state: ProjectState, features: np.ndarray) -> None:
    """Replace every pool pair's stored features (row ``r`` of ``features`` is pool row ``r``)."""
    session.execute(update(PoolPair), [
        {"id": int(pair_id), "features": encode_features(row)}
        for pair_id, row in zip(state.pool.ids.tolist(), features, strict=True)])


def rebuild_state(work: ProjectWork, project: Project) -> None:
    """After a change the cache cannot follow by appending (features replaced, a concept
    renamed, merged or deleted, a pool pair deleted): every process rebuilds its state.

    ``retraction_version`` is what tells the other processes' caches to rebuild rather than
    extend; this process rebuilds now, inside the write transaction, from what it wrote.
    """
    project.version += 1
    project.retraction_version = project.version
    work.session.flush()
    work.state.invalidate()
    catch_up(work.session, work.state, project)


def _known(state: ProjectState, names: Iterable[str]) -> None:
    unknown = [name for name in names if name not in state.id_of]
    if unknown:
        raise UnknownConcepts(unknown)


def _link_ids(state: ProjectState, links: Iterable[tuple[str, str]]) -> list[tuple[int, int]]:
    """Links by names as id pairs; 422 naming unknown concepts and self links."""
    links = list(links)
    _known(state, [name for link in links for name in link])
    errors = [{"index": i, "source": u, "target": v, "reason": "a link needs two concepts"}
              for i, (u, v) in enumerate(links) if u == v]
    if errors:
        raise InvalidItems(errors, "links")
    return [(state.id_of[u], state.id_of[v]) for u, v in links]


def change_corpus(work: ProjectWork, *, texts: Mapping[str, str | None] | None = None,
                  add_links: Iterable[tuple[str, str]] = (),
                  remove_links: Iterable[tuple[str, str]] = (),
                  recompute: bool = True) -> tuple[CorpusPlan, int]:
    """Set texts and add or remove links (by names) in one write.

    Returns the effective change and how many pool pairs got recomputed features. Without
    ``recompute`` the change is stored alone (a short write) and the pool keeps its features
    until :func:`recompute_features` runs.
    """
    state = work.state
    _known(state, list(texts or {}))
    change = CorpusChange(
        texts={state.id_of[name]: text for name, text in (texts or {}).items()},
        links_added=set(_link_ids(state, add_links)),
        links_removed=set(_link_ids(state, remove_links)))

    def store(work: ProjectWork, project: Project, plan: CorpusPlan) -> tuple[CorpusPlan, int]:
        apply_change(work, project, plan)
        return plan, 0 if plan.pool_features is None else len(plan.pool_features)

    return work.write(lambda work: plan_change(work, change, recompute=recompute), store)


def set_texts(work: ProjectWork, texts: Mapping[str, str | None]) -> int:
    """Set concept texts by name (``""`` or None removes one); the texts that changed."""
    plan, _ = change_corpus(work, texts=texts)
    return len(plan.texts)


def list_links(session: Session, state: ProjectState, limit: int | None,
               offset: int) -> tuple[list[tuple[str, str]], int]:
    """The links by names, in the order they were added."""
    pid = state.project_id
    total = session.scalar(select(func.count()).select_from(ConceptLink)
                           .where(ConceptLink.project_id == pid)) or 0
    query = select(ConceptLink.source_id, ConceptLink.target_id).where(
        ConceptLink.project_id == pid).order_by(ConceptLink.id).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    name = state.name_of
    return [(name[u], name[v]) for u, v in session.execute(query)], total


# ---------------------------------------------------------------------------- recompute as a job
RECOMPUTE_STEPS = 20
"""Slices of the pool computed between two progress reports (and cancellation checks)."""


def recompute_size(view: ProjectView) -> int:
    """The work of recomputing the pool's features: concepts with texts x pool pairs.

    0 when the project's features are not computed (nothing to recompute).
    """
    if not view.project.features_computed or not len(view.state.pool):
        return 0
    texts = view.session.scalar(select(func.count()).select_from(ConceptText)
                                .where(ConceptText.project_id == view.project.id)) or 0
    return max(int(texts), 1) * len(view.state.pool)


@dataclass(frozen=True)
class _Snapshot:
    """The corpus and pool a recompute works from (read under the project's lock)."""

    corpus: Corpus
    corpus_version: int
    pair_ids: np.ndarray
    pairs: np.ndarray


def recompute_features(runtime: ProjectOpener, project_id: int, job: JobContext,
                       answer: Mapping[str, object]) -> dict[str, object]:
    """The job after a corpus change stored without its recompute: the pool's new features.

    The corpus is read under the project's lock, the features computed with no lock held
    (reporting progress, stopping when cancelled), and stored in one short write, unless the
    corpus changed meanwhile: then the change that moved it recomputes (its own job, or its
    request), and this job stores nothing. Returns ``answer`` (what the request stored) with
    ``recomputed_pairs``.
    """
    with runtime.open(ProjectView, project_id) as view:
        if not view.project.features_computed or not len(view.state.pool):
            return {**answer, "recomputed_pairs": 0}
        snapshot = _Snapshot(read_corpus(view.session, view.state), view.project.corpus_version,
                             view.state.pool.ids.copy(), view.state.pool.concepts.copy())
    job.progress(0.02, "reading the corpus")
    stats = snapshot.corpus.statistics()
    parts = []
    slices = np.array_split(np.arange(len(snapshot.pairs)), RECOMPUTE_STEPS)
    for done, rows in enumerate(slices):
        job.progress(0.1 + 0.85 * done / len(slices), "computing the pool's features")
        parts.append(snapshot.corpus.features(stats, snapshot.pairs[rows]))
    job.progress(0.95, "storing the pool's features")
    features = np.concatenate(parts)

    def store(work: ProjectWork, project: Project, _: None) -> int:
        return _store_recomputed(work, project, snapshot, features)

    with runtime.open(ProjectWork, project_id) as work:
        recomputed = work.write(lambda work: None, store)
    result: dict[str, object] = {**answer, "recomputed_pairs": recomputed}
    if recomputed == 0:
        result["skipped"] = "the corpus changed again meanwhile; that change recomputes"
    return result


def _store_recomputed(work: ProjectWork, project: Project, snapshot: _Snapshot,
                      features: np.ndarray) -> int:
    """Store ``features`` of the snapshot's pool pairs still in the pool; how many."""
    if project.corpus_version != snapshot.corpus_version:
        return 0
    keep = np.isin(snapshot.pair_ids, work.state.pool.ids)
    if not keep.any():
        return 0
    work.session.execute(update(PoolPair), [
        {"id": int(pair_id), "features": encode_features(row)}
        for pair_id, row in zip(snapshot.pair_ids[keep].tolist(), features[keep], strict=True)])
    rebuild_state(work, project)
    return int(keep.sum())
