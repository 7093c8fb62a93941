"""The ``consensus`` policy: every label posted is an answer, none refused; the asserted
labels are the consensus of the live answers (``docs/consensus_service.md``).

One label (:meth:`ConsensusPolicy.post`): an annotator repeating their own latest answer on the
pair adds nothing (200, as in ``strict``); an answer on a pair nobody answered that the closure
does not contradict takes the **fast path**, asserted exactly like a ``strict`` label (the
consensus of answers without contradictions is their labels); an answer that gives its pair's
label the value every answer on it gives is kept as ``agreed`` (no label can change); every
other answer takes the **full path**, a :class:`app.services.labels.change.TeamChange` that
refits the reliabilities and computes the whole consensus again; in a project of
``SPORAL_CONSENSUS_LOCAL_FROM`` labels or more it takes the **local path** instead
(:mod:`app.services.labels.incremental`): repaired on its own pair now, refitted by a
background job. Bulk labels and imports: every
label an answer, one full path for all of them. Retractions, a reviewer's resolution and a
switch to ``consensus`` are full paths too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.errors import DisagreementNotFound, ReviewConflict
from app.schemas import (
    AnswerRetracted,
    BulkLabels,
    BulkLabelsCreated,
    LabelCreated,
    LabelIn,
    LabelRetracted,
    Resolution,
    label_value,
)
from app.security import AnswerOwner, Caller
from app.services.annotators import record_answer
from app.services.asking import TeamQuestion, team_question
from app.services.labels.change import (
    Applied,
    NewAnswer,
    Recomputed,
    TeamChange,
    answer_check,
    latest_resolution,
    plan_change,
    run_change,
    store_change,
)
from app.services.labels.incremental import LocalPath, local_ready, plan_local, store_local
from app.services.labels.proofs import check_pair
from app.services.labels.shared import (
    ClosureDiff,
    Planned,
    Written,
    closure_diff,
    label_created,
    live_answer,
    live_pair,
    owner_of,
    resolve_bulk,
    store_label,
    within_budget,
)
from app.services.labels.store import release
from app.services.labels.team_bulk import post_team_bulk
from app.services.state import LiveLabel
from app.services.team import (
    LiveAnswer,
    consensus_as_of,
    excluded_annotators,
    pair_answers,
)
from app.services.unit import ProjectWork
from models import CheckQuestion, Disagreement, Project, utcnow
from reasoning.closure import ContradictionError

__all__ = ["CONSENSUS", "ConsensusPolicy", "reopen_disagreement", "resolve_disagreement",
           "undo_resolution"]


def served_check(session: Session, project_id: int, annotator: str | None, a_id: int,
                 b_id: int) -> int | None:
    """The check question on ``(a_id, b_id)`` served to ``annotator`` and not answered yet."""
    who = (CheckQuestion.annotator.is_(None) if annotator is None
           else CheckQuestion.annotator == annotator)
    return session.scalar(select(CheckQuestion.id).where(
        CheckQuestion.project_id == project_id, CheckQuestion.a_id == a_id,
        CheckQuestion.b_id == b_id, CheckQuestion.answer_id.is_(None), who)
        .order_by(CheckQuestion.id.desc()).limit(1))


def _disputed(session: Session, project_id: int, a_id: int, b_id: int) -> bool:
    """Whether ``(a_id, b_id)`` has an open disagreement (an agreeing answer on its reverse
    pair may settle it, so it takes the full path)."""
    return session.scalar(select(Disagreement.id).where(
        Disagreement.project_id == project_id, Disagreement.a_id == a_id,
        Disagreement.b_id == b_id, Disagreement.closed_at.is_(None)).limit(1)) is not None


# ---------------------------------------------------------------------------- one answer
@dataclass(frozen=True)
class _Repeat:
    row: LiveAnswer  # the annotator's own latest answer, the same value


@dataclass(frozen=True)
class _Agrees:
    live: LiveLabel  # the pair's label, which every answer on the pair gives
    check: int | None


@dataclass(frozen=True)
class _FullPath:
    change: TeamChange  # the answer, to the whole consensus
    plan: Recomputed


@dataclass(frozen=True)
class _FastPath:
    planned: Planned
    check: int | None


_Plan = _Repeat | _Agrees | _FullPath | _FastPath | LocalPath


def _plan_answer(work: ProjectWork, body: LabelIn) -> _Plan:
    """Which way one answer takes (module docstring), planned on the cached state."""
    state, session, positive = work.state, work.session, body.positive
    a_id, b_id = check_pair(state, body.a, body.b)
    rows = pair_answers(session, state.project_id, a_id, b_id)
    mine = [r for r in rows if r.annotator == body.annotator and not r.reviewer]
    if mine and mine[-1].positive == positive:
        return _Repeat(mine[-1])
    check = served_check(session, state.project_id, body.annotator, a_id, b_id)
    live = state.labels.get((a_id, b_id))
    excluded = excluded_annotators(session, state.project_id)
    if body.annotator in excluded:
        pass  # kept, not counted: the full path stores it as ``excluded``
    elif rows and live is not None and live.positive == positive and all(
            r.positive == positive for r in rows) and not _disputed(session, state.project_id,
                                                                    b_id, a_id):
        return _Agrees(live, check)  # nothing to dispute: no label can change
    elif not rows:
        was_decided = state.closure.status(a_id, b_id).value is not None
        within_budget(work, state.closure, a_id, b_id, positive, "this label")
        try:
            applied = state.add_label(a_id, b_id, positive)
        except ContradictionError:
            pass
        else:
            return _FastPath(Planned(a_id, b_id, applied, was_decided), check)
    change = TeamChange(add=(NewAnswer(a_id, b_id, positive, body.annotator,
                                       body.source or "api", check=check),), pair=(a_id, b_id))
    if body.annotator not in excluded and local_ready(work):  # a contested answer
        return plan_local(work, change, rows, excluded)  # repaired on its pair, refit later
    return _FullPath(change, plan_change(work, change))


def _store_answer(work: ProjectWork, project: Project, body: LabelIn,
                  plan: _Plan) -> Written[LabelCreated]:
    """Store one answer the way it was planned; the answer to the post."""
    state, session = work.state, work.session
    if isinstance(plan, _Repeat):
        live = state.labels.get((plan.row.a_id, plan.row.b_id))
        return Written(label_created(state, body, live, annotator=body.annotator),
                       created=False)
    if isinstance(plan, _FullPath):
        applied = store_change(work, project, plan.change, plan.plan)
        return Written(_full_created(work, body, applied))
    if isinstance(plan, LocalPath):
        return Written(store_local(work, project, body, plan))
    if isinstance(plan, _Agrees):
        live, outcome, update = plan.live, "agreed", None
        project.version += 1  # every stored answer moves the version
        release(session, state, [(state.id_of[body.a], state.id_of[body.b])])
    else:
        live = store_label(work, project, body, plan.planned)
        outcome, update = "asserted", plan.planned.update
    answer = record_answer(session, project.id, state.id_of[body.a], state.id_of[body.b],
                           body.positive, body.annotator, outcome=outcome,
                           source=body.source or "api", label_id=live.id,
                           check_question=plan.check is not None)
    answer_check(session, plan.check, answer.id)
    return Written(label_created(state, body, live, annotator=body.annotator,
                                 answer_id=answer.id, created_at=answer.created_at,
                                 update=update))


def _as_of(work: ProjectWork, project: Project,
           written: Written[LabelCreated]) -> Written[LabelCreated]:
    """``written`` saying how current the labels are after it (``consensus_as_of``)."""
    answer = written.answer.model_copy(update={"consensus": consensus_as_of(project,
                                                                            work.state)})
    return replace(written, answer=answer)


def _full_created(work: ProjectWork, body: LabelIn, applied: Applied) -> LabelCreated:
    """The answer to an answer that took the full path."""
    state, answer = work.state, applied.answers[0]
    pair = (answer.a_id, answer.b_id)
    live = state.labels.get(pair)
    created = label_created(state, body, live, annotator=body.annotator, answer_id=answer.id,
                            diff=_diff(work, applied), disagreement=applied.disagreement,
                            check_failed=answer.check and not body.positive)
    return created.model_copy(update={"disagreements": applied.on_pair(pair, state.name_of),
                                      "closed_others": applied.beside(pair)[0]})


def _diff(work: ProjectWork, applied: Applied) -> ClosureDiff:
    """What a stored full path changed (nothing when the labels stayed)."""
    if applied.plan.closure is None:
        return ClosureDiff()
    return closure_diff(work.state, applied.before, work.state.closure)


# ---------------------------------------------------------------------------- bulk
def _post_bulk(work: ProjectWork, body: BulkLabels, source: str) -> Written[BulkLabelsCreated]:
    """Keep every label of a bulk post or an import as an answer; one full path for all,
    planned and answered with no lock held and switched in by one short write
    (:mod:`app.services.labels.team_bulk`)."""
    return post_team_bulk(work, body.labels, resolve_bulk(work.state, body.labels), source)


# ---------------------------------------------------------------------------- retractions
def _retract_label(work: ProjectWork, label_id: int, caller: Caller) -> LabelRetracted:
    """``DELETE`` of a label: every live answer behind it (its pair, its value) is
    retracted and the consensus computed again without them, once ``caller`` may remove
    them all."""
    state = work.state
    pair = live_pair(work, label_id)
    positive = state.labels[pair].positive
    rows = [r for r in pair_answers(work.session, state.project_id, *pair)
            if r.positive == positive]
    caller.check_retract(AnswerOwner(r.annotator, r.reviewer) for r in rows)
    behind = frozenset(r.id for r in rows)
    work.end_read()
    applied = run_change(work, TeamChange(retract=behind, pair=pair))
    name = state.name_of
    return LabelRetracted(id=label_id, a=name[pair[0]], b=name[pair[1]],
                          label=label_value(positive), retracted_at=applied.stored_at,
                          undecided=_diff(work, applied).n_undecided)


def _retract_answer(work: ProjectWork, answer_id: int, caller: Caller) -> AnswerRetracted:
    """Retract one live answer (once ``caller`` may); the consensus is computed again
    without it."""
    answer = live_answer(work, answer_id)
    caller.check_retract([owner_of(answer.annotator, answer.role)])
    name = work.state.name_of
    a, b, positive = name[answer.a_id], name[answer.b_id], answer.positive
    work.end_read()
    applied = run_change(work, TeamChange(retract=frozenset([answer_id])))
    return AnswerRetracted(id=answer_id, a=a, b=b, label=label_value(positive),
                           retracted_at=applied.stored_at,
                           undecided=_diff(work, applied).n_undecided)


# ---------------------------------------------------------------------------- review
def _found(work: ProjectWork, disagreement_id: int) -> Disagreement:
    """The project's disagreement ``disagreement_id``, read as stored now; 404 if none."""
    found = work.session.get(Disagreement, disagreement_id, populate_existing=True)
    if found is None or found.project_id != work.state.project_id:
        raise DisagreementNotFound(disagreement_id)
    return found


