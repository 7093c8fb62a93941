"""The runtime reaches a project's unit of work outside a request too (imports, jobs)."""

from __future__ import annotations

import pytest

from app.errors import ProjectNotFound
from app.runtime import Runtime
from app.schemas import ProjectCreate
from app.services.projects import create_project
from app.services.unit import ProjectView, ProjectWork
from app.settings import Settings


def test_a_runtime_opens_a_project_in_its_own_session(database_url: str) -> None:
    runtime = Runtime.start(Settings(database_url=database_url, warm_up=False))
    try:
        with runtime.database.sessions() as session:
            project, _ = create_project(session, ProjectCreate(name="p"),
                                        runtime.settings.default_prediction_model)
        with runtime.open(ProjectWork, project.id) as work:
            assert (work.project.id, work.state.project_id) == (project.id, project.id)
            assert work.limits.concepts == runtime.settings.max_concepts
        with runtime.database.sessions() as session, \
                runtime.open(ProjectView, project.id, session) as view:
            assert view.session is session
        with pytest.raises(ProjectNotFound):
            with runtime.open(ProjectView, project.id + 1):
                pass
        assert runtime.registry.cached(project.id + 1) is None
    finally:
        runtime.close()
