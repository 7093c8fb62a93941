"""``/projects/{pid}/links`` and ``/projects/{pid}/pool/suggest``: the corpus features come from.

Concept texts travel with the concepts (``POST .../concepts``, field ``text``) or as import
records; links between concepts here. In a project whose features sporal computes, a change
of texts or links computes every pool pair's features again (docs/features.md), in the
request or, for a large project or on ``Prefer: respond-async``, in a job (app.routes.jobs).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse

from app.routes.common import (
    Limit,
    Offset,
    ReadProject,
    StrictJSONRoute,
    WriteProject,
    documented_as,
    problem_responses,
    validate_body,
)
from app.routes.jobs import HeavyChange, change_responses
from app.schemas import (
    LinkIn,
    LinkPage,
    LinksChanged,
    LinksCreate,
    Name,
    PoolSuggestions,
    SuggestedPair,
)
from app.security import ProjectKeyDep
from app.services import corpus as service
from app.services.pairs import suggest_pool as suggest

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}", tags=["texts and links"],
                   dependencies=[ProjectKeyDep],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)

ConceptQuery = Annotated[Name, Query(description="A concept's name.")]
RawLinks = Annotated[dict[str, Any], documented_as(LinksCreate), Body()]


@router.post("/links", status_code=201, response_model=LinksChanged,
             responses={**problem_responses(409, 413), **change_responses()})
def add_links(raw: RawLinks, changes: HeavyChange,
              work: WriteProject) -> LinksChanged | JSONResponse:
    """Add directed links (`source`'s text refers to `target`); a known link is not an error.

    Unknown concepts or a self link: 422 naming each, nothing stored. In a project with
    computed features every pool pair's features are computed again: in the request, or by a
    job (202 with its `Location`: `Prefer: respond-async`, or a large project).
    """
    body = validate_body(LinksCreate, raw)  # here, in the worker thread, not the event loop
    links = [(link.source, link.target) for link in body.links]

    def store(recompute: bool) -> tuple[LinksChanged, bool]:
        plan, recomputed = service.change_corpus(work, add_links=links, recompute=recompute)
        return LinksChanged(created=len(plan.links_added),
                            unchanged=len(set(links)) - len(plan.links_added),
                            recomputed_pairs=recomputed), plan.changed

    return changes.apply(work, store)


@router.get("/links", response_model=LinkPage)
def list_links(view: ReadProject, limit: Limit = 100, offset: Offset = 0) -> LinkPage:
    """The links in the order they were added."""
    links, total = service.list_links(view.session, view.state, limit, offset)
    return LinkPage(items=[LinkIn(source=u, target=v) for u, v in links], total=total)


@router.delete("/links", response_model=LinksChanged,
               responses={**problem_responses(409), **change_responses()})
def remove_link(changes: HeavyChange, work: WriteProject, source: ConceptQuery,
                target: ConceptQuery) -> LinksChanged | JSONResponse:
    """Remove the link from `source` to `target` (absent: nothing changes); the features are
    recomputed as for a new link (202 with a job when large or asked)."""

    def store(recompute: bool) -> tuple[LinksChanged, bool]:
        plan, recomputed = service.change_corpus(work, remove_links=[(source, target)],
                                                 recompute=recompute)
        removed = len(plan.links_removed)
        return LinksChanged(created=removed, unchanged=1 - removed,
                            recomputed_pairs=recomputed), plan.changed

    return changes.apply(work, store)


@router.post("/pool/suggest", response_model=PoolSuggestions,
             responses=problem_responses(409, 413))
def suggest_pool(work: WriteProject,
                 per_concept: Annotated[int, Query(ge=1, le=1000, description=(
                     "Neighbours per concept: alternately the next most similar text and the "
                     "next closest by links (1, then 2 links, either direction)."))] = 5,
                 register: Annotated[bool, Query(description=(
                     "Also register the suggested pairs (a project whose features sporal "
                     "computes, or an empty pool)."))] = False) -> PoolSuggestions:
    """Suggest pool pairs from the texts and links: both directions of each concept's nearest
    neighbours, so that the pool grows with the concepts, not with their square.

    Pairs already in the pool are left out. With `register=true` they are registered too.
    """
    items, registered = suggest(work, per_concept, register)
    return PoolSuggestions(items=[SuggestedPair(a=a, b=b, similarity=s, link_distance=d)
                                  for a, b, s, d in items], registered=registered)
