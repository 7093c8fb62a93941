"""How far a project's annotators agree: the consensus of its live answers, and the agreement
of each annotator, of each pair of annotators and of the whole team with it.

The consensus is :func:`reasoning.consensus.consensus` over every live answer that counts
(retracted ones and those of excluded annotators left out), keyed by concept ids; the view is
:func:`reasoning.consensus.agreement` of every live answer with it (an excluded annotator's
row says ``excluded`` and how far their answers agree with the consensus of the others).
In a ``consensus`` project the consensus is the project's last full fit
(:func:`app.services.team.last_fit`: its accuracies), each answered pair judged by the value
the labels give it now (the answers since that fit included), so no full consensus is
computed for the view; the background refit computes the view before its lock and keeps it
(:func:`view_of`, :func:`keep_fitted_view`). The view is computed again only when the answers
change. It is cached, with the ids of each annotator's minority answers (those
``GET answers?minority=true`` lists), on the project's state with the fingerprint of the
answers (:func:`app.services.team.answers_fingerprint`), so that a page polling the view, or
paging through minority answers, costs one small query.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db import Database, write_transaction
from app.schemas import AgreementRead
from app.services.state import ProjectState
from app.services.team import (
    LiveAnswer,
    answers_fingerprint,
    cached_agreement,
    counting,
    excluded_annotators,
    keep_agreement,
    last_fit,
    live_answers,
    votes,
)
from models import AgreementView, Project, utcnow
from reasoning.consensus import Consensus, agreement, consensus

__all__ = [
    "AGREEMENT_CSV_COLUMNS",
    "ComputedView",
    "ServedView",
    "agreement_rows",
    "agreement_view",
    "current_view",
    "fit_for_view",
    "kept_view",
    "minority_answer_ids",
    "keep_fitted_view",
    "store_view",
    "minority_url",
    "save_view",
    "view_of",
]

AGREEMENT_CSV_COLUMNS = [
    "annotator", "answers", "agreement", "accuracy", "accuracy_low", "accuracy_high",
    "checks_asked", "checks_failed", "false_no", "false_yes", "minority", "undecided",
    "minority_url", "shared_pairs", "rests_on_prior", "identifiable", "excluded", "trend",
    "trend_answers", "note"]
"""The columns of ``GET agreement?format=csv``: one row per annotator, the JSON row flattened
(``accuracy`` its estimate; ``trend`` and ``trend_answers`` each window's agreement and size,
oldest first, separated by spaces)."""


@dataclass(frozen=True)
class ComputedView:
    """The view's JSON shape without the policy, per annotator the ids of their minority
    answers, ascending, and when it was computed."""

    shape: dict[str, Any]
    minority: dict[str | None, tuple[int, ...]]
    computed_at: datetime = field(default_factory=utcnow)

    def encoded(self) -> str:
        """The view as stored (:class:`models.AgreementView`)."""
        return json.dumps({"shape": self.shape,
                           "minority": [[name, list(ids)] for name, ids in self.minority.items()]})

    @classmethod
    def decoded(cls, body: str, computed_at: datetime) -> ComputedView:
        """The view stored as ``body`` (:meth:`encoded`)."""
        found = json.loads(body)
        return cls(found["shape"], {name: tuple(ids) for name, ids in found["minority"]},
                   computed_at)


@dataclass(frozen=True)
class ServedView:
    """A view as ``GET agreement`` serves it: ``current`` when computed from the answers as
    they are now (fingerprint ``mark``), else the last one computed (a job computes the
    next); ``computed`` when computed in this request."""

    view: ComputedView
    current: bool
    mark: tuple[int, ...] = ()
    computed: bool = False


def minority_url(project_id: int, annotator: str | None) -> str:
    """The relative link that lists ``annotator``'s minority answers."""
    who = {"anonymous": "true"} if annotator is None else {"annotator": annotator}
    return f"/projects/{project_id}/answers?{urlencode({**who, 'minority': 'true'})}"


