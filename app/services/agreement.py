"""How far a project's annotators agree: the consensus of its live answers, and the agreement
of each annotator, of each pair of annotators and of the whole team with it.

The consensus is :func:`reasoning.consensus.consensus` over every live answer (retracted ones
left out), keyed by concept ids; the view is :func:`reasoning.consensus.agreement`. Both are
computed again only when the answers change: the result is cached per project and per
fingerprint of its answers (the project's version, the newest answer id, the count of answers
and of retracted ones), so that a page polling the view costs one small query.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.schemas import AgreementRead
from app.services.labels.consensus import core_answers, live_answers
from app.services.state import ProjectState
from models import Answer, Project
from reasoning.consensus import agreement, consensus

__all__ = ["agreement_view"]

_CACHED = 16
_cache: OrderedDict[tuple[int, str, int], tuple[tuple[int, ...], AgreementRead]] = OrderedDict()
_lock = threading.Lock()


def _fingerprint(session: Session, project_id: int) -> tuple[int, ...]:
    """What changes whenever the live answers or the concepts they name change."""
    version = session.scalar(select(Project.version).where(Project.id == project_id))
    newest, count, retracted = session.execute(
        select(func.max(Answer.id), func.count(Answer.id), func.count(Answer.retracted_at))
        .where(Answer.project_id == project_id)).one()
    return (int(version or 0), int(newest or 0), int(count), int(retracted))


def _compute(session: Session, state: ProjectState, policy: str) -> AgreementRead:
    known = state.name_of
    answers = [answer for answer in core_answers(live_answers(session, state.project_id))
               if answer.a in known and answer.b in known and answer.a != answer.b]
    concepts: list[Hashable] = list(known)
    view = agreement(answers, consensus(answers, concepts))
    return AgreementRead.model_validate({"policy": policy, **view.as_dict()})


def agreement_view(session: Session, state: ProjectState, policy: str) -> AgreementRead:
    """The agreement of the project's answers with their consensus (module docstring).

    Parameters
    ----------
    session
        A read session of the project.
    state
        The project's cached state (its concept ids).
    policy
        The project's policy, reported with the view.
    """
    engine = session.get_bind().engine
    key = (id(engine), str(engine.url), state.project_id)
    mark = _fingerprint(session, state.project_id)
    with _lock:
        cached = _cache.get(key)
    if cached is not None and cached[0] == mark:
        return cached[1].model_copy(update={"policy": policy})
    view = _compute(session, state, policy)
    with _lock:
        _cache[key] = (mark, view)
        _cache.move_to_end(key)
        while len(_cache) > _CACHED:
            _cache.popitem(last=False)
    return view
