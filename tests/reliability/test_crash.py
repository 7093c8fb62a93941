"""A server killed with SIGKILL mid-write keeps every acknowledged label and nothing else.

Client threads post labels (each with its own ``Idempotency-Key``) while a killer thread
SIGKILLs the server's process group at random moments and restarts it on the same database.
A client that loses its connection retries the same request with the same key until it gets
an answer, as a well-behaved annotation tool would. Afterwards:

- every label that got a 2xx is stored, with the id that the 2xx named;
- no label is stored whose final answer was a 409 (nothing half-applied);
- the stored closure equals the brute-force closure of the stored labels;
- a retry never applied a label twice: each label was posted by exactly one request, so a
  correct replay answers 201 (or the first 409) again, never "200 already asserted"; an
  explicit replay returns the first response; a reused key with another body is 422.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest

from tests.reliability.harness import (
    Server,
    closure_fixpoint,
    create_project,
    fetch_asserted,
    fetch_decided,
    generate_order,
    sample_labels,
)

CLIENTS = 4
CONCEPTS = 60
MAX_ATTEMPTS = 400  # per request: bounded even if the server never comes back

Label = tuple[str, str, str]


@dataclass
class Request:
    """One logical POST of a label, retried under one key until it gets an answer."""

    label: Label
    key: str
    status: int | None = None
    body: dict | None = None
    attempts: int = 0


def _is_idempotency_conflict(response: httpx.Response) -> bool:
    """A 409 that says "the first request with this key is still running" (retry later),
    as opposed to a contradiction (a final answer, with a proof)."""
    return response.status_code == 409 and "proof" not in response.json()


def _send(client: httpx.Client, pid: int, request: Request, stop: threading.Event) -> None:
    a, b, label = request.label
    body = {"a": a, "b": b, "label": label, "annotator": "crash-test"}
    while request.attempts < MAX_ATTEMPTS:
        request.attempts += 1
        try:
            response = client.post(f"/projects/{pid}/labels", json=body,
                                   headers={"Idempotency-Key": request.key})
        except httpx.TransportError:
            time.sleep(0.05)  # the server is down: retry the same request, same key
            continue
        if _is_idempotency_conflict(response):
            time.sleep(0.05)
            continue
        request.status, request.body = response.status_code, response.json()
        return
    raise AssertionError(f"{request.label}: no final answer after {MAX_ATTEMPTS} attempts")


def _killer(server: Server, kills: int, rng: random.Random, done: threading.Event) -> None:
    try:
        for _ in range(kills):
            time.sleep(rng.uniform(0.05, 1.0))
            server.kill()
            server.start()
    finally:
        done.set()


def run_crashes(server: Server, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    order = generate_order(CONCEPTS, parents=3, seed=seed)
    labels = sample_labels(order, CONCEPTS * (CONCEPTS - 1) // 2, flip=0.1, positive_share=0.2,
                           seed=seed)
    queues = [[Request(label, str(uuid.uuid4())) for label in labels[w::CLIENTS]]
              for w in range(CLIENTS)]
    with httpx.Client(base_url=server.base_url, timeout=30.0) as client:
        pid = create_project(client, order.concepts)

    killed = threading.Event()
    sent: list[Request] = []

    def client_loop(queue: list[Request]) -> None:
        with httpx.Client(base_url=server.base_url, timeout=30.0) as client:
            for request in queue:
                # Keep posting while the killer works, and a little beyond, then stop.
                if killed.is_set():
                    return
                _send(client, pid, request, killed)
                sent.append(request)

    killer = threading.Thread(target=_killer, args=(server, kills, rng, killed))
    clients = [threading.Thread(target=client_loop, args=(q,)) for q in queues]
    for thread in [*clients, killer]:
        thread.start()
    for thread in [killer, *clients]:
        thread.join()

    assert server.starts == kills + 1
    # One more kill and a cold start: everything below is read back from the database alone.
    server.kill()
    server.start()
    with httpx.Client(base_url=server.base_url, timeout=60.0) as client:
        check_after_crashes(client, pid, order.concepts, sent)


def check_after_crashes(
    client: httpx.Client, pid: int, concepts: list[str], sent: list[Request]
) -> None:
    retried = [r for r in sent if r.attempts > 1]
    assert retried, "no request was caught by a kill: the test proved nothing"
    statuses = {r.status for r in sent}
    assert statuses <= {201, 409}, (
        f"answers {statuses}: each label was posted by one request only, so a 200 means a retry "
        f"was applied as a second post instead of replaying the first answer")
    stored = fetch_asserted(client, pid)
    acknowledged = {r.label: r for r in sent if r.status == 201}
    stored_labels = {(a, b, item["label"]) for (a, b), item in stored.items()}
    lost = set(acknowledged) - stored_labels
    assert not lost, f"{len(lost)} acknowledged labels lost, e.g. {sorted(lost)[:3]}"
    phantom = stored_labels - set(acknowledged)
    assert not phantom, f"{len(phantom)} labels stored without a 2xx, e.g. {sorted(phantom)[:3]}"
    for label, request in acknowledged.items():
        assert stored[label[:2]]["id"] == request.body["id"], f"{label}: id changed"

    history = _history(client, pid)
    doubled = [pair for pair, count in history.items() if count > 1]
    assert not doubled, f"labels written twice (live or retracted): {doubled[:3]}"

    expected = closure_fixpoint(concepts, sorted(stored_labels))
    assert fetch_decided(client, pid) == expected, "the stored closure disagrees with the labels"

    _check_replays(client, pid, sent)


def _history(client: httpx.Client, pid: int) -> dict[tuple[str, str], int]:
    """How many asserted rows (live or retracted) each pair has."""
    counts: dict[tuple[str, str], int] = {}
    offset = 0
    while True:
        response = client.get(f"/projects/{pid}/labels", params={
            "source": "asserted", "include_retracted": "true", "limit": 10_000, "offset": offset})
        assert response.status_code == 200, response.text
        page = response.json()
        for item in page["items"]:
            pair = (item["a"], item["b"])
            counts[pair] = counts.get(pair, 0) + 1
        offset += len(page["items"])
        if not page["items"] or offset >= page["total"]:
            return counts


def _check_replays(client: httpx.Client, pid: int, sent: list[Request]) -> None:
    """After the crashes, a retry still returns the first answer, and a key reused with
    another body is refused, whether its first answer was a 201 or a 409."""
    created = [r for r in sent if r.status == 201][:5]
    refused = [r for r in sent if r.status == 409][:2]
    for request in created + refused:
        a, b, label = request.label
        replay = client.post(f"/projects/{pid}/labels", headers={"Idempotency-Key": request.key},
                             json={"a": a, "b": b, "label": label, "annotator": "crash-test"})
        assert replay.status_code == request.status, f"{request.label}: {replay.text}"
        if request.status == 201:
            assert replay.json()["id"] == request.body["id"]
    for request in created + refused:
        a, b, label = request.label
        other = "negative" if label == "positive" else "positive"
        reuse = client.post(f"/projects/{pid}/labels", headers={"Idempotency-Key": request.key},
                            json={"a": a, "b": b, "label": other, "annotator": "crash-test"})
        assert reuse.status_code == 422, f"key reused with another body: {reuse.text}"


@pytest.mark.slow
def test_sigkill_during_writes_loses_and_half_applies_nothing(
    tmp_path, start_server: Callable[..., Server]
) -> None:
    """The short version: three kills on SQLite."""
    server = start_server(f"sqlite:///{tmp_path / 'sporal.db'}")
    run_crashes(server, kills=3, seed=11)


@pytest.mark.slow
def test_many_sigkills_during_writes_lose_and_half_apply_nothing(
    database_url: str, start_server: Callable[..., Server]
) -> None:
    """Twelve kills, on SQLite and on PostgreSQL."""
    server = start_server(database_url)
    run_crashes(server, kills=12, seed=12)