def _compute(session: Session, state: ProjectState, fitted: bool) -> ComputedView:
    """The view over every live answer: with the project's last full fit, each answered
    pair's value as the labels decide it now (``fitted``: a ``consensus`` project, whose fit
    is kept), or a consensus computed now."""
    excluded = excluded_annotators(session, state.project_id)
    rows = live_answers(session, state.project_id)
    fit = fit_for_view(state, rows, excluded) if fitted else None
    return view_of(state.project_id, list(state.name_of), rows, excluded, fit)


def fit_for_view(state: ProjectState, rows: Sequence[LiveAnswer],
                 excluded: frozenset[str]) -> Consensus:
    """The consensus a ``consensus`` project's view judges the answers ``rows`` by: the last
    full fit's accuracies, each answered pair's value as the labels decide it now (under the
    project's lock; ``rows`` read at the state's version)."""
    return _as_decided_now(state, last_fit(state, counting(rows, excluded)), rows)


def _as_decided_now(state: ProjectState, fit: Consensus,
                    rows: Sequence[LiveAnswer]) -> Consensus:
    """``fit`` with each answered pair's value as the project's labels decide it now: the
    answers since the last full fit (a new pair's first answer, an agreeing answer, a
    contested one repaired on its pair) are then judged as the labels stand, not left
    undecided."""
    closure = state.closure
    values: dict[Any, bool] = {}
    for row in rows:
        pair = (row.a_id, row.b_id)
        if pair not in values and row.a_id != row.b_id and row.a_id in state.name_of \
                and row.b_id in state.name_of:
            value = closure.status(row.a_id, row.b_id).value
            if value is not None:
                values[pair] = bool(value)
    return replace(fit, values=values)


def view_of(project_id: int, concepts: Sequence[Hashable], rows: Sequence[LiveAnswer],
            excluded: frozenset[str], fit: Consensus | None) -> ComputedView:
    """The view of the live answers ``rows`` with the consensus ``fit`` (None: computed now
    from the answers that count); touches no state (a refit computes it before its lock)."""
    known = set(concepts)
    answers = [answer for answer in votes(rows)
               if answer.a in known and answer.b in known and answer.a != answer.b]
    kept = {r.id for r in counting(rows, excluded)}
    if fit is None:
        fit = consensus([a for a in answers if a.order in kept], concepts)
    computed = agreement(answers, fit)
    shape = computed.as_dict()
    for row in shape["annotators"]:
        row["minority_url"] = minority_url(project_id, row["annotator"])
        row["excluded"] = row["annotator"] in excluded
    return ComputedView(shape, {name: tuple(ids) for name, ids in computed.minority.items()})


def _computed(session: Session, state: ProjectState, mark: tuple[int, ...]) -> ComputedView:
    """The view computed now from the answers of fingerprint ``mark`` (under the project's
    lock), and cached: in ``consensus`` with the last full fit's accuracies and the labels as
    they are now; else with the consensus of the answers as they are now."""
    project = session.get(Project, state.project_id)
    fitted = project is not None and project.consensus_as_of is not None  # consensus
    computed = _compute(session, state, fitted)
    keep_agreement(state, mark, computed)
    return computed


def kept_view(session: Session, state: ProjectState) -> ComputedView | None:
    """The last view computed for the project, whatever answers it was computed from: the
    one stored if it is of later answers than this process's (another process computed it),
    else this process's (None: none yet)."""
    held = state.team.agreement
    stored = session.scalar(select(AgreementView.mark).where(
        AgreementView.project_id == state.project_id))
    if stored is not None and (held is None or tuple(json.loads(stored)) > held[0]):
        row = session.execute(select(AgreementView.body, AgreementView.computed_at).where(
            AgreementView.project_id == state.project_id)).first()
        if row is not None:
            view = ComputedView.decoded(row.body, row.computed_at)
            keep_agreement(state, tuple(json.loads(stored)), view)
            return view
    return held[1] if held is not None and isinstance(held[1], ComputedView) else None


