"""``/projects/{pid}/next``, ``/suggestions`` and ``/predictions``: what to ask next, what was
asked, and the concept map."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.routes.common import (
    Fresh,
    Limit,
    Offset,
    ReadProject,
    SettingsDep,
    StrictJSONRoute,
    WriteProject,
    problem_responses,
)
from app.schemas import Name, NextQueries, PredictionPage, SuggestionPage
from app.security import CallerDep, MemberDep, ProjectKeyDep
from app.services import queries as service
from reasoning.strategies import ALL_STRATEGIES, STRATEGIES

__all__ = ["router", "strategy_description"]

router = APIRouter(prefix="/projects/{project_id}", tags=["questions"],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)
# (409 on next: a concurrent change kept moving the project; retry)

MAX_BATCH = 100
CONSISTENT_DEFAULT = True  # measured: the consistent map ranks the test pairs better (README)


def strategy_description() -> str:
    """What the ``strategy`` parameter of ``next`` says: the registry's names and aliases."""
    aliases = "), ".join(f"{alias} ({s.name}" for s in STRATEGIES for alias in s.aliases)
    return (f"{', '.join(ALL_STRATEGIES)}, or {aliases}; the answer names the resolved "
            "strategy). Any case; `plus` may stand for `+`, which a query string otherwise "
            "reads as a space.")


@router.get("/next", dependencies=[MemberDep], response_model=NextQueries)
def next_queries(
    work: WriteProject,
    settings: SettingsDep,
    caller: CallerDep,
    strategy: Annotated[str, Query(max_length=32,
                                   description=strategy_description())] = "default",
    k: Annotated[int, Query(ge=1, le=MAX_BATCH, description="How many questions.")] = 1,
    annotator: Annotated[Name | None, Query(description=(
        "Reserve the returned pairs for this annotator for a lease; other annotators are "
        "not asked them until a label or the lease's end releases them. With an annotator "
        "key: that key's annotator (another name is 403)."))] = None,
    fresh: Fresh = False,
) -> NextQueries:
    """The next questions, best first; only undecided pool pairs are ever suggested.

    The strategy's model is the newest one trained in the background (`model.labels_behind`
    says how many labels it has not seen yet); `fresh=true` waits for one trained on the
    current labels.
    """
    return service.next_queries(work, service.parse(strategy), k, caller.speaks_for(annotator),
                                settings.lease_seconds, fresh=fresh)


@router.get("/predictions", dependencies=[MemberDep], response_model=PredictionPage)
def predictions(
    view: ReadProject,
    limit: Limit = 100,
    offset: Offset = 0,
    min_probability: Annotated[float | None, Query(ge=0.0, le=1.0, allow_inf_nan=False,
                                                   description="Keep pairs whose probability "
                                                   "of positive is at least this.")] = None,
    fresh: Fresh = False,
    consistent: Annotated[bool, Query(description=(
        "Complete the decided labels with the model into a strict order: every pair gets a "
        "label (probability ≥ 0.5: positive), the labels never contradict each other or the "
        "decided pairs, and a source: asserted, inferred, predicted, or forced (consistency "
        "overrode the pair's own prediction). false: the model's raw probabilities."))]
    = CONSISTENT_DEFAULT,
) -> PredictionPage:
    """Every pool pair: its label if decided, else the prediction model's probability.

    The model is the newest one trained in the background (`model.labels_behind`);
    `fresh=true` waits for one trained on the current labels.
    """
    return service.predictions(view, limit=limit, offset=offset,
                               min_probability=min_probability, fresh=fresh,
                               consistent=consistent)


@router.get("/suggestions", dependencies=[ProjectKeyDep], response_model=SuggestionPage)
def suggestions(
    view: ReadProject,
    annotator: Annotated[Name | None, Query(description="Only this annotator's questions.")]
    = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> SuggestionPage:
    """The log of the questions `next` suggested, newest first."""
    items, total = service.list_suggestions(view.session, view.project.id, annotator=annotator,
                                            limit=limit, offset=offset)
    return SuggestionPage(items=items, total=total)
