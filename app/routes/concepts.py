"""``/projects/{pid}/concepts``: register, list, rename, merge and delete concepts."""

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
from app.routes.jobs import HeavyChange, HeavyTextChange, change_responses
from app.schemas import (
    ConceptDeleted,
    ConceptPage,
    ConceptRead,
    ConceptRename,
    ConceptsCreate,
    ConceptsCreated,
    ConceptsMerge,
    ConceptsMerged,
    Name,
)
from app.security import MemberDep, ProjectKeyDep
from app.services import concepts as service
from app.services import corpus, corrections

__all__ = ["router"]

RawConcepts = Annotated[dict[str, Any], documented_as(ConceptsCreate), Body()]

router = APIRouter(prefix="/projects/{project_id}/concepts", tags=["concepts"],
                   responses=problem_responses(401, 403, 404, 422, 503),
                   route_class=StrictJSONRoute)


@router.post("", dependencies=[ProjectKeyDep], status_code=201, response_model=ConceptsCreated,
             responses={**problem_responses(409, 413), **change_responses()})
def add_concepts(raw: RawConcepts, changes: HeavyTextChange,
                 work: WriteProject) -> ConceptsCreated | JSONResponse:
    """Register concepts by name; a name already registered is not an error.

    Texts sent with them change what computed features come from: the pool's features are
    computed again, in the request or by a job (202 with its `Location`: `Prefer:
    respond-async`, or a large project).
    """
    body = validate_body(ConceptsCreate, raw)  # here, in the worker thread, not the event loop
    texts = {c.name: c.text for c in body.concepts if c.text is not None}

    def store(recompute: bool) -> tuple[ConceptsCreated, bool]:
        changed = True
        if recompute:
            created, concepts = service.add_concepts(work, body.concepts)
        else:
            created, concepts = service.add_concepts(
                work, [c.model_copy(update={"text": None}) for c in body.concepts])
            plan, _ = corpus.change_corpus(work, texts=texts, recompute=False)
            changed = bool(plan.texts)
        return ConceptsCreated(created=created,
                               concepts=[ConceptRead.model_validate(c) for c in concepts]), changed

    if not texts:
        return store(True)[0]
    return changes.apply(work, store)


@router.get("", dependencies=[MemberDep], response_model=ConceptPage)
def list_concepts(view: ReadProject, limit: Limit = 100, offset: Offset = 0) -> ConceptPage:
    """The concepts in registration order."""
    concepts, total = service.list_concepts(view.session, view.project.id, limit, offset)
    return ConceptPage(items=[ConceptRead.model_validate(c) for c in concepts], total=total)


@router.post("/rename", dependencies=[ProjectKeyDep], response_model=ConceptRead,
             responses={**problem_responses(409, 413), **change_responses()})
def rename_concept(body: ConceptRename, changes: HeavyChange,
                   work: WriteProject) -> ConceptRead | JSONResponse:
    """Rename a concept: its labels, pool pairs and proofs follow.

    A name already taken is 422 (merge the two instead). In a project whose features sporal
    computes, every pool pair's features are computed again: in the request, or by a job (202
    with its `Location`: `Prefer: respond-async`, or a large project).
    """

    def store(recompute: bool) -> tuple[ConceptRead, bool]:
        concept = corrections.rename_concept(work, body.name, body.new_name,
                                             recompute=recompute)
        return ConceptRead.model_validate(concept), body.new_name != body.name

    return changes.apply(work, store)


@router.post("/merge",
             dependencies=[ProjectKeyDep],
             response_model=ConceptsMerged, responses=problem_responses(409, 413))
def merge_concepts(body: ConceptsMerge, work: WriteProject) -> ConceptsMerged:
    """Merge concept `merge` into `keep` (two names of one concept).

    Its labels move to `keep` and are closed again with the others in the order they were
    asserted: a contradiction refuses the merge (409 `contradiction`, `proof` in the original
    labels); a duplicate label, or a negative between the two, is retracted. Its pool pairs,
    links (and text, when `keep` has none) move; `merge` goes.
    """
    return corrections.merge_concepts(work, body.keep, body.merge)


@router.delete("",
               dependencies=[ProjectKeyDep],
               response_model=ConceptDeleted, responses=problem_responses(409))
def delete_concept(work: WriteProject,
                   name: Annotated[Name, Query(description="The concept's name.")]
                   ) -> ConceptDeleted:
    """Delete a concept with its pool pairs, text and links.

    Refused (409 `in-use`, `labels` lists them) while a live label names it: retract them first.
    """
    return corrections.delete_concept(work, name)
