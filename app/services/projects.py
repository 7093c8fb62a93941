"""Projects: create, list, read with counts, update, delete, rotate the key."""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.db import write_transaction
from app.errors import ProjectNotFound
from app.schemas import ProjectCounts, ProjectCreate, ProjectDetail, ProjectUpdate, QueryBounds
from app.security import hash_key, new_key
from app.services.labels.policy import POLICIES
from app.services.state import ProjectState, StateRegistry
from app.services.unit import ProjectOpener, ProjectWork
from models import Project

__all__ = [
    "create_project",
    "delete_project",
    "get_project",
    "list_projects",
    "project_detail",
    "rotate_key",
    "rotate_reviewer_key",
    "update_project",
]


def create_project(session: Session, body: ProjectCreate,
                   default_model: str) -> tuple[Project, str]:
    """A new project and its API key (the key is returned here only; its hash is stored)."""
    key = new_key()
    with write_transaction(session):
        project = Project(name=body.name, description=body.description, version=0,
                          retraction_version=0, api_key_hash=hash_key(key),
                          prediction_model=body.prediction_model or default_model,
                          policy=body.policy, question=body.question)
        session.add(project)
    return project, key


def list_projects(session: Session, limit: int, offset: int) -> tuple[list[Project], int]:
    total = session.scalar(select(func.count()).select_from(Project)) or 0
    projects = session.scalars(select(Project).order_by(Project.id).limit(limit).offset(offset))
    return list(projects), total


def get_project(session: Session, project_id: int) -> Project:
    """The project row as of the current transaction; :class:`ProjectNotFound` if none."""
    project = session.get(Project, project_id, populate_existing=True)
    if project is None:
        raise ProjectNotFound(project_id)
    return project


def project_detail(project: Project, state: ProjectState) -> ProjectDetail:
    """The project with its counts and Theorem 2 bounds, from the caught-up state."""
    closure = state.closure
    asserted = closure.asserted
    asserted_positive = sum(1 for v in asserted.values() if v)
    values = state.values
    lower, upper = closure.query_bounds()
    counts = ProjectCounts(
        concepts=closure.n,
        pool_pairs=len(state.pool),
        asserted_labels=len(asserted),
        inferred_positive=closure.n_positive - asserted_positive,
        inferred_negative=closure.n_negative - (len(asserted) - asserted_positive),
        undecided_pool_pairs=int((values < 0).sum()),
    )
    return ProjectDetail.model_validate(
        {**_columns(project), "counts": counts, "query_bounds": QueryBounds(lower=lower,
                                                                           upper=upper)}
    )


def _columns(project: Project) -> dict[str, object]:
    return {"id": project.id, "name": project.name, "description": project.description,
            "created_at": project.created_at, "version": project.version,
            "feature_length": project.feature_length,
            "prediction_model": project.prediction_model,
            "features_computed": project.features_computed, "policy": project.policy,
            "question": project.question}


def update_project(session: Session, project_id: int, body: ProjectUpdate,
                   opener: ProjectOpener) -> Project:
    """Change a project's fields.

    A change of policy is the new policy's :meth:`~app.services.labels.LabelPolicy.adopt`, in
    the project's unit of work (through ``opener``), after the other fields: ``strict`` →
    ``consensus`` computes the consensus of every live answer and asserts it; ``consensus`` →
    ``strict`` keeps the current consensus as the asserted labels and closes the open
    disagreements.
    """
    changes = body.model_dump(exclude_unset=True)
    with write_transaction(session, project_id) as project:
        assert project is not None
        switch = changes.get("policy") not in (None, project.policy)
        for field in ("name", "prediction_model", "question"):
            if changes.get(field) is not None:
                setattr(project, field, changes[field])
        if "description" in changes:
            project.description = changes["description"]
        if changes:
            project.version += 1  # other processes drop their trained models
    if switch:
        with opener.open(ProjectWork, project_id, session) as work:
            POLICIES[changes["policy"]].adopt(work)
    return get_project(session, project_id)


def rotate_reviewer_key(session: Session, project_id: int) -> str:
    """A new reviewer key for the project; the old one stops working at once."""
    key = new_key()
    with write_transaction(session, project_id) as project:
        assert project is not None
        project.reviewer_key_hash = hash_key(key)
    return key


def delete_project(session: Session, registry: StateRegistry, project_id: int) -> None:
    """Delete the project and everything in it; this process forgets its cached state."""
    with write_transaction(session, project_id):
        session.execute(delete(Project).where(Project.id == project_id))
    state = registry.cached(project_id)
    if state is not None:
        with state.lock:  # a request of the project still running finishes first
            registry.drop(project_id)


def rotate_key(session: Session, project_id: int) -> str:
    """A new key for the project; the old one stops working at once."""
    key = new_key()
    with write_transaction(session, project_id) as project:
        assert project is not None
        project.api_key_hash = hash_key(key)
    return key
