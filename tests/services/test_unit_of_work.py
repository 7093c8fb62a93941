"""The unit of work (app.services.unit) through its public interface, on a real SQLite file.

No HTTP and nothing patched: each "process" is its own registry of cached states and its own
engine on the same database file, the way two workers of the service share one database.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from app.db import Database, migrate, write_transaction
from app.errors import ConcurrentChange
from app.schemas import ConceptIn
from app.services.idempotency import Idempotency, StoredResponse, request_hash
from app.services.state import StateRegistry
from app.services.training import Trainer
from app.services.unit import ProjectWork, open_project
from app.settings import Settings
from models import AssertedLabel, Concept, IdempotencyRecord, Project
from tests.api.databases import sqlite_url


@dataclass
class Process:
    """One worker of the service: its database engine, cached states and trainer."""

    database: Database
    registry: StateRegistry
    trainer: Trainer

    @contextmanager
    def work(self, project_id: int) -> Iterator[ProjectWork]:
        with self.database.sessions() as session, open_project(
                ProjectWork, session, self.registry, self.trainer, project_id,
                fresh_timeout=1.0) as work:
            yield work

    def close(self) -> None:
        self.trainer.close()
        self.database.dispose()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("unit") / "template.db"
    migrate(sqlite_url(path))
    return path


@pytest.fixture
def processes(template: Path, tmp_path: Path) -> Iterator[Callable[[], Process]]:
    """Start processes on one fresh database (a copy of the migrated template)."""
    path = tmp_path / "unit.db"
    shutil.copy(template, path)
    url = sqlite_url(path)
    started: list[Process] = []

    def start() -> Process:
        registry = StateRegistry()
        process = Process(Database(url, Settings(database_url=url)), registry, Trainer(registry))
        started.append(process)
        return process

    yield start
    for process in started:
        process.close()


@pytest.fixture
def project(processes: Callable[[], Process]) -> tuple[Process, int]:
    """A process and a project with the concepts c0, c1, c2."""
    process = processes()
    with process.database.sessions() as session, session.begin():
        project = Project(name="unit of work")
        session.add(project)
        session.flush()
        session.add_all([Concept(project_id=project.id, name=f"c{i}") for i in range(3)])
        project.version += 1
        pid = project.id
    return process, pid


# ---------------------------------------------------------------------------- helpers
def add_concept(name: str) -> Callable[[ProjectWork, Project, str], int]:
    """A ``store`` step that inserts the concept ``name`` and answers the new version."""

    def store(work: ProjectWork, project: Project, plan: str) -> int:
        work.session.add(Concept(project_id=project.id, name=plan))
        project.version += 1
        return project.version

    return store


def names(process: Process, pid: int) -> list[str]:
    with process.database.sessions() as session:
        return sorted(session.scalars(select(Concept.name).where(Concept.project_id == pid)))


def count(process: Process, table: Any, pid: int) -> int:
    with process.database.sessions() as session:
        return session.scalar(select(func.count()).select_from(table)
                              .where(table.project_id == pid)) or 0


# ---------------------------------------------------------------------------- writes
def test_a_write_commits_and_the_state_is_at_its_version(project: tuple[Process, int]) -> None:
    process, pid = project
    with process.work(pid) as work:
        version = work.write(lambda work: "c3", add_concept("c3"))
        assert work.project.version == version
        assert work.state.version == version  # the cache is at the version it wrote
    assert names(process, pid) == ["c0", "c1", "c2", "c3"]
    with process.database.sessions() as session:
        stored = session.get(Project, pid)
        assert stored is not None and stored.version == version


def test_a_write_overtaken_by_another_process_catches_up_and_computes_again(
        processes: Callable[[], Process], project: tuple[Process, int]) -> None:
    first, pid = project
    other = processes()
    seen: list[set[str]] = []

    def compute(work: ProjectWork) -> str:
        seen.append(set(work.state.id_of))
        if len(seen) == 1:  # between this compute and its store, another process writes
            with other.work(pid) as elsewhere:
                elsewhere.write(lambda work: "late", add_concept("late"))
        return f"after {len(work.state.id_of)} concepts"

    with first.work(pid) as work:
        work.write(compute, add_concept("mine"))
        assert "late" in work.state.id_of  # the cache caught up with the other write
    assert len(seen) == 2, "the plan made before the other write was stored"
    assert "late" not in seen[0] and "late" in seen[1]
    # The plan stored is the one computed after catching up (4 concepts: c0..c2 and late).
    assert names(first, pid) == ["after 4 concepts", "c0", "c1", "c2", "late"]


def test_a_write_transaction_reads_the_locked_project_as_it_is_now(
        processes: Callable[[], Process], project: tuple[Process, int]) -> None:
    """The session keeps its objects across commits; the locked row must not be one of them.

    A write overtaken once is computed again in a second transaction of the same session: if
    that transaction saw the version of the first, a third write in between would go unseen
    (no catch-up, and two writes stamped with one version).
    """
    first, pid = project
    other = processes()
    with first.database.sessions() as session:
        with write_transaction(session, pid) as locked:
            assert locked is not None
            seen = locked.version
        with other.work(pid) as elsewhere:  # another process writes between the two
            elsewhere.write(lambda work: "between", add_concept("between"))
        with write_transaction(session, pid) as locked:
            assert locked is not None
            assert locked.version == seen + 1


def test_a_plan_that_no_longer_holds_is_computed_again_inside_the_lock(
        project: tuple[Process, int]) -> None:
    process, pid = project
    calls: list[str] = []

    def holds(work: ProjectWork, plan: str) -> bool:
        calls.append(plan)
        return len(calls) > 1  # the first plan was overtaken (say, a pair leased elsewhere)

    with process.work(pid) as work:
        plans = iter(["first", "second"])
        work.write(lambda work: next(plans), add_concept("unused"), holds)
    assert calls == ["first", "second"]
    assert names(process, pid) == ["c0", "c1", "c2", "second"]

    with process.work(pid) as work, pytest.raises(ConcurrentChange):
        work.write(lambda work: "never", add_concept("unused"), lambda work, plan: False)
    assert "never" not in names(process, pid)


def test_an_exception_after_the_cache_changed_invalidates_it(
        project: tuple[Process, int]) -> None:
    process, pid = project

    def compute(work: ProjectWork) -> None:
        c0, c1 = work.state.id_of["c0"], work.state.id_of["c1"]
        work.state.add_label(c0, c1, True)  # the cache moves ahead of the database

    def store(work: ProjectWork, project: Project, plan: None) -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError), process.work(pid) as work:
        work.write(compute, store)
    state = process.registry.get(pid)
    assert state.version == -1  # dropped: the next unit of work rebuilds it
    with process.work(pid) as work:
        c0, c1 = work.state.id_of["c0"], work.state.id_of["c1"]
        assert work.state.closure.status(c0, c1).value is None
    assert count(process, AssertedLabel, pid) == 0


def test_atomically_every_write_or_none(project: tuple[Process, int]) -> None:
    process, pid = project
    with pytest.raises(RuntimeError), process.work(pid) as work, work.atomically():
        work.write(lambda work: "x", add_concept("x"))
        work.write(lambda work: "y", add_concept("y"))
        raise RuntimeError("the third record fails")
    assert names(process, pid) == ["c0", "c1", "c2"]
    assert process.registry.get(pid).version == -1  # the cache had moved ahead: dropped

    with process.work(pid) as work, work.atomically():
        work.write(lambda work: "x", add_concept("x"))
        work.write(lambda work: "y", add_concept("y"))
    assert names(process, pid) == ["c0", "c1", "c2", "x", "y"]


# ---------------------------------------------------------------------------- idempotency
def once(pid: int, key: str = "key-1") -> Idempotency:
    """The hook of an idempotent request whose write answers a new version as a 201."""
    return Idempotency(pid, key, request_hash("concept", ConceptIn(name="x")),
                       lambda version: StoredResponse(201, {"version": version}))


def test_an_idempotent_write_runs_once_and_replays_its_answer(
        project: tuple[Process, int]) -> None:
    process, pid = project
    runs: list[int] = []

    def run(work: ProjectWork) -> int:
        runs.append(1)
        return work.write(lambda work: "x", add_concept("x"))

    with process.work(pid) as work:
        first = work.idempotent(once(pid), lambda: run(work))
    with process.work(pid) as work:
        again = work.idempotent(once(pid), lambda: run(work))
    assert runs == [1]  # the retry ran nothing
    assert isinstance(again, StoredResponse) and again.replayed
    assert again.status == 201 and again.body == {"version": first}
    assert names(process, pid) == ["c0", "c1", "c2", "x"]
    assert count(process, IdempotencyRecord, pid) == 1


def test_an_answer_stored_meanwhile_by_another_process_is_replayed_and_nothing_stored(
        processes: Callable[[], Process], project: tuple[Process, int]) -> None:
    first, pid = project
    other = processes()
    stores: list[str] = []
    theirs: list[Any] = []

    def write(work: ProjectWork, name: str, between: Callable[[], None] | None) -> int:
        def compute(work: ProjectWork) -> str:
            c0, c1 = work.state.id_of["c0"], work.state.id_of["c1"]
            if not work.state.closure.status(c0, c1).asserted:
                work.state.add_label(c0, c1, True)  # the plan moves the cache
            if between is not None and not stores:
                between()
            return name

        def store(work: ProjectWork, project: Project, plan: str) -> int:
            stores.append(plan)
            work.session.add(Concept(project_id=project.id, name=plan))
            project.version += 1
            return project.version

        return work.write(compute, store)

    def elsewhere() -> None:  # the same request, retried on another process, goes first
        with other.work(pid) as work:
            theirs.append(work.idempotent(once(pid), lambda: write(work, "theirs", None)))

    with first.work(pid) as work:
        answer = work.idempotent(once(pid), lambda: write(work, "mine", elsewhere))
        assert isinstance(answer, StoredResponse) and answer.replayed
        c0, c1 = work.state.id_of["c0"], work.state.id_of["c1"]
        assert not work.state.closure.status(c0, c1).asserted  # the moved cache was dropped
    assert stores == ["theirs"]
    assert names(first, pid) == ["c0", "c1", "c2", "theirs"]
    assert answer.status == 201 and answer.body == {"version": theirs[0]}
    assert count(first, IdempotencyRecord, pid) == 1
