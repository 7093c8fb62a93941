"""The agreement view of a large project, computed by a job while ``GET agreement`` serves
the last one (``docs/consensus.md``, "Agreement").

From ``SPORAL_AGREEMENT_JOB_FROM`` answers a view takes seconds to compute, so a read after
an answer serves the last view computed (``as_of.current`` false) and schedules the job
:data:`~app.services.jobs.AGREEMENT` (:func:`schedule_view`, one queued per project). The job
waits for a pause in the answers, as the refit does, then computes the view as
:func:`app.services.agreement.current_view` would, holding the project's lock only to
check that no write came since the answers were read and to take the consensus the answers
are judged by (:func:`_view_once`); it caches the view on the project's state and stores it
(:func:`app.services.agreement.save_view`), where a restarted process or another server
reads it. Overtaken by a write, it reads again, up to :data:`VIEW_TRIES` times; then it
computes under the lock.
"""

from __future__ import annotations

import time
from typing import Any

from app.db import Database
from app.services.agreement import (
    ComputedView,
    current_view,
    fit_for_view,
    save_view,
    view_of,
)
from app.services.jobs import AGREEMENT, JobContext, JobRecord, JobRunner
from app.services.labels.incremental import REFIT_BACKOFF, wait_quiet
from app.services.team import (
    answers_fingerprint,
    cached_agreement,
    excluded_annotators,
    keep_agreement,
    live_answers,
)
from app.services.unit import ProjectOpener, ProjectView

__all__ = ["VIEW_TRIES", "schedule_view", "view_job"]

VIEW_TRIES = 8
"""Times the job reads the answers and computes the view beside the project's writes before
it computes it under the project's lock."""


def _view_once(opener: ProjectOpener, database: Database, project_id: int
               ) -> tuple[tuple[int, ...], ComputedView] | None:
    """One try: the answers read with no lock, the consensus to judge them by taken under
    the lock if no write came since, the view computed with no lock (None: overtaken)."""
    with database.sessions() as session:
        mark = answers_fingerprint(session, project_id)  # first: any later write moves it
        rows = live_answers(session, project_id)
        excluded = excluded_annotators(session, project_id)
    with opener.open(ProjectView, project_id) as view:
        if answers_fingerprint(view.session, project_id) != mark:
            return None
        state = view.state
        held = cached_agreement(state, mark)
        if isinstance(held, ComputedView):
            return mark, held
        fit = None if view.project.consensus_as_of is None else \
            fit_for_view(state, rows, excluded)
        concepts = list(state.name_of)
    computed = view_of(project_id, concepts, rows, excluded, fit)
    keep_agreement(state, mark, computed)
    return mark, computed


def _view_locked(opener: ProjectOpener, project_id: int
                 ) -> tuple[tuple[int, ...], ComputedView]:
    """The view computed under the project's lock (the job was overtaken every time)."""
    with opener.open(ProjectView, project_id) as view:
        mark = answers_fingerprint(view.session, project_id)
        return mark, current_view(view.session, view.state).view


def view_job(opener: ProjectOpener, database: Database, project_id: int,
             context: JobContext) -> dict[str, Any]:
    """The job :data:`~app.services.jobs.AGREEMENT` (module docstring); its result: the
    answers the view counts and the tries it took."""
    context.progress(0.0, "waiting for a pause in the answers")
    wait_quiet(database, project_id)
    context.progress(0.0, "computing the agreement view")
    found = None
    tries = 0
    while found is None and tries < VIEW_TRIES:
        tries += 1
        found = _view_once(opener, database, project_id)
        if found is None:
            context.progress(tries / (VIEW_TRIES + 1), "overtaken; reading again")
            time.sleep(REFIT_BACKOFF)
    if found is None:
        found = _view_locked(opener, project_id)
    mark, computed = found
    save_view(database, project_id, mark, computed)
    return {"answers": int(computed.shape["answers"]), "tries": tries}


def schedule_view(runner: JobRunner, opener: ProjectOpener, project_id: int
                  ) -> JobRecord | None:
    """The project's view job: the one queued already, or a new one (None: the process
    holds too many jobs; the next read schedules one)."""
    return runner.submit_once(project_id, AGREEMENT, lambda context: view_job(
        opener, runner.database, project_id, context), quiet=True)

