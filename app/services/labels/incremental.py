"""Incremental consensus: a contested answer repaired on its own pair now, the full consensus
refitted by a background job (``docs/consensus.md``, "Incremental consensus").

A contested answer on a project with at least ``SPORAL_CONSENSUS_LOCAL_FROM`` asserted labels
whose last full fit this process holds (or rebuilds from the accuracies stored with it,
:func:`app.services.team.held_fit`) takes the **local path** (:func:`plan_local`,
:func:`store_local`): it reads only its pair's answers, computes the pair with the last fit's
accuracies held fixed (:func:`reasoning.consensus.incremental.repair`), asserts the pair's
label when its answers give it one the other labels do not contradict (an assertion is
incremental in the closure store), updates only that pair's answers' outcomes and its
disagreement, and lists the pair as *pending* on the project. A decision that would retract or
flip the pair's label is held (the label kept, the pair contested) for the refit: a retraction
replays the closure from that label, up to the whole project.

The refit (:func:`refit`, as the job :data:`REFIT` from :func:`schedule_refit`) is the full
path of :class:`app.services.labels.change.TeamChange` with no answer added: the consensus of
every live answer, the labels brought to it, every outcome and disagreement synced (reason
``answers``), ``consensus_as_of`` moved to the newest answer and the pending pairs cleared.
Every full-path event (a retraction, a resolution, an exclusion, a policy switch, a merge, an
import, a bulk post) is such a refit too.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.db import Database
from app.schemas import (
    DisagreementPairRef,
    DisagreementRef,
    LabelCreated,
    LabelIn,
    label_value,
)
from app.services.agreement import ComputedView, keep_fitted_view, save_view, view_of
from app.services.jobs import REFIT, JobContext, JobRecord, JobRunner
from app.services.labels.change import (
    Applied,
    Fitted,
    Recomputed,
    TeamChange,
    plan_change,
    store_answers,
    store_change,
    sync_outcomes,
)
from app.services.labels.shared import Planned, label_created, store_label, within_budget
from app.services.team import (
    LiveAnswer,
    consensus_as_of,
    counting,
    excluded_annotators,
    held_fit,
    live_answers,
    pending_pairs,
    votes,
)
from app.services.unit import ProjectOpener, ProjectWork
from models import Answer, Concept, Disagreement, Project, utcnow
from reasoning.consensus import consensus
from reasoning.consensus.incremental import Repair, repair

__all__ = ["REFIT_BACKOFF", "REFIT_MAX_WAIT", "REFIT_QUIET", "LocalPath", "configure",
           "local_ready", "plan_local", "refit", "refit_job", "schedule_refit",
           "store_local", "wait_quiet"]

_local_from = 1000
"""Asserted labels from which a contested answer takes the local path (settings)."""


def configure(local_from: int) -> None:
    """Take the local path from ``local_from`` asserted labels on (0: always)."""
    global _local_from
    _local_from = local_from


def local_ready(work: ProjectWork) -> bool:
    """Whether a contested answer may take the local path: the project is large enough and
    this process holds a full fit to warm-start from, or rebuilds the last one from its
    stored accuracies (:func:`app.services.team.held_fit`: after a restart, or when another
    process refitted since); else the full path computes one."""
    state = work.state
    return len(state.labels) >= _local_from and held_fit(work.session, state) is not None


@dataclass(frozen=True)
class LocalPath:
    """One contested answer repaired on its pair: the answer, the pair's answers that count,
    the repair and the label it asserts (applied to the cached closure already)."""

    change: TeamChange
    rows: list[LiveAnswer]
    fixed: Repair
    planned: Planned | None


def plan_local(work: ProjectWork, change: TeamChange, rows: list[LiveAnswer],
               excluded: frozenset[str]) -> LocalPath:
    """Repair the pair of ``change``'s one answer (``rows``: the pair's live answers) with no
    lock held; an assertion is applied to the cached closure now, as a ``strict`` label."""
    state = work.state
    assert change.pair is not None and len(change.add) == 1
    a_id, b_id = change.pair
    counted = counting(rows, excluded)
    live = state.labels.get(change.pair)
    current = None if live is None else live.positive
    rest = state.closure.status(a_id, b_id).value if live is None else None
    fixed = repair(state.team.fit, [*votes(counted), *change.votes()], change.pair, current,
                   rest, closure=state.closure, hold=True)
    planned = None
    if fixed.action == "assert" and fixed.label is not None:
        within_budget(work, state.closure, a_id, b_id, fixed.label, "this label")
        applied = state.add_label(a_id, b_id, fixed.label)
        planned = Planned(a_id, b_id, applied, rest is not None)
    return LocalPath(change, counted, fixed, planned)


def store_local(work: ProjectWork, project: Project, body: LabelIn,
                plan: LocalPath) -> LabelCreated:
    """Store a local repair (inside the write transaction): the answer, the pair's label if
    it asserts one, its answers' outcomes and its disagreement, the pair pending."""
    session, state = work.session, work.state
    pair = cast(tuple[int, int], plan.fixed.pair)
    added = store_answers(work, project, plan.change.add)
    project.version += 1  # every stored answer moves the version
    if plan.planned is not None:
        value = label_value(bool(plan.fixed.label))  # the pair's label: its answers' value
        store_label(work, project, body.model_copy(update={"label": value}), plan.planned)
    sync_outcomes(session, plan.fixed.fit, [*plan.rows, *added], state)
    ref = _pair_disagreement(session, project.id, pair, plan.fixed.contested)
    pending = pending_pairs(project)
    if pair not in pending:
        project.consensus_pending = json.dumps([list(p) for p in [*pending, pair]])
    work.stage_team(replace(state.team, fit=plan.fixed.fit))
    answer = added[0]
    created = label_created(
        state, body, state.labels.get(pair), annotator=body.annotator,
        answer_id=answer.id, update=None if plan.planned is None else plan.planned.update,
        disagreement=ref, check_failed=answer.check and not body.positive)
    name = state.name_of
    refs = [] if ref is None else [DisagreementPairRef(id=ref.id, a=name[pair[0]],
                                                       b=name[pair[1]], state=ref.state)]
    return created.model_copy(update={"disagreements": refs,
                                      "consensus": consensus_as_of(project, state)})


