"""Concepts: register them (idempotently), list them, resolve names to ids."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from app.db import write_transaction
from app.errors import UnknownConcepts
from app.schemas import ConceptIn
from app.services.state import ProjectState, StateRegistry, catch_up
from models import Concept

__all__ = ["add_concepts", "list_concepts", "resolve"]


def resolve(state: ProjectState, names: Iterable[str]) -> list[int]:
    """The concept ids of ``names``; :class:`UnknownConcepts` naming every unknown one."""
    names = list(names)
    id_of = state.id_of
    unknown = [name for name in names if name not in id_of]
    if unknown:
        raise UnknownConcepts(unknown)
    return [id_of[name] for name in names]


def add_concepts(session: Session, registry: StateRegistry, project_id: int,
                 concepts: list[ConceptIn]) -> tuple[int, list[Concept]]:
    """Register ``concepts``; names already present are kept (a new description replaces).

    Returns the number of new concepts and every posted concept as stored, in posted order.
    """
    wanted: dict[str, str | None] = {}
    for concept in concepts:
        if concept.name not in wanted or concept.description is not None:
            wanted[concept.name] = concept.description
    with registry.locked(project_id) as state, \
            write_transaction(session, project_id) as project:
        assert project is not None
        catch_up(session, state, project)
        new = [{"project_id": project_id, "name": name, "description": description}
               for name, description in wanted.items() if name not in state.id_of]
        changed = False
        if new:
            session.execute(insert(Concept), new)
            changed = True
        for name, description in wanted.items():
            if name in state.id_of and description is not None:
                stored_concept = session.get(Concept, state.id_of[name])
                if stored_concept is not None and stored_concept.description != description:
                    stored_concept.description = description
        if changed:
            project.version += 1
            session.flush()
            catch_up(session, state, project)
        stored = {c.name: c for c in session.scalars(
            select(Concept).where(Concept.project_id == project_id,
                                  Concept.name.in_(list(wanted))))} if len(wanted) <= 1000 \
            else {c.name: c for c in session.scalars(
                select(Concept).where(Concept.project_id == project_id))}
    return len(new), [stored[name] for name in wanted]


def list_concepts(session: Session, project_id: int, limit: int,
                  offset: int) -> tuple[list[Concept], int]:
    total = session.scalar(
        select(func.count()).select_from(Concept).where(Concept.project_id == project_id)
    ) or 0
    concepts = session.scalars(select(Concept).where(Concept.project_id == project_id)
                               .order_by(Concept.id).limit(limit).offset(offset))
    return list(concepts), total
