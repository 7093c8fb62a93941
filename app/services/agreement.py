"""How far a project's annotators agree: the consensus of its live answers, and the agreement
of each annotator, of each pair of annotators and of the whole team with it.

The consensus is :func:`reasoning.consensus.consensus` over every live answer that counts
(retracted ones and those of excluded annotators left out), keyed by concept ids; the view is
:func:`reasoning.consensus.agreement` of every live answer with it (an excluded annotator's
row says ``excluded`` and how far their answers agree with the consensus of the others). Both are
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
    counting,
    excluded_annotators,
    keep_agreement,
    live_answers,
    votes,
)
from reasoning.consensus import agreement, consensus

__all__ = ["agreement_view"]


def _compute(session: Session, state: ProjectState, policy: str) -> AgreementRead:
    known = state.name_of
    excluded = excluded_annotators(session, state.project_id)
    rows = live_answers(session, state.project_id)
    answers = [answer for answer in votes(rows)
               if answer.a in known and answer.b in known and answer.a != answer.b]
    kept = {r.id for r in counting(rows, excluded)}
    concepts: list[Hashable] = list(known)
    view = agreement(answers, consensus([a for a in answers if a.order in kept], concepts))
    read = AgreementRead.model_validate({"policy": policy, **view.as_dict()})
    for row in read.annotators:
        row.excluded = row.annotator in excluded
    return read


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
