"""Long imports: labels staged in short transactions, switched in at once, all or nothing.

The failure part-way and the reader during an import use the import's public seam, its
``progress`` callback (called after each staged write is committed): nothing is patched.
"""

from __future__ import annotations

import io
import itertools
import json
import random
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, func, select, text

from app.errors import ConcurrentChange
from app.runtime import Runtime
from app.security import ANYONE
from app.services.importing import file_source, import_source
from app.services.staging import STAGE_BATCH, LabelStage, StagePolicy, sweep
from app.services.unit import ProjectWork
from app.settings import Settings
from models import Concept, Project
from models.tables import ImportStage, StagedEffect, StagedLabel
from tests.api.conftest import new_project

JSONL = {"Content-Type": "application/jsonl"}
STAGE_ALL = StagePolicy(min_labels=1)


def names(n: int) -> list[str]:
    return [f"c{k:04d}" for k in range(n)]


def label_file(n_concepts: int, n_labels: int, *, seed: int = 0,
               concepts: bool = True) -> bytes:
    """Concept records, then ``n_labels`` distinct positive labels of one total order."""
    rng = random.Random(seed)
    order = names(n_concepts)
    pairs = rng.sample(list(itertools.combinations(range(n_concepts), 2)), n_labels)
    lines = [json.dumps({"kind": "concept", "name": c}) for c in order] if concepts else []
    lines += [json.dumps({"kind": "label", "a": order[i], "b": order[j], "label": "positive"})
              for i, j in pairs]
    return ("\n".join(lines) + "\n").encode()


