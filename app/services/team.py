"""The team's read model: a project's live answers as the consensus reads them, the
annotators whose answers do not count, and what was last computed from them.

Every module that reads a team's answers (``next``'s team question, the agreement view, the
disagreements, every consensus a change plans) reads them here, never from a module that
writes them; and the project's excluded annotators (:func:`excluded_annotators`, stored by
``POST .../annotators/{name}/exclude``) with them: :func:`counting` leaves their answers
out. What is computed from the answers is cached on the project's state
(:class:`app.services.state.TeamCache`): the last full-path consensus (:func:`last_fit`),
set only once its event committed, and the agreement view (:func:`cached_agreement`,
:func:`keep_agreement`); both are forgotten with the state (an invalidation after a failed
write, an eviction, a deleted project). The accuracies of the last full fit are also kept on
the project row (:func:`accuracy_record`): a process without that fit (a restart, another
server, an eviction) rebuilds it from them with no EM.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.schemas import ConsensusAsOf, PendingPair
from app.services.state import ProjectState, TeamCache
from models import AnnotatorExclusion, Answer, Project, ReaskedPair
from reasoning.consensus import Consensus, Vote, consensus, rebuild

__all__ = [
    "LiveAnswer",
    "accuracy_record",
    "answers_fingerprint",
    "cached_agreement",
    "consensus_as_of",
    "counting",
    "excluded_annotators",
    "held_fit",
    "keep_agreement",
    "last_fit",
    "live_answers",
    "live_of",
    "pair_answers",
    "pending_pairs",
    "reasked_pairs",
    "stored_accuracy",
    "votes",
    "with_fit",
]


@dataclass(frozen=True)
class LiveAnswer:
    """A live (not retracted) answer as the consensus reads it."""

    id: int
    a_id: int
    b_id: int
    positive: bool
    annotator: str | None
    reviewer: bool
    check: bool
    outcome: str
    label_id: int | None


_COLUMNS = (Answer.id, Answer.a_id, Answer.b_id, Answer.positive, Answer.annotator,
            Answer.role, Answer.check_question, Answer.outcome, Answer.label_id)


def _live(row: Any) -> LiveAnswer:
    return LiveAnswer(int(row[0]), int(row[1]), int(row[2]), bool(row[3]), row[4],
                      row[5] == "reviewer", bool(row[6]), row[7], row[8])


def live_answers(session: Session, project_id: int) -> list[LiveAnswer]:
    """Every live answer of the project, in arrival order (ids)."""
    rows = session.execute(select(*_COLUMNS).where(
        Answer.project_id == project_id, Answer.retracted_at.is_(None)).order_by(Answer.id))
    return [_live(row) for row in rows]


def pair_answers(session: Session, project_id: int, a_id: int, b_id: int) -> list[LiveAnswer]:
    """The live answers on one pair, in arrival order."""
    rows = session.execute(select(*_COLUMNS).where(
        Answer.project_id == project_id, Answer.a_id == a_id, Answer.b_id == b_id,
        Answer.retracted_at.is_(None)).order_by(Answer.id))
    return [_live(row) for row in rows]


def excluded_annotators(session: Session, project_id: int) -> frozenset[str]:
    """The annotators of the project whose answers do not count (stored exclusions)."""
    return frozenset(session.scalars(select(AnnotatorExclusion.annotator).where(
        AnnotatorExclusion.project_id == project_id)))


def counting(rows: Sequence[LiveAnswer], excluded: frozenset[str]) -> list[LiveAnswer]:
    """The answers of ``rows`` that count: those of annotators not ``excluded`` (a
    reviewer's answer always counts)."""
    if not excluded:
        return list(rows)
    return [r for r in rows if r.reviewer or r.annotator not in excluded]


def reasked_pairs(session: Session, project_id: int,
                  rows: Sequence[LiveAnswer]) -> list[tuple[int, int]]:
    """The re-asked pairs (``POST .../annotators/{name}/reask``) still waiting for a second
    opinion, oldest first: no answer of ``rows`` (the answers that count) on the pair comes
    from anyone but the annotator whose pair it was."""
    others: dict[tuple[int, int], set[str | None]] = {}
    for r in rows:
        others.setdefault((r.a_id, r.b_id), set()).add("\0reviewer" if r.reviewer
                                                       else r.annotator)
    asked = session.execute(select(ReaskedPair.a_id, ReaskedPair.b_id, ReaskedPair.annotator)
                            .where(ReaskedPair.project_id == project_id)
                            .order_by(ReaskedPair.id))
    return [(a, b) for a, b, who in asked if not others.get((a, b), set()) - {who}]


def live_of(answer: Answer) -> LiveAnswer:
    """A stored answer row as the consensus reads it."""
    return LiveAnswer(answer.id, answer.a_id, answer.b_id, answer.positive, answer.annotator,
                      answer.role == "reviewer", answer.check_question, answer.outcome,
                      answer.label_id)


def votes(rows: Sequence[LiveAnswer]) -> list[Vote]:
    """The answers as :func:`reasoning.consensus.consensus` takes them (the id as the order)."""
    return [Vote(r.a_id, r.b_id, r.positive, r.annotator, reviewer=r.reviewer, check=r.check,
                 order=r.id) for r in rows]


def accuracy_record(fit: Consensus, as_of: int) -> str:
    """What ``projects.consensus_accuracy`` keeps of the full fit ``fit`` stored at project
    version ``as_of``: its per-annotator accuracies (JSON; no per-pair data)."""
    return json.dumps({"as_of": as_of, "accuracy": [[name, p] for name, p in
                                                     fit.accuracy.items()]})


def stored_accuracy(state: ProjectState) -> dict[str | None, float] | None:
    """The accuracies of the project's last full fit as stored (the state's row as caught
    up), or None: none kept, or kept for another version than ``consensus_as_of`` (a fit
    stored before they were kept)."""
    as_of, record = state.team.stored
    if as_of is None or record is None:
        return None
    found = json.loads(record)
    if found.get("as_of") != as_of:
        return None
    return {name: float(p) for name, p in found["accuracy"]}


def with_fit(team: TeamCache, fit: Consensus, project: Project) -> TeamCache:
    """``team`` holding the full fit ``fit`` that ``project``'s row now records (stored by
    the write in progress: ``consensus_as_of`` and ``consensus_accuracy``)."""
    return replace(team, fit=fit, as_of=project.consensus_as_of,
                   stored=(project.consensus_as_of, project.consensus_accuracy))


def _current(state: ProjectState) -> bool:
    """Whether the state holds a fit at least as new as the last full fit stored."""
    team = state.team
    return team.fit is not None and (team.stored[0] is None or team.as_of == team.stored[0])


def last_fit(state: ProjectState, rows: Sequence[LiveAnswer]) -> Consensus:
    """The consensus of the project's last full-path event: the one this process holds, or,
    when it holds none or an older one than the project row records (another process
    refitted), rebuilt from the stored accuracies with ``rows`` (the live answers that count)
    and the labels as they stand (:func:`reasoning.consensus.rebuild`, no EM). Without stored
    accuracies, the one held, or else the consensus of ``rows``; kept until the next event."""
    team = state.team
    if _current(state):
        return cast(Consensus, team.fit)
    accuracy = stored_accuracy(state)
    if accuracy is not None:
        fitted = rebuild(accuracy, votes(rows), state.closure)
    elif team.fit is not None:
        return cast(Consensus, team.fit)
    else:
        fitted = consensus(votes(rows), state.closure.concepts)
    state.team = replace(team, fit=fitted, as_of=team.stored[0])
    return fitted


def held_fit(session: Session, state: ProjectState) -> Consensus | None:
    """The full fit a local repair warm-starts from: :func:`last_fit`, read only when it
    needs no EM (one held and current, or stored accuracies to rebuild it from; None
    otherwise, for the full path to compute one)."""
    if _current(state) or stored_accuracy(state) is None:
        return cast(Consensus | None, state.team.fit)
    pid = state.project_id
    return last_fit(state, counting(live_answers(session, pid), excluded_annotators(session,
                                                                                     pid)))


def answers_fingerprint(session: Session, project_id: int) -> tuple[int, ...]:
    """What changes whenever the live answers or the concepts they name change: the
    project's version (every stored answer, and every change that moves or retracts one,
    moves it), the newest answer id and the newest retraction (microseconds since the
    epoch; answers are never un-retracted). Each is read from an index, whatever the number
    of answers."""
    version = session.scalar(select(Project.version).where(Project.id == project_id))
    newest = session.scalar(select(func.max(Answer.id)).where(Answer.project_id == project_id))
    retracted = session.scalar(select(func.max(Answer.retracted_at)).where(
        Answer.project_id == project_id, Answer.retracted_at.is_not(None)))  # partial index
    stamp = 0 if retracted is None else int(retracted.timestamp() * 1_000_000)
    return (int(version or 0), int(newest or 0), stamp)


def cached_agreement(state: ProjectState, mark: tuple[int, ...]) -> Any:
    """The agreement view cached for the answers of fingerprint ``mark``, or None."""
    cached = state.team.agreement
    return cached[1] if cached is not None and cached[0] == mark else None


def keep_agreement(state: ProjectState, mark: tuple[int, ...], view: Any) -> None:
    """Cache ``view``, computed from the answers of fingerprint ``mark`` (under the lock)."""
    state.team = replace(state.team, agreement=(mark, view))


def pending_pairs(project: Project) -> list[tuple[int, int]]:
    """The pairs of a ``consensus`` project repaired locally since its last full consensus
    (``docs/consensus.md``, "Incremental consensus"), in the order they were first repaired."""
    if not project.consensus_pending:
        return []
    return [(int(a), int(b)) for a, b in json.loads(project.consensus_pending)]


def consensus_as_of(project: Project, state: ProjectState) -> ConsensusAsOf | None:
    """How current the labels of ``project`` are: the project version of its last full
    consensus and the pairs repaired since (None: none yet, or ``strict``, whose switch clears
    both)."""
    if project.consensus_as_of is None and not project.consensus_pending:
        return None
    name = state.name_of
    return ConsensusAsOf(as_of=project.consensus_as_of, pending=[
        PendingPair(a=name[a], b=name[b]) for a, b in pending_pairs(project)
        if a in name and b in name])
