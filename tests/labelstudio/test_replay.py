"""Captured Label Studio webhooks replayed against the adapter and a real sporal server.

The payloads in fixtures/ are what Label Studio 1.23.2 posted during a short session (two
yes/no answers, the bot's retirements, an answer changed, then deleted); only the ``project``
member (Label Studio's project settings) was cut. Label Studio itself is replaced by an
in-memory fake; sporal is a real ``sporal serve`` on a temporary SQLite file.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.serving import Server
from sporal_labelstudio.adapter import Adapter, quality_line
from sporal_labelstudio.sporal_client import NextQueries, Query, SporalClient, SporalError
from sporal_labelstudio.state import PersonRow, State, TaskRow
from tests.labelstudio.fake import BOT_USER, PEOPLE, FakeLabelStudio
from tests.labelstudio.harness import FIXTURES, order_project

PAYLOADS: list[dict[str, Any]] = json.loads(
    (FIXTURES / "webhooks-1.23.2.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("sporal")
    with Server(f"sqlite:///{folder}/sporal.db", folder) as running:
        yield running


@pytest.fixture
def adapter(server: Server, tmp_path: Path) -> Iterator[Adapter]:
    with httpx.Client(base_url=server.base_url) as client:
        pid, _ = order_project(client)  # the generated order the payloads were captured on
    state = State(tmp_path / "state.db")
    sporal = SporalClient(server.base_url)
    ls = FakeLabelStudio()
    made = Adapter(sporal, ls, state, project=pid, window=5)  # type: ignore[arg-type]
    made.setup("http://127.0.0.1:9/webhook")
    ann = made.add_person("ann@example.com")  # user 3, who answered in the payloads
    made.add_person("bo")  # user 4, by username
    ls.export_project = ann.ls_project  # the fake's export is this project's
    with state.session() as session:
        for payload in PAYLOADS:
            task = payload.get("task")
            if task and session.get(TaskRow, task["id"]) is None:
                pair = task["data"]["sporal_pair"]
                session.add(TaskRow(task_id=task["id"], a=pair["a"], b=pair["b"],
                                    ls_project=ann.ls_project))
    yield made
    sporal.close()
    state.dispose()


def person(adapter: Adapter, user: int) -> PersonRow:
    return next(p for p in adapter.people() if p.user_id == user)


def asserted(adapter: Adapter) -> set[tuple[str, str, str]]:
    return {(x["a"], x["b"], x["label"]) for x in adapter.sporal.labels(adapter.project)}


def surviving_answers(payloads: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """What the human annotations say once every event is applied, computed from the payloads."""
    live: dict[int, tuple[str, str, str]] = {}
    for payload in payloads:
        if payload["action"] == "ANNOTATIONS_DELETED":
            for gone in payload["annotations"]:
                live.pop(gone["id"], None)
            continue
        annotation, pair = payload["annotation"], payload["task"]["data"]["sporal_pair"]
        if annotation["completed_by"] == BOT_USER:
            continue
        answer = annotation["result"][0]["value"]["choices"][0]
        live[annotation["id"]] = (pair["a"], pair["b"], answer)
    return set(live.values())


def test_the_fixture_holds_every_kind_of_event() -> None:
    actions = {p["action"] for p in PAYLOADS}
    assert {"ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED"} <= actions
    assert any(p.get("annotation", {}).get("completed_by") == BOT_USER for p in PAYLOADS)


def test_replaying_the_session_leaves_exactly_the_surviving_answers_in_sporal(adapter) -> None:
    for payload in PAYLOADS:
        adapter.handle(copy.deepcopy(payload))
    expected = surviving_answers(PAYLOADS)
    assert expected and asserted(adapter) == expected


def test_an_event_seen_twice_changes_nothing(adapter) -> None:
    for payload in PAYLOADS:
        adapter.handle(copy.deepcopy(payload))
    before = (adapter.sporal.project(adapter.project),
              adapter.sporal.labels(adapter.project, source="all"))
    for payload in PAYLOADS:
        adapter.handle(copy.deepcopy(payload))
    after = (adapter.sporal.project(adapter.project),
             adapter.sporal.labels(adapter.project, source="all"))
    assert after == before


def test_an_updated_answer_replaces_the_label_it_had(adapter) -> None:
    updated = next(i for i, p in enumerate(PAYLOADS) if p["action"] == "ANNOTATION_UPDATED")
    for payload in PAYLOADS[: updated + 1]:
        adapter.handle(copy.deepcopy(payload))
    annotation = PAYLOADS[updated]["annotation"]
    pair = PAYLOADS[updated]["task"]["data"]["sporal_pair"]
    new = annotation["result"][0]["value"]["choices"][0]
    old = "positive" if new == "negative" else "negative"
    labels = asserted(adapter)
    assert (pair["a"], pair["b"], new) in labels and (pair["a"], pair["b"], old) not in labels
    row = next(r for r in adapter.state.annotations() if r.annotation_id == annotation["id"])
    assert row.status == "asserted" and row.label == new


def _answer(template: dict[str, Any], annotation_id: int, task_id: int, pair: tuple[str, str],
            label: str, user: int = 3) -> dict[str, Any]:
    """A captured ANNOTATION_CREATED payload, re-aimed at another task and answer."""
    payload = copy.deepcopy(template)
    payload["annotation"].update(id=annotation_id, task=task_id, completed_by=user,
                                 updated_at=f"2026-11-26T07:00:{annotation_id % 60:02d}.000000Z")
    payload["annotation"]["result"][0]["value"]["choices"] = [label]
    payload["task"]["id"] = task_id
    payload["task"]["data"]["sporal_pair"] = {"a": pair[0], "b": pair[1]}
    return payload


def test_a_contradiction_keeps_the_answer_shows_its_proof_and_is_retried(adapter) -> None:
    template = next(p for p in PAYLOADS if p["action"] == "ANNOTATION_CREATED"
                    and p["annotation"]["completed_by"] != BOT_USER)
    x, y, z = "concept 00", "concept 01", "concept 02"
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    with adapter.state.session() as session:
        for task_id, (a, b) in {101: (x, y), 102: (y, z), 103: (x, z)}.items():
            session.add(TaskRow(task_id=task_id, a=a, b=b))
            ls.tasks[task_id] = {}
    adapter.handle(_answer(template, 201, 101, (x, y), "positive"))
    adapter.handle(_answer(template, 202, 102, (y, z), "positive"))
    adapter.handle(_answer(template, 203, 103, (x, z), "negative", user=4))

    refused = next(r for r in adapter.state.annotations() if r.annotation_id == 203)
    assert refused.status == "conflict" and refused.problem_body["status"] == 409
    note = ls.tasks[103]["sporal_note"]
    assert "refused annotation #203" in note
    assert "annotation #201" in note and "annotation #202" in note  # who asserted the proof
    assert (x, z, "negative") not in asserted(adapter)

    assert [m.annotation_id for m in adapter.state.messages()] == [203]  # told to user 4

    adapter.handle({"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 202}]})
    assert (y, z, "positive") not in asserted(adapter)
    assert (x, z, "negative") in asserted(adapter)  # retried after the retraction
    assert "accepted" in ls.tasks[103]["sporal_note"]
    assert not adapter.state.messages()  # the refusal is over: nothing more to tell


def test_each_person_has_a_window_of_their_own_leased_to_them(adapter) -> None:
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    ann, bo = person(adapter, 3), person(adapter, 4)
    with adapter.state.session() as session:  # no captured task: the windows start empty
        session.query(TaskRow).delete()
    adapter.refresh()
    windows = {p.user_id: {t.task_id: t for t in adapter.state.tasks("open", p.ls_project)}
               for p in (ann, bo)}
    pairs = {user: {(t.a, t.b) for t in tasks.values()} for user, tasks in windows.items()}
    assert len(pairs[3]) == len(pairs[4]) == 5 and not pairs[3] & pairs[4]  # nobody shares
    for p in (ann, bo):
        assert set(ls.open_tasks(p.ls_project)) == set(windows[p.user_id])
    assert ls.calls.count("import_tasks") == 2  # each window in one call
    # the service leases each window to its person: someone else is asked none of it
    other = adapter.sporal.next(adapter.project, k=50).queries  # (no annotator: no lease)
    assert not {(q.a, q.b) for q in other} & (pairs[3] | pairs[4])
    ranked = sorted(windows[3], key=lambda t: ls.scores[t])
    assert all(0 < ls.scores[t] < 1 for t in windows[3])
    # someone answers the best question of ann's window through sporal itself
    target = windows[3][ranked[0]]
    adapter.sporal.post_label(adapter.project, target.a, target.b, "positive", annotator="else")
    ls.calls.clear()
    pruned = adapter.prune()  # what follows someone else's answer: decided tasks leave
    held = {**windows[3], **windows[4]}
    retired = set(held) - {t.task_id for t in adapter.state.tasks("open")}
    assert target.task_id in retired and pruned.retired == len(retired)
    for task_id in set(held) - retired:  # only decided tasks left
        assert not adapter.sporal.pair_status(adapter.project, *held[task_id].pair).decided
    for task_id in retired:
        assert adapter.sporal.pair_status(adapter.project, *held[task_id].pair).decided
    assert "import_tasks" not in ls.calls  # ann's window is asked again after her answer
    bo_open = set(ls.open_tasks(bo.ls_project))
    ls.calls.clear()
    adapter.serve_next({3})  # ann answered: her window is asked again and refilled
    assert len(adapter.state.tasks("open", ann.ls_project)) == 5
    assert set(ls.open_tasks(bo.ls_project)) == bo_open  # bo's window: only pruned
    assert ls.calls.count("import_tasks") == 1  # in batched calls
    assert ls.calls.count("delete_unanswered_tasks") <= 2 and "update_task_data" not in ls.calls
    assert not ls.annotations  # the bot annotates nothing
    assert "pool pairs" in ls.descriptions[ann.ls_project]


def test_a_refusal_is_shown_only_to_its_annotator_until_they_answer(adapter):
    template = next(p for p in PAYLOADS if p["action"] == "ANNOTATION_CREATED"
                    and p["annotation"]["completed_by"] != BOT_USER)
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    ann, bo = person(adapter, 3), person(adapter, 4)
    x, y, z = "concept 00", "concept 01", "concept 02"
    with adapter.state.session() as session:
        session.query(TaskRow).delete()
        for task_id, (a, b) in {101: (x, y), 102: (y, z), 103: (x, z)}.items():
            session.add(TaskRow(task_id=task_id, a=a, b=b, status="answered",
                                ls_project=ann.ls_project if task_id < 103 else bo.ls_project))
            ls.tasks[task_id] = {}
    adapter.refresh()
    adapter.handle(_answer(template, 201, 101, (x, y), "positive"))
    adapter.handle(_answer(template, 202, 102, (y, z), "positive"))
    adapter.handle(_answer(template, 203, 103, (x, z), "negative", user=4))
    adapter.serve_next({4})
    bo_open = [t.task_id for t in adapter.state.tasks("open", bo.ls_project)]
    assert bo_open
    for task_id in bo_open:
        note = ls.tasks[task_id]["sporal_note"]
        assert note.startswith("sporal refused annotation #203")
        assert "annotation #201" in note and "annotation #202" in note  # the proof
        assert PEOPLE[3] in note  # who gave them, by name
    adapter.prune()
    for task in adapter.state.tasks("open", ann.ls_project):  # nobody else sees it
        assert "refused" not in ls.tasks[task.task_id]["sporal_note"]
    # bo answers an open task: the note has been seen and goes
    task = adapter.state.tasks("open", bo.ls_project)[0]
    adapter.handle(_answer(template, 204, task.task_id, (task.a, task.b), "negative", user=4))
    adapter.serve_next({4})
    assert all("refused" not in ls.tasks[t.task_id]["sporal_note"]
               for t in adapter.state.tasks("open"))


def test_answers_reach_sporal_by_the_name_of_their_author(adapter, server: Server,
                                                          tmp_path: Path) -> None:
    template = next(p for p in PAYLOADS if p["action"] == "ANNOTATION_CREATED"
                    and p["annotation"]["completed_by"] != BOT_USER)
    task = adapter.state.tasks()[0]
    adapter.handle(_answer(template, 1301, task.task_id, task.pair, "positive", user=4))
    [label] = [x for x in adapter.sporal.labels(adapter.project) if (x["a"], x["b"]) == task.pair]
    assert label["annotator"] == PEOPLE[4]  # not labelstudio:…:user:4
    by_username = Adapter(adapter.sporal, adapter.ls, State(tmp_path / "other.db"),
                          project=adapter.project, names="username")
    by_username.setup("http://127.0.0.1:9/webhook")
    assert by_username.add_person(PEOPLE[7]).name == "cy"
    assert by_username.name_of(4) == "bo" and by_username.name_of(99) == "labelstudio:user:99"
    with pytest.raises(LookupError):
        by_username.add_person("nobody@example.com")


def test_the_reconcile_adopts_a_task_created_just_before_a_crash(adapter) -> None:
    # the adapter died between creating a task in Label Studio and recording it; an annotator
    # answered it meanwhile (its webhook lost): the export names the pair, so nothing is lost
    template = next(p for p in PAYLOADS if p["action"] == "ANNOTATION_CREATED"
                    and p["annotation"]["completed_by"] != BOT_USER)
    answer = _answer(template, 301, 500, ("concept 03", "concept 04"), "positive")
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    ls.exported = [{"id": 500, "annotations": [answer["annotation"]], "predictions": [],
                    "data": {"sporal_pair": {"project": adapter.project, "a": "concept 03",
                                             "b": "concept 04"}}},
                   {"id": 501, "annotations": [], "predictions": [],
                    "data": {"sporal_pair": {"project": adapter.project + 1, "a": "concept 05",
                                             "b": "concept 06"}}}]
    adapter.reconcile()
    assert ("concept 03", "concept 04", "positive") in asserted(adapter)
    tasks = {t.task_id: t for t in adapter.state.tasks()}
    assert tasks[500].status == "answered" and 501 not in tasks  # another project's task


def test_an_answer_that_arrives_while_the_export_is_read_is_not_taken_for_deleted(adapter):
    template = next(p for p in PAYLOADS if p["action"] == "ANNOTATION_CREATED"
                    and p["annotation"]["completed_by"] != BOT_USER)
    first = _answer(template, 401, 600, ("concept 03", "concept 04"), "positive")
    racing = _answer(template, 402, 601, ("concept 05", "concept 06"), "negative")
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    with adapter.state.session() as session:
        session.add(TaskRow(task_id=600, a="concept 03", b="concept 04"))
        session.add(TaskRow(task_id=601, a="concept 05", b="concept 06"))
    adapter.handle(first)
    stale = copy.deepcopy(first["annotation"])
    stale["updated_at"] = "2026-11-26T06:00:00.000000Z"  # an older version of 401
    stale["result"][0]["value"]["choices"] = ["negative"]
    ls.exported = [{"id": 600, "annotations": [stale], "predictions": [], "data": {}},
                   {"id": 601, "annotations": [], "predictions": [], "data": {}}]
    ls.during_export = lambda: adapter.handle(racing)
    adapter.reconcile()
    labels = asserted(adapter)
    assert ("concept 05", "concept 06", "negative") in labels  # not retracted as "gone"
    assert ("concept 03", "concept 04", "positive") in labels  # the stale version ignored


def test_the_reconcile_asserts_again_a_label_retracted_behind_the_adapters_back(adapter):
    template = next(p for p in PAYLOADS if p["action"] == "ANNOTATION_CREATED"
                    and p["annotation"]["completed_by"] != BOT_USER)
    answer = _answer(template, 501, 700, ("concept 07", "concept 08"), "positive")
    with adapter.state.session() as session:
        session.add(TaskRow(task_id=700, a="concept 07", b="concept 08"))
    adapter.handle(answer)
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    ls.exported = [{"id": 700, "annotations": [answer["annotation"]], "predictions": [],
                    "data": {}}]
    row = next(r for r in adapter.state.annotations() if r.annotation_id == 501)
    adapter.sporal.retract_label(adapter.project, row.sporal_label_id)
    assert ("concept 07", "concept 08", "positive") not in asserted(adapter)
    adapter.reconcile()
    assert ("concept 07", "concept 08", "positive") in asserted(adapter)


def test_answers_carry_their_source_only_where_sporal_records_answers(adapter, monkeypatch):
    template = next(p for p in PAYLOADS if p["action"] == "ANNOTATION_CREATED"
                    and p["annotation"]["completed_by"] != BOT_USER)
    sent: list[str | None] = []
    post = adapter.sporal.post_label

    def spy(*args: Any, **kwargs: Any) -> Any:
        sent.append(kwargs.get("source"))
        kwargs.pop("source", None)  # the older service does not take it
        return post(*args, **kwargs)

    monkeypatch.setattr(adapter.sporal, "post_label", spy)
    with adapter.state.session() as session:
        session.add(TaskRow(task_id=801, a="concept 09", b="concept 10"))
        session.add(TaskRow(task_id=802, a="concept 11", b="concept 12"))
    adapter._info = {k: v for k, v in adapter.info.items() if k != "policy"}  # an older one
    adapter.handle(_answer(template, 811, 801, ("concept 09", "concept 10"), "positive"))
    adapter._info = {**adapter.info, "policy": "consensus"}  # a service with answers
    adapter.handle(_answer(template, 812, 802, ("concept 11", "concept 12"), "positive"))
    assert sent == [None, "labelstudio"]


def test_second_opinions_look_like_any_task_and_stay_open_while_their_pair_is_decided(adapter,
                                                                           monkeypatch):
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    with adapter.state.session() as session:
        session.query(TaskRow).delete()
    a, b = "concept 00", "concept 01"
    adapter.sporal.post_label(adapter.project, a, b, "positive", annotator="first")
    real_next = adapter.sporal.next

    def with_a_second_opinion(*args: Any, **kwargs: Any) -> NextQueries:
        found = real_next(*args, **kwargs)
        return NextQueries([Query(a, b, None, "second-opinion"), *found.queries],
                           found.undecided, found.reserved_until)

    monkeypatch.setattr(adapter.sporal, "next", with_a_second_opinion)
    adapter.refresh()
    task = next(t for t in adapter.state.tasks("open") if (t.a, t.b) == (a, b))
    assert task.reason == "second-opinion"
    assert ls.tasks[task.task_id]["sporal_note"] == ""  # like any other question: no anchor
    monkeypatch.setattr(adapter.sporal, "next", real_next)  # no longer first in sporal's list
    adapter.refresh()
    assert task.task_id in {t.task_id for t in adapter.state.tasks("open")}  # not retired


def test_a_failed_check_question_shows_the_definition_to_its_annotator(adapter, monkeypatch):
    template = next(p for p in PAYLOADS if p["action"] == "ANNOTATION_CREATED"
                    and p["annotation"]["completed_by"] != BOT_USER)
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    post = adapter.sporal.post_label
    monkeypatch.setattr(adapter.sporal, "post_label", lambda *args, **kwargs: dataclasses.replace(
        post(*args, **kwargs), check_failed=True))
    with adapter.state.session() as session:
        session.query(TaskRow).delete()
    cy = adapter.add_person(PEOPLE[7])
    with adapter.state.session() as session:
        session.add(TaskRow(task_id=901, a="concept 13", b="concept 14", status="answered",
                            ls_project=cy.ls_project))
    adapter.handle(_answer(template, 911, 901, ("concept 13", "concept 14"), "negative", user=7))
    adapter.refresh()
    notes = [ls.tasks[t.task_id]["sporal_note"] for t in adapter.state.tasks("open", cy.ls_project)]
    assert notes and all(n.startswith("Your answer on") and "directly or through other concepts"
                         in n for n in notes)
    assert not any(ls.tasks[t.task_id]["sporal_note"] for t in adapter.state.tasks("open")
                   if t.ls_project != cy.ls_project)  # nobody else's


def test_tasks_show_descriptions_only_where_there_are_some_and_the_projects_question(adapter):
    adapter._descriptions = {"concept 00": "Counting things.", "concept 01": None}
    adapter._info = {**adapter.info, "question": "Must one know {a} to learn {b}?"}
    data = adapter._task_data("concept 00", "concept 01")
    assert data["question"] == "Must one know “concept 00” to learn “concept 01”?"
    assert data["a_description"] == "concept 00: Counting things."
    assert data["b_description"] == ""  # no "(no description)" line
    adapter._info = {k: v for k, v in adapter.info.items() if k != "question"}
    assert "directly or through other concepts" in adapter._task_data("x", "y")["question"]


def test_the_reconcile_withdraws_the_bot_retirements_of_an_earlier_version(adapter) -> None:
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    template = next(p for p in PAYLOADS if p["action"] == "ANNOTATION_CREATED"
                    and p["annotation"]["completed_by"] != BOT_USER)
    human = _answer(template, 1202, 1101, ("concept 15", "concept 16"), "positive")["annotation"]
    bot = {"id": 1201, "completed_by": BOT_USER, "result": [], "updated_at": "x"}
    bot_too = {**bot, "id": 1203}
    with adapter.state.session() as session:
        session.query(TaskRow).delete()
        session.add(TaskRow(task_id=1100, a="concept 13", b="concept 14", status="retired",
                            bot_annotation_id=1201))
        session.add(TaskRow(task_id=1101, a="concept 15", b="concept 16", status="retired",
                            bot_annotation_id=1203))
    for task_id in (1100, 1101):
        ls.tasks[task_id] = {}
    ls.annotations[1203] = {"task": 1101}
    ls.exported = [{"id": 1100, "annotations": [bot], "predictions": [], "data": {}},
                   {"id": 1101, "annotations": [bot_too, human], "predictions": [],
                    "data": {}}]
    adapter.reconcile()
    assert ls.deleted[0] == 1100  # only the bot had annotated it: the task goes
    assert 1101 in ls.tasks and 1203 not in ls.annotations  # the bot's annotation goes
    tasks = {t.task_id: t for t in adapter.state.tasks()}
    assert tasks[1100].status == "deleted" and tasks[1101].status == "answered"
    assert all(t.bot_annotation_id is None for t in tasks.values())
    assert ("concept 15", "concept 16", "positive") in asserted(adapter)


def test_a_state_file_of_the_earlier_version_is_read(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "earlier.db"
    with sqlite3.connect(path) as db:  # the tasks table as the earlier version made it
        db.execute("CREATE TABLE tasks (task_id INTEGER PRIMARY KEY, a TEXT NOT NULL, "
                   "b TEXT NOT NULL, status VARCHAR(16) NOT NULL, prediction_id INTEGER, "
                   "score FLOAT, bot_annotation_id INTEGER, note TEXT NOT NULL)")
        db.execute("INSERT INTO tasks VALUES (7, 'x', 'y', 'open', NULL, 0.5, NULL, '')")
    state = State(path)
    try:
        [task] = state.tasks()
        assert (task.task_id, task.reason, task.status) == (7, "new", "open")
        assert state.messages() == []
    finally:
        state.dispose()


def test_each_description_says_sporals_decided_share_and_the_adapters_health(adapter) -> None:
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    with adapter.state.session() as session:
        session.query(TaskRow).delete()
    adapter.refresh()
    counts = adapter.sporal.project(adapter.project)["counts"]
    pool, undecided = counts["pool_pairs"], counts["undecided_pool_pairs"]
    for user in (3, 4):
        who = person(adapter, user)
        lines = ls.descriptions[who.ls_project].split("\n")
        assert lines[0] == adapter.identity(PEOPLE[user])  # how setup finds the project again
        assert lines[1].startswith(f"sporal has decided {pool - undecided} of {pool} pool "
                                   f"pairs ({(pool - undecided) / pool:.0%})")
        assert lines[2].startswith("Adapter running: last sync ")
    adapter.stopped()
    assert all(d.split("\n")[2].startswith("Adapter stopped at ")
               for d in ls.descriptions.values())


def test_each_description_says_how_many_pairs_are_likely_wrong(adapter) -> None:
    """Read from sporal's ``GET quality`` over HTTP, between the decided share and the
    health; a sporal that does not answer it leaves the line out."""
    ls: FakeLabelStudio = adapter.ls  # type: ignore[assignment]
    for query in adapter.sporal.next(adapter.project, k=6).queries:  # no answer contradicts
        adapter.sporal.post_label(adapter.project, query.a, query.b, "negative",
                                  annotator="ann@example.com")
    adapter.stopped()  # written now, whatever was written before
    quality = adapter.sporal.quality(adapter.project)
    assert quality.decided > 0 and quality.decided_wrong.low <= quality.decided_wrong.high
    line = quality_line(quality)
    assert line is not None and line.startswith("Likely wrong: ≈ ")
    assert f"of the {quality.decided:,} decided pairs" in line
    for lines in (d.split("\n") for d in ls.descriptions.values()):
        assert lines[1].startswith("sporal has decided ") and lines[2] == line
        assert lines[3].startswith("Adapter stopped at ")

    def unknown(project: int) -> None:
        raise SporalError(404, {"type": "about:blank", "title": "Not Found"})

    adapter.sporal.quality = unknown  # type: ignore[method-assign]  # an older sporal
    adapter.stopped()
    for lines in (d.split("\n") for d in ls.descriptions.values()):
        assert lines[1].startswith("sporal has decided ")
        assert lines[2].startswith("Adapter stopped at ")
