"""The model's probability of each pair ``next`` served new is stored with its suggestion, so
that an answer's P(wrong) (the team's second opinions, ``GET quality``) reads the same after a
restart and in every server."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select

from models import Suggestion
from tests.api.conftest import new_project

N = 12
TEAM = {"ann": 0.8, "bo": 0.85, "cy": 0.75}


def _team_project(client: TestClient) -> tuple[int, set[tuple[int, int]]]:
    """A consensus project over every ordered pair of a chain's concepts, with features that
    tell the truth through noise (so that a model has something to say)."""
    rng = np.random.default_rng(11)
    order = rng.permutation(N)
    rank = {int(c): i for i, c in enumerate(order)}
    truth = {(a, b) for a, b in itertools.permutations(range(N), 2)
             if rank[a] < rank[b] and rank[b] - rank[a] <= 2}
    pairs = [(f"c{a:02d}", f"c{b:02d}",
              [float((a, b) in truth) + float(rng.normal(0, 0.7)), float(rng.random())])
             for a, b in itertools.permutations(range(N), 2)]
    pid = new_project(client, [f"c{i:02d}" for i in range(N)], pairs, policy="consensus")
    return pid, truth


def _next(client: TestClient, pid: int, who: str) -> list[dict[str, Any]]:
    response = client.get(f"/projects/{pid}/next",
                          params={"annotator": who, "k": 1, "fresh": "true"})
    assert response.status_code == 200, response.text
    return list(response.json()["queries"])


def _label(client: TestClient, pid: int, query: dict[str, Any], who: str, truth: set,
           rng: np.random.Generator) -> None:
    pair = (int(query["a"][1:]), int(query["b"][1:]))
    right = rng.random() < TEAM[who]
    value = "positive" if ((pair in truth) == right) else "negative"
    response = client.post(f"/projects/{pid}/labels", json={
        "a": query["a"], "b": query["b"], "label": value, "annotator": who})
    assert response.status_code in (200, 201, 409), response.text


def _answer_in_turn(client: TestClient, pid: int, truth: set, rounds: int) -> list[str]:
    """Each annotator in turn asks ``next`` for one question and answers it with its
    accuracy; the reasons of the questions served."""
    rng = np.random.default_rng(5)
    reasons = []
    for _, who in zip(range(rounds), itertools.cycle(TEAM), strict=False):
        queries = _next(client, pid, who)
        if not queries:
            break
        reasons.append(queries[0]["reason"])
        _label(client, pid, queries[0], who, truth, rng)
    return reasons


def _seen(client: TestClient, pid: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    quality = client.get(f"/projects/{pid}/quality", params={"fresh": "true"})
    assert quality.status_code == 200, quality.text
    return quality.json(), _next(client, pid, "ann")


def test_a_restarted_service_reads_the_same_quality_and_asks_the_same_question(
        make_client: Callable[..., TestClient], database_url: str) -> None:
    first = make_client()
    pid, truth = _team_project(first)
    reasons = _answer_in_turn(first, pid, truth, rounds=45)
    assert "second-opinion" in reasons  # P(wrong) chose some questions
    before = _seen(first, pid)
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            stored = conn.execute(select(Suggestion.p_positive).where(
                Suggestion.project_id == pid, Suggestion.p_positive.is_not(None))).all()
    finally:
        engine.dispose()
    assert len(stored) >= 10  # the new pairs' probabilities are in the database
    restarted = make_client()  # a new app: its state is read from the database alone
    after = _seen(restarted, pid)
    assert after == before
    assert _seen(first, pid) == before  # and both servers agree


def test_the_kept_bottleneck_counts_give_what_a_fresh_state_computes(
        make_client: Callable[..., TestClient], database_url: str) -> None:
    """GET quality keeps the pool pairs each label carries while the labels and the order of
    their P(wrong) stay; after each further answer it equals a new app's, which computes
    everything from the database."""
    first = make_client()
    pid, truth = _team_project(first)
    _answer_in_turn(first, pid, truth, rounds=30)
    rng = np.random.default_rng(3)
    for who in itertools.islice(itertools.cycle(TEAM), 6):
        queries = _next(first, pid, who)
        if not queries:
            break
        _label(first, pid, queries[0], who, truth, rng)
        kept = first.get(f"/projects/{pid}/quality").json()["decided_wrong"]
        fresh = make_client().get(f"/projects/{pid}/quality").json()["decided_wrong"]
        assert kept == fresh