def _in_consensus(work: ProjectWork, what: str) -> None:
    """409 unless the project is in ``consensus`` (nothing reviews disagreements otherwise)."""
    if work.project.policy != CONSENSUS.name:
        raise ReviewConflict(f"{what} needs the consensus policy; the project is "
                             f"{work.project.policy!r}")


def resolve_disagreement(work: ProjectWork, disagreement_id: int,
                         body: Resolution) -> Applied:
    """Resolve a disagreement with the reviewer's value: a reviewer's answer (final for its
    pair), the consensus computed again, the disagreement closed (reason ``reviewer``, and
    so is every other one the refit closes)."""
    found = _found(work, disagreement_id)
    pair = (found.a_id, found.b_id)
    work.end_read()
    reviewer = NewAnswer(*pair, body.label == "positive", body.annotator, "review",
                         role="reviewer")
    return run_change(work, TeamChange(add=(reviewer,), resolves=disagreement_id, pair=pair))


def undo_resolution(work: ProjectWork, disagreement_id: int) -> Applied:
    """Undo the disagreement's latest live resolution: its reviewer's answer retracted, the
    consensus computed again. The disagreement opens again if that resolution had closed it,
    and the refit decides: it stays open while the pair is contested, else it closes again
    (reason ``retraction``). 409 when no resolution of it stands."""
    found = _found(work, disagreement_id)
    _in_consensus(work, "undoing a resolution")
    answer_id = latest_resolution(work.session, disagreement_id)
    if answer_id is None:
        raise ReviewConflict(f"disagreement {disagreement_id} has no live resolution to undo")
    pair = (found.a_id, found.b_id)
    work.end_read()
    return run_change(work, TeamChange(retract=frozenset([answer_id]), pair=pair))


