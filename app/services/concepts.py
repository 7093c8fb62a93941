"""Concepts: register them (idempotently), list them, resolve names to ids."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from app.errors import BudgetExceeded, UnknownConcepts
from app.schemas import ConceptIn
from app.services.corpus import set_texts
from app.services.state import ProjectState, load_rows
from app.services.unit import ProjectWork
from models import Concept, Project

__all__ = ["add_concepts", "list_concepts", "resolve"]


def resolve(state: ProjectState, names: Iterable[str]) -> list[int]:
    """The concept ids of ``names``; :class:`UnknownConcepts` naming every unknown one."""
    names = list(names)
    id_of = state.id_of
    unknown = [name for name in names if name not in id_of]
    if unknown:
        raise UnknownConcepts(unknown)
    return [id_of[name] for name in names]


def add_concepts(work: ProjectWork, concepts: list[ConceptIn]) -> tuple[int, list[Concept]]:
    """Register ``concepts``; names already present are kept (a new description replaces).

    Returns the number of new concepts and every posted concept as stored, in posted order.
    Texts sent with them are stored next (app.services.corpus), which in a project with
    computed features recomputes the pool's features.
    """
    wanted: dict[str, str | None] = {}
    for concept in concepts:
        if concept.name not in wanted or concept.description is not None:
            wanted[concept.name] = concept.description

    def compute(work: ProjectWork) -> list[dict[str, object]]:
        pid = work.state.project_id
        new: list[dict[str, object]] = [
            {"project_id": pid, "name": name, "description": description}
            for name, description in wanted.items() if name not in work.state.id_of]
        would_reach = len(work.state.id_of) + len(new)
        if new and would_reach > work.limits.concepts:
            raise BudgetExceeded("concepts", work.limits.concepts, would_reach,
                                 "these concepts")
        return new

    def store(work: ProjectWork, project: Project,
              new: list[dict[str, object]]) -> tuple[int, list[Concept]]:
        session, state = work.session, work.state
        if new:
            session.execute(insert(Concept), new)
        for name, description in wanted.items():
            if name in state.id_of and description is not None:
                stored_concept = session.get(Concept, state.id_of[name])
                if stored_concept is not None and stored_concept.description != description:
                    stored_concept.description = description
        if new:
            project.version += 1
            session.flush()
            load_rows(session, state)
        query = select(Concept).where(Concept.project_id == project.id)
        if len(wanted) <= 1000:
            query = query.where(Concept.name.in_(list(wanted)))
        stored = {c.name: c for c in session.scalars(query)}
        return len(new), [stored[name] for name in wanted]

    created = work.write(compute, store)
    texts = {concept.name: concept.text for concept in concepts if concept.text is not None}
    if texts:  # a second short write: the texts need the new concepts' ids
        set_texts(work, texts)
    return created


def list_concepts(session: Session, project_id: int, limit: int,
                  offset: int) -> tuple[list[Concept], int]:
    total = session.scalar(
        select(func.count()).select_from(Concept).where(Concept.project_id == project_id,
                                                        Concept.deleted_at.is_(None))
    ) or 0
    concepts = session.scalars(select(Concept).where(Concept.project_id == project_id,
                                                     Concept.deleted_at.is_(None))
                               .order_by(Concept.id).limit(limit).offset(offset))
    return list(concepts), total