def _pair_disagreement(session: Session, project_id: int, pair: Any,
                       contested: bool) -> DisagreementRef | None:
    """Open the pair's disagreement when it is contested and none is open; close the open
    one (reason ``answers``) when it is not, unless a reviewer reopened it."""
    row = session.execute(select(Disagreement.id, Disagreement.reopened_at).where(
        Disagreement.project_id == project_id, Disagreement.a_id == pair[0],
        Disagreement.b_id == pair[1], Disagreement.closed_at.is_(None)).limit(1)).first()
    if row is None and contested:
        opened = Disagreement(project_id=project_id, a_id=pair[0], b_id=pair[1],
                              opened_at=utcnow())
        session.add(opened)
        session.flush()
        return DisagreementRef(id=opened.id, state="opened")
    if row is None:
        return None
    if contested or row.reopened_at is not None:
        return DisagreementRef(id=row.id, state="open")
    session.execute(update(Disagreement).where(Disagreement.id == row.id)
                    .values(closed_at=utcnow(), closed_reason="answers")
                    .execution_options(synchronize_session=False))
    return DisagreementRef(id=row.id, state="closed")


# ---------------------------------------------------------------------------- the refit
REFIT_TRIES = 8
"""Times a refit computes the consensus before it takes the project's lock; overtaken by
another write each time, it computes it under the lock (holding the project's writes)."""

REFIT_BACKOFF = 0.5
"""Seconds an overtaken refit waits before it reads the answers again: a team posting in a
burst overtakes it; a pause lets it through."""

REFIT_QUIET = 1.0
"""Seconds without a new answer in the project that a refit waits for before it computes:
the refit of a large project is seconds of CPU in the same process as the team's posts, and
run beside a burst of answers it slowed each of them (and was overtaken by them)."""

REFIT_MAX_WAIT = 10.0
"""The longest a refit waits for that quiet: a team that never pauses gets a refit at least
this often (plus its computation)."""


def _last_answer_at(database: Database, project_id: int) -> datetime | None:
    with database.sessions() as session:
        return session.scalar(select(Answer.created_at).where(Answer.project_id == project_id)
                              .order_by(Answer.id.desc()).limit(1))


def wait_quiet(database: Database, project_id: int, *, quiet: float = REFIT_QUIET,
               longest: float = REFIT_MAX_WAIT) -> float:
    """Wait until the project's newest answer is ``quiet`` seconds old, at most ``longest``
    seconds; the seconds waited."""
    start = time.monotonic()
    while (waited := time.monotonic() - start) < longest:
        last = _last_answer_at(database, project_id)
        left = 0.0 if last is None else quiet - (utcnow() - last).total_seconds()
        if left <= 0:
            break
        time.sleep(min(left, longest - waited))
    return time.monotonic() - start


