"""How far a project's annotators agree: the consensus of its live answers, and the agreement
of each annotator, of each pair of annotators and of the whole team with it.

The consensus is :func:`reasoning.consensus.consensus` over every live answer (retracted ones
left out), keyed by concept ids; the view is :func:`reasoning.consensus.agreement`. Both are
computed again only when the answers change: the view is cached on the project's state with
the fingerprint of the answers it came from (:func:`app.services.team.answers_fingerprint`),
so that a page polling the view costs one small query.
"""

from __future__ import annotations

from collections.abc import Hashable

from sqlalchemy.orm import Session

from app.schemas import AgreementRead
from app.services.state import ProjectState
from app.services.team import (
    answers_fingerprint,
    cached_agreement,
    keep_agreement,
    live_answers,
    votes,
)
from reasoning.consensus import agreement, consensus

__all__ = ["agreement_view"]


def _compute(session: Session, state: ProjectState, policy: str) -> AgreementRead:
    known = state.name_of
    answers = [answer for answer in votes(live_answers(session, state.project_id))
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
    mark = answers_fingerprint(session, state.project_id)
    cached = cached_agreement(state, mark)
    if cached is not None:
        return cached.model_copy(update={"policy": policy})
    view = _compute(session, state, policy)
    keep_agreement(state, mark, view)
    return view