def staged_rows(url: str) -> tuple[int, int, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return tuple(connection.scalar(select(func.count()).select_from(table))
                         for table in (ImportStage, StagedLabel, StagedEffect))  # type: ignore
    finally:
        engine.dispose()


@contextmanager
def runtime_on(url: str) -> Iterator[Runtime]:
    runtime = Runtime.start(Settings(database_url=url, warm_up=False))
    try:
        yield runtime
    finally:
        runtime.close()


def run_import(runtime: Runtime, pid: int, body: bytes,
               progress: Callable[[int, int], None] | None = None,
               policy: StagePolicy = STAGE_ALL) -> Any:
    @contextmanager
    def opened() -> Iterator[io.BytesIO]:
        yield io.BytesIO(body)

    with runtime.open(ProjectWork, pid) as work:
        return import_source(work, file_source(opened, "jsonl"), caller=ANYONE,
                             progress=progress, policy=policy)


def counts(client: TestClient, pid: int) -> tuple[int, int]:
    detail = client.get(f"/projects/{pid}").json()
    return detail["counts"]["concepts"], detail["counts"]["asserted_labels"]


def test_a_run_of_100001_labels_imports_every_label(client: TestClient,
                                                     database_url: str) -> None:
    pid = new_project(client)
    response = client.post(f"/projects/{pid}/import", content=label_file(500, 100_001),
                           headers=JSONL)
    assert response.status_code == 200, response.text
    assert response.json()["labels_created"] == 100_001
    assert counts(client, pid) == (500, 100_001)
    assert staged_rows(database_url) == (0, 0, 0)
    status = client.get(f"/projects/{pid}/pairs/status", params={"a": "c0000", "b": "c0499"})
    assert status.json()["status"] == "positive"


def test_a_failure_part_way_leaves_the_project_as_before_and_no_staged_rows(
        client: TestClient, database_url: str) -> None:
    pid = new_project(client, concepts=["c0000", "c0001"])
    before = counts(client, pid)
    calls: list[int] = []

    def fail_after_the_first_staged_write(done: int, total: int) -> None:
        calls.append(done)
        assert staged_rows(database_url)[1] == done  # the write was committed, staged
        raise RuntimeError("the disk is full")

    with runtime_on(database_url) as runtime, pytest.raises(RuntimeError, match="disk"):
        run_import(runtime, pid, label_file(300, 3 * STAGE_BATCH),
                   fail_after_the_first_staged_write)
    assert calls == [STAGE_BATCH]
    assert counts(client, pid) == before
    assert staged_rows(database_url) == (0, 0, 0)


def test_a_reader_during_a_staged_import_sees_the_project_as_before(
        client: TestClient, make_client: Callable[..., TestClient], database_url: str) -> None:
    pid = new_project(client, concepts=["c0000"])
    other = make_client()  # another process on the same database
    seen: list[tuple[int, int]] = []

    def read(done: int, total: int) -> None:
        seen.append(counts(other, pid))

    with runtime_on(database_url) as runtime:
        summary = run_import(runtime, pid, label_file(300, 3 * STAGE_BATCH), read)
    assert summary.labels_created == 3 * STAGE_BATCH
    assert len(seen) >= 3 and set(seen[:3]) == {(1, 0)}
    assert counts(other, pid) == (300, 3 * STAGE_BATCH)


def test_a_write_elsewhere_while_staging_refuses_the_import_whole(
        client: TestClient, make_client: Callable[..., TestClient], database_url: str) -> None:
    pid = new_project(client, concepts=["x", "y"])
    other = make_client()

    def write_meanwhile(done: int, total: int) -> None:
        if not done or other.get(f"/projects/{pid}").json()["counts"]["asserted_labels"]:
            return
        posted = other.post(f"/projects/{pid}/labels",
                            json={"a": "x", "b": "y", "label": "positive"})
        assert posted.status_code == 201, posted.text

    with runtime_on(database_url) as runtime, pytest.raises(ConcurrentChange):
        run_import(runtime, pid, label_file(100, 500), write_meanwhile)
    assert counts(client, pid) == (2, 1)
    assert staged_rows(database_url) == (0, 0, 0)


def test_the_stage_of_a_killed_import_is_swept_by_the_next(
        client: TestClient, database_url: str) -> None:
    pid = new_project(client, concepts=names(50))
    with runtime_on(database_url) as runtime:
        with runtime.open(ProjectWork, pid) as work:  # a stage left as a SIGKILL leaves it
            stage = LabelStage.open(work, StagePolicy())
            stage.stage_run([stage.label("c0000", "c0001", True, None)])
        assert staged_rows(database_url)[:2] == (1, 1)
        with runtime.database.sessions() as session:
            assert sweep(session, timeout=600.0) == 0  # alive yet: kept
        summary = run_import(runtime, pid, label_file(50, 20, concepts=False),
                             policy=StagePolicy(min_labels=1, timeout=1e-6))
    assert summary.labels_created == 20
    assert staged_rows(database_url) == (0, 0, 0)
    assert counts(client, pid) == (50, 20)


def test_staged_and_unstaged_imports_store_the_same_ids_versions_and_causes(
        make_client: Callable[..., TestClient]) -> None:
    body = label_file(40, 300, seed=3) + label_file(40, 30, seed=4, concepts=False)
    rows = []
    for stage_from in (1, 10**9):
        client = make_client(import_stage_labels=stage_from)
        pid = new_project(client)
        assert client.post(f"/projects/{pid}/import", content=body,
                           headers=JSONL).status_code == 200
        export = client.get(f"/projects/{pid}/export", params={"format": "project"}).text
        export = re.sub(r',"created_at":"[^"]*"', "", export)  # the answers' times differ
        listed = client.get(f"/projects/{pid}/labels",
                            params={"source": "all", "limit": 10_000}).json()["items"]
        base = min(i["id"] for i in listed if i["source"] == "asserted")
        rows.append((export, [(i["a"], i["b"], i["source"],
                               *(None if i[k] is None else i[k] - base
                                 for k in ("id", "caused_by"))) for i in listed]))
    assert rows[0] == rows[1]


def test_no_staged_table_is_read_by_the_project_routes(client: TestClient,
                                                       database_url: str) -> None:
    """The switch is what readers see: rows staged and never switched stay invisible."""
    pid = new_project(client, concepts=names(3))
    with runtime_on(database_url) as runtime, runtime.open(ProjectWork, pid) as work:
        stage = LabelStage.open(work, StagePolicy())
        stage.stage_run([stage.label("c0000", "c0001", True, None)])
    assert counts(client, pid) == (3, 0)
    engine = create_engine(database_url)
    with engine.connect() as connection:
        assert connection.scalar(select(Project.version).where(Project.id == pid)) is not None
        assert connection.scalar(select(func.count()).select_from(Concept)) == 3
        assert connection.execute(text("SELECT count(*) FROM asserted_labels")).scalar() == 0
    engine.dispose()