def refit(work: ProjectWork, fitted: Fitted | None = None) -> Applied | None:
    """The full consensus of every live answer stored (None: nothing was pending).

    ``fitted``: the answers and their consensus read without the lock at a project version;
    used when no write came since (every stored answer moves the version), else read and
    computed again."""
    if not pending_pairs(work.project):  # none in ``strict`` (its switch clears them)
        return None
    work.end_read()
    change = TeamChange()

    def compute(work: ProjectWork) -> Recomputed:
        ready = fitted is not None and work.state.version == fitted.version
        return plan_change(work, change, fitted if ready else None)

    return work.write(compute, lambda work, project, plan: store_change(work, project, change,
                                                                         plan))


def _fit_unlocked(database: Database, project_id: int
                  ) -> tuple[Fitted, ComputedView] | None:
    """The project's live answers, their consensus and agreement view at its version now,
    computed with no lock held (None: nothing pending, or no project)."""
    with database.sessions() as session:
        project = session.get(Project, project_id)
        if project is None or not pending_pairs(project):
            return None
        version = project.version
        live = live_answers(session, project_id)
        excluded = excluded_annotators(session, project_id)
        concepts = list(session.scalars(select(Concept.id).where(
            Concept.project_id == project_id, Concept.deleted_at.is_(None))))
    fitted = Fitted(version, live, excluded,
                    consensus(votes(counting(live, excluded)), concepts))
    return fitted, view_of(project_id, concepts, live, excluded, fitted.result)


def _refit_once(opener: ProjectOpener, project_id: int,
                fitted: tuple[Fitted, ComputedView] | None
                ) -> tuple[bool, Applied | None, tuple[int, ...] | None]:
    """One try: (whether it ran, what it stored, the answers' fingerprint of the agreement
    view computed with it when that view was kept: its fit was stored). It runs unless
    ``fitted`` was overtaken before the lock."""
    with opener.open(ProjectWork, project_id) as work:
        if fitted is not None and work.project.version != fitted[0].version:
            return False, None, None
        applied = refit(work, None if fitted is None else fitted[0])
        as_of = work.project.consensus_as_of
        if applied is not None and fitted is not None and as_of is not None and \
                applied.plan.result is fitted[0].result:
            return True, applied, keep_fitted_view(work.session, work.state, fitted[1])
    return True, applied, None


def refit_job(opener: ProjectOpener, database: Database, project_id: int,
              context: JobContext) -> dict[str, Any]:
    """The job :data:`REFIT`: once the answers pause (:func:`wait_quiet`), the consensus
    computed without the project's lock, then stored under it if no write came meanwhile
    (up to :data:`REFIT_TRIES` times, :data:`REFIT_BACKOFF` apart; then computed under the
    lock); its result says what changed."""
    context.progress(0.0, "waiting for a pause in the answers")
    wait_quiet(database, project_id)
    context.progress(0.0, "refitting the consensus")
    applied = None
    for tries in range(REFIT_TRIES + 1):
        fitted = _fit_unlocked(database, project_id) if tries < REFIT_TRIES else None
        if fitted is None and tries < REFIT_TRIES:
            break  # nothing pending (any more)
        ran, applied, kept = _refit_once(opener, project_id, fitted)
        if kept is not None and fitted is not None:
            save_view(database, project_id, kept, fitted[1])
        if ran:
            break
        context.progress((tries + 1) / (REFIT_TRIES + 1), "overtaken; computing again")
        time.sleep(REFIT_BACKOFF)
    if applied is None:
        return {"refitted": False}
    closed, opened = applied.beside((-1, -1))
    return {"refitted": True, "labels_retracted": len(applied.plan.remove),
            "labels_asserted": len(applied.plan.add), "disagreements_closed": closed,
            "disagreements_opened": opened}


def schedule_refit(runner: JobRunner, opener: ProjectOpener, project_id: int,
                   *, quiet: bool = True) -> JobRecord | None:
    """The project's refit job: the one queued already (one pending refit per project), or a
    new one. With ``quiet``, a process holding too many jobs schedules none (the next
    contested answer, or ``POST .../consensus/refit``, does) instead of raising
    :class:`~app.errors.JobsBusy`."""
    return runner.submit_once(project_id, REFIT, lambda context: refit_job(
        opener, runner.database, project_id, context), quiet=quiet)
