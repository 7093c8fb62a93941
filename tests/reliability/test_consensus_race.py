"""Two servers on one PostgreSQL database leave no disagreement that the live answers settle.

A full-path answer plans on the answers it read (no lock held), then stores its plan if the
project's version has not moved. Every stored answer moves it, so an answer that another
server stored meanwhile (one agreeing with every answer on its pair included) makes the plan
start again, inside the write transaction. Each trial races, on a pair of its own, a
dissenting answer (1 against 1: a disagreement, on one server) against an agreeing one
(2 against 1: settled, on the other); afterwards the open disagreements must be exactly the
pairs that :func:`reasoning.consensus.consensus`, run offline on the live answers, leaves
contested, and no answer that gives a settled pair's value may stay ``contested``: checked
after each race, since the next full path would repair what a race left.

With ``SPORAL_CONSENSUS_LOCAL_FROM=0`` every contested answer is repaired on its pair and the
full consensus refitted by a background job (docs/consensus.md, "Incremental consensus"): the
oracle then compares once the refit has settled (``POST labels/refit``, its job waited for).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from reasoning.consensus import Vote, consensus
from tests.reliability.harness import Server, create_project

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TRIALS = 24
BACKGROUND = 60  # concepts of earlier answers: a full path then takes a while to plan
DELAYS = (0.0, 0.01, 0.03, 0.06)  # how long after the dissent the agreeing answer leaves


def _post(client: httpx.Client, pid: int, a: str, b: str, value: str, who: str) -> None:
    response = client.post(f"/projects/{pid}/labels",
                           json={"a": a, "b": b, "label": value, "annotator": who})
    assert response.status_code == 201, response.text


def _race(clients: list[httpx.Client], pid: int, trial: int) -> None:
    """On the trial's own pair: one positive answer, then at the same moment a negative one
    (first server) and a second positive one (second server)."""
    a, b = f"c{2 * trial}", f"c{2 * trial + 1}"
    _post(clients[0], pid, a, b, "positive", f"ann-{trial}")
    barrier = threading.Barrier(2)
    posts = [(clients[0], "negative", f"bob-{trial}"), (clients[1], "positive", f"cy-{trial}")]

    def run(k: int) -> None:
        client, value, who = posts[k]
        barrier.wait()
        if k:
            time.sleep(DELAYS[trial % len(DELAYS)])
        _post(client, pid, a, b, value, who)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(run, range(2)))


def _background(client: httpx.Client, pid: int) -> None:
    """Earlier answers of five annotators on a chain of other concepts, one of them wrong
    now and then: the consensus of the project is work to compute."""
    labels = [{"a": f"g{i}", "b": f"g{j}", "label": "positive" if (i + j + who) % 7 else
               "negative", "annotator": f"team-{who}"}
              for i in range(BACKGROUND) for j in range(i + 1, min(i + 4, BACKGROUND))
              for who in range(5)]
    response = client.post(f"/projects/{pid}/labels/bulk", json={"labels": labels})
    assert response.status_code == 201, response.text


def _offline(client: httpx.Client, pid: int) -> tuple[Any, list[dict]]:
    """The consensus of the live answers, and the answers."""
    concepts = client.get(f"/projects/{pid}/concepts", params={"limit": 1000}).json()["items"]
    ids = {c["name"]: c["id"] for c in concepts}
    answers: list[dict] = []
    params: dict[str, Any] = {"limit": 1000}
    while True:
        page = client.get(f"/projects/{pid}/answers", params=params).json()
        answers += page["items"]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    votes = [Vote(ids[x["a"]], ids[x["b"]], x["label"] == "positive", x["annotator"],
                  reviewer=x["role"] == "reviewer", order=x["id"]) for x in answers]
    return consensus(votes, sorted(ids.values())), answers


def _stale(clients: list[httpx.Client], pid: int, ids: dict[str, int]) -> list[str]:
    """What the project shows now that the consensus of its live answers does not: open
    disagreements on settled pairs, and settled answers still ``contested``."""
    result, answers = _offline(clients[0], pid)
    items: list[dict[str, Any]] = []
    cursor = None
    while True:  # every page of the open disagreements
        page = clients[1].get(f"/projects/{pid}/disagreements", params={
            "limit": 10000, **({"cursor": cursor} if cursor else {})}).json()
        items += page["items"]
        if (cursor := page["next_cursor"]) is None:
            break
    opened = {(ids[item["a"]], ids[item["b"]]) for item in items}
    contested = set(result.contested)
    found = [f"disagreement open on a settled pair {pair}" for pair in opened - contested]
    found += [f"no disagreement on the contested pair {pair}" for pair in contested - opened]
    found += [f"answer {x['id']} contested on a settled pair" for x in answers
              if x["outcome"] == "contested" and (ids[x["a"]], ids[x["b"]]) not in contested
              and result.labels.get((ids[x["a"]], ids[x["b"]])) == (x["label"] == "positive")]
    return found


def _settle(client: httpx.Client, pid: int) -> None:
    """Ask for the refit and wait for its job (incremental consensus)."""
    response = client.post(f"/projects/{pid}/labels/refit")
    assert response.status_code == 202, response.text
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = client.get(response.headers["Location"]).json()
        if job["state"] != "queued" and job["state"] != "running":
            assert job["state"] == "succeeded", job
            return
        time.sleep(0.05)
    raise AssertionError("the refit did not finish")


@pytest.mark.parametrize("local_from", ["1000", "0"], ids=["full-path", "incremental"])
def test_two_servers_leave_no_disagreement_the_live_answers_settle(
        postgres_url: str, start_server: Callable[..., Server], local_from: str) -> None:
    env = {"SPORAL_CONSENSUS_LOCAL_FROM": local_from}
    servers = [start_server(postgres_url, env=env), start_server(postgres_url, env=env)]
    clients = [httpx.Client(base_url=s.base_url, timeout=60.0) for s in servers]
    try:
        pid = create_project(clients[0], [f"c{k}" for k in range(2 * TRIALS)]
                             + [f"g{k}" for k in range(BACKGROUND)])
        policy = clients[0].patch(f"/projects/{pid}", json={"policy": "consensus"})
        assert policy.status_code == 200, policy.text
        _background(clients[0], pid)
        ids = {c["name"]: c["id"] for c in clients[0].get(
            f"/projects/{pid}/concepts", params={"limit": 1000}).json()["items"]}
        stale: dict[int, list[str]] = {}
        for trial in range(TRIALS):  # checked after each race: a later full path repairs it
            _race(clients, pid, trial)
            if local_from == "0":
                _settle(clients[trial % 2], pid)
            found = _stale(clients, pid, ids)
            if found:
                stale[trial] = found
        assert not stale, f"{len(stale)} of {TRIALS} races left the project stale: {stale}"
    finally:
        for client in clients:
            client.close()