def reopen_disagreement(work: ProjectWork, disagreement_id: int) -> None:
    """Open a closed disagreement again for review, whatever the answers say: it stays open
    (listed, asked by ``next``) until a reviewer resolves it or the policy switches; the
    labels do not change. An open one is left as it is; 409 when another disagreement is
    open on its pair."""
    found = _found(work, disagreement_id)
    _in_consensus(work, "reopening a disagreement")
    if found.closed_at is None:
        return
    pair = (found.a_id, found.b_id)
    work.end_read()

    def store(work: ProjectWork, project: Project, plan: None) -> None:
        other = work.session.scalar(select(Disagreement.id).where(
            Disagreement.project_id == project.id, Disagreement.a_id == pair[0],
            Disagreement.b_id == pair[1], Disagreement.closed_at.is_(None)).limit(1))
        if other is not None:
            raise ReviewConflict(f"disagreement {other} is open on the same pair; review it")
        work.session.execute(update(Disagreement).where(Disagreement.id == disagreement_id)
                             .values(closed_at=None, closed_reason=None, reopened_at=utcnow())
                             .execution_options(synchronize_session=False))
        project.version += 1

    work.write(lambda work: None, store)


# ---------------------------------------------------------------------------- the policy
class ConsensusPolicy:
    """The ``consensus`` policy (module docstring), as :mod:`app.services.labels.policy`
    calls it."""

    name = "consensus"
    refuses = False  # no answer is refused for contradicting what is decided

    def post(self, work: ProjectWork, body: LabelIn) -> Written[LabelCreated]:
        """Keep one answer and bring the asserted labels to the consensus."""
        return work.write(lambda work: _plan_answer(work, body),
                          lambda work, project, plan: _as_of(
                              work, project, _store_answer(work, project, body, plan)))

    def post_bulk(self, work: ProjectWork, body: BulkLabels,
                  source: str) -> Written[BulkLabelsCreated]:
        return _post_bulk(work, body, source)

    def retract_label(self, work: ProjectWork, label_id: int,
                      caller: Caller) -> LabelRetracted:
        return _retract_label(work, label_id, caller)

    def retract_answer(self, work: ProjectWork, answer_id: int,
                       caller: Caller) -> AnswerRetracted:
        return _retract_answer(work, answer_id, caller)

    def team_question(self, work: ProjectWork, annotator: str | None,
                      proba: np.ndarray | None) -> TeamQuestion | None:
        """The team's question for ``annotator`` (:mod:`app.services.asking`)."""
        return team_question(work, annotator, proba)

    def adopt(self, work: ProjectWork) -> None:
        """Switch to ``consensus``: the consensus of every live answer becomes the asserted
        labels, in the same write transaction as the policy."""
        run_change(work, TeamChange(policy=self.name))


CONSENSUS = ConsensusPolicy()