def current_view(session: Session, state: ProjectState, *,
                 stale_from: int | None = None) -> ServedView:
    """The view of the answers as they are now: cached, else computed now; or, for a project
    whose last view counted at least ``stale_from`` answers (None: never), that view while a job
    computes the next (:mod:`app.services.agreement_job`); its size is that of the last
    view. A project with no view yet has it computed now."""
    mark = answers_fingerprint(session, state.project_id)
    cached = cached_agreement(state, mark)
    if isinstance(cached, ComputedView):
        return ServedView(cached, True, mark)
    if stale_from is not None:
        kept = kept_view(session, state)
        if kept is not None and kept.shape["answers"] >= stale_from:
            return ServedView(kept, cached_agreement(state, mark) is kept, mark)
    return ServedView(_computed(session, state, mark), True, mark, computed=True)


def store_view(session: Session, project_id: int, mark: tuple[int, ...],
               view: ComputedView) -> None:
    """Store ``view``, computed from the answers of fingerprint ``mark``, as the project's
    last view (in the caller's write transaction)."""
    session.execute(delete(AgreementView).where(AgreementView.project_id == project_id))
    session.add(AgreementView(project_id=project_id, mark=json.dumps(list(mark)),
                              computed_at=view.computed_at, body=view.encoded()))


def keep_fitted_view(session: Session, state: ProjectState, view: ComputedView
                     ) -> tuple[int, ...]:
    """Cache ``view``, that of the full fit just stored, for the answers as they are now (a
    refit stores it, so that no reader waits for it; under the project's lock); the
    answers' fingerprint."""
    mark = answers_fingerprint(session, state.project_id)
    keep_agreement(state, mark, view)
    return mark


def save_view(database: Database, project_id: int, mark: tuple[int, ...],
              view: ComputedView) -> None:
    """Store ``view`` (fingerprint ``mark``) as the project's last view in a short write
    transaction of its own, unless a view of a later project version is stored already."""
    with database.sessions() as session, write_transaction(session, project_id):
        stored = session.scalar(select(AgreementView.mark).where(
            AgreementView.project_id == project_id))
        if stored is None or tuple(json.loads(stored)) <= mark:
            store_view(session, project_id, mark, view)


def agreement_view(session: Session, state: ProjectState, policy: str, *,
                   stale_from: int | None = None) -> tuple[AgreementRead, ServedView]:
    """The agreement of the project's answers with their consensus (module docstring), and
    how it was served (:func:`current_view`).

    Parameters
    ----------
    session
        A read session of the project.
    state
        The project's cached state (its concept ids).
    policy
        The project's policy, reported with the view.
    stale_from
        From how many answers the last view computed is served while a job computes the
        next (None: computed now).
    """
    served = current_view(session, state, stale_from=stale_from)
    shape = {"policy": policy, **served.view.shape,
             "as_of": {"computed_at": served.view.computed_at, "current": served.current}}
    return AgreementRead.model_validate(shape), served


def minority_answer_ids(session: Session, state: ProjectState, *, annotator: str | None = None,
                        anonymous: bool = False) -> tuple[int, ...]:
    """The ids of the answers that disagree with the consensus of the agreement view (the
    answers that count, per annotator and pair the latest; reviewers' never), ascending:
    ``annotator``'s, the anonymous ones (``anonymous``), or everyone's; of the view
    :func:`current_view` serves."""
    minority = current_view(session, state).view.minority
    if annotator is not None or anonymous:
        return minority.get(annotator, ())
    return tuple(sorted(i for ids in minority.values() for i in ids))


def _words(values: list[Any]) -> str:
    return " ".join(str(v) for v in values)


def agreement_rows(view: AgreementRead) -> Iterator[dict[str, Any]]:
    """The view's annotators as rows of :data:`AGREEMENT_CSV_COLUMNS`."""
    for row in view.annotators:
        flat = row.model_dump(exclude={"accuracy", "checks", "trend"})
        accuracy = row.accuracy
        yield {**flat,
               "accuracy": None if accuracy is None else accuracy.estimate,
               "accuracy_low": None if accuracy is None else accuracy.low,
               "accuracy_high": None if accuracy is None else accuracy.high,
               "checks_asked": row.checks.asked, "checks_failed": row.checks.failed,
               "trend": _words([round(w.agreement, 4) for w in row.trend]),
               "trend_answers": _words([w.answers for w in row.trend])}
