"""What is computed from a team's answers is cached with the project's state and never runs
ahead of the database: a consensus fitted for a write that did not commit never reaches
``next``, and the caches go with the state."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlalchemy.orm import Session

import app.services.asking as asking
from app.services.labels.change import TeamChange, plan_change
from app.services.unit import ProjectWork
from reasoning.consensus.asking import AskPolicy
from tests.api.conftest import label, new_project

CONCEPTS = ["a", "b", "c", "d"]


@pytest.fixture
def failing_commit() -> Iterator[dict[str, bool]]:
    """Arm it (``armed = True``) and the next commit of any session fails, once."""
    switch = {"armed": False}

    def fail(session: Session) -> None:
        if switch["armed"]:
            switch["armed"] = False
            raise RuntimeError("disk full")

    event.listen(Session, "before_commit", fail)
    yield switch
    event.remove(Session, "before_commit", fail)


def _answers(client: TestClient, pid: int) -> list[tuple[str | None, str]]:
    items = client.get(f"/projects/{pid}/answers", params={"limit": 100}).json()["items"]
    return [(item["annotator"], item["label"]) for item in items]


def test_a_fit_whose_write_did_not_commit_never_reaches_next(
        client: TestClient, failing_commit: dict[str, bool],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    assert label(client, pid, "a", "b", annotator="ann").status_code == 201
    seen: list[dict[Any, float]] = []
    choose = AskPolicy.choose

    def spy(self: AskPolicy, view: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(dict(view.result.accuracy))
        return choose(self, view, *args, **kwargs)

    monkeypatch.setattr(AskPolicy, "choose", spy)
    # bob's contested answer takes the full path: the consensus is fitted with bob, then the
    # write's commit fails
    broken = TestClient(client.app, raise_server_exceptions=False)
    failing_commit["armed"] = True
    response = broken.post(f"/projects/{pid}/labels",
                           json={"a": "a", "b": "b", "label": "negative", "annotator": "bob"})
    assert response.status_code == 500
    assert not failing_commit["armed"], "the write reached its commit"
    assert _answers(client, pid) == [("ann", "positive")]
    asked = client.get(f"/projects/{pid}/next", params={"annotator": "cy", "k": 1})
    assert asked.status_code == 200, asked.text
    assert seen, "next asked the team policy"
    assert all("bob" not in accuracy for accuracy in seen), seen


def test_the_team_caches_go_with_the_state(client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    label(client, pid, "a", "b", annotator="ann")
    label(client, pid, "a", "b", "negative", annotator="bob")  # a full path: a fit
    assert client.get(f"/projects/{pid}/agreement").status_code == 200
    state = client.app.state.project_states.get(pid)  # type: ignore[attr-defined]
    assert state.team.fit is not None and state.team.agreement is not None
    state.invalidate()
    assert state.team.fit is None and state.team.agreement is None


def test_a_change_that_excludes_an_annotator_plans_without_their_answers(
        client: TestClient) -> None:
    pid = new_project(client, CONCEPTS, policy="consensus")
    for who in ("ann", "bob"):
        label(client, pid, "a", "b", annotator=who)
    label(client, pid, "a", "b", "negative", annotator="cy")
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    with runtime.open(ProjectWork, pid) as work:
        every = plan_change(work, TeamChange())
        without = plan_change(work, TeamChange(exclude=frozenset({"ann", "bob"})))
    assert {row.annotator for row in every.rows} == {"ann", "bob", "cy"}
    assert {row.annotator for row in without.rows} == {"cy"}
    a, b = (work.state.id_of[name] for name in ("a", "b"))
    assert every.result.labels[(a, b)] is True
    assert without.result.labels[(a, b)] is False


def test_what_rests_on_each_label_is_computed_once_per_change_of_the_labels(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """``next`` weighs a label by the pool pairs resting on it alone now
    (:data:`app.services.asking.POLICY`); that is computed again only when a label or a pool
    pair changes, and is what the policy reads."""
    pairs = [(a, b, [1.0]) for a in CONCEPTS for b in CONCEPTS if a != b]
    pid = new_project(client, CONCEPTS, pairs, policy="consensus")
    calls: list[int] = []
    real = asking.resting_or_stake

    def counted(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        calls.append(len(found))
        return found

    monkeypatch.setattr(asking, "resting_or_stake", counted)
    for pair in (("a", "b"), ("b", "c")):
        assert label(client, pid, *pair, annotator="ann").status_code == 201
    for _ in range(3):  # nothing changed between these: one computation
        assert client.get(f"/projects/{pid}/next", params={"annotator": "bo"}).status_code == 200
    assert calls == [2]
    state = client.app.state.project_states.get(pid)  # type: ignore[attr-defined]
    # a chain a < b < c: each link holds itself, (a, c) and the three mirrors' negatives
    assert state.team.resting[1] == {(state.id_of["a"], state.id_of["b"]): 4,
                                     (state.id_of["b"], state.id_of["c"]): 4}
    assert label(client, pid, "c", "d", annotator="ann").status_code == 201
    assert client.get(f"/projects/{pid}/next", params={"annotator": "bo"}).status_code == 200
    assert calls == [2, 3]
