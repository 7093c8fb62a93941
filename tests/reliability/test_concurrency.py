"""Concurrent annotators on one project lose no label and never leave a closure that lies.

Eight client threads post, at the same moment, the labels of a generated order of 200 concepts
to one project of a real `sporal serve` process. Some labels are reversed (an annotator's
mistake) and some are posted twice, by two annotators, so the service has to refuse
contradictions and recognise repeats while the posts race. Afterwards, the database must hold
exactly the labels that got a 2xx, and the stored closure must equal a brute-force closure of
those labels.
"""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest

from tests.reliability.harness import (
    Order,
    Server,
    closure_fixpoint,
    create_project,
    fetch_asserted,
    fetch_decided,
    generate_order,
    sample_labels,
)

CLIENTS = 8
CONCEPTS = 200

Label = tuple[str, str, str]


@dataclass
class Outcome:
    """One POST of a label and what came back."""

    label: Label
    status: int
    body: dict


def _post_all(
    base_urls: list[str], pid: int, batches: list[list[Label]],
    after_success: Callable[[httpx.Client, Label, dict], None] | None = None,
) -> list[Outcome]:
    """Each batch posted by its own thread, all threads released at the same moment."""
    barrier = threading.Barrier(len(batches))

    def run(worker: int) -> list[Outcome]:
        outcomes = []
        # Clients spread over the servers: with two workers each talks to its own.
        with httpx.Client(base_url=base_urls[worker % len(base_urls)], timeout=60.0) as client:
            barrier.wait()
            for a, b, label in batches[worker]:
                body = {"a": a, "b": b, "label": label, "annotator": f"annotator-{worker}"}
                response = client.post(f"/projects/{pid}/labels", json=body)
                outcome = Outcome((a, b, label), response.status_code, response.json())
                outcomes.append(outcome)
                if after_success is not None and response.is_success:
                    after_success(client, (a, b, label), outcome.body)
        return outcomes

    with ThreadPoolExecutor(len(batches)) as pool:
        results = list(pool.map(run, range(len(batches))))
    return [outcome for outcomes in results for outcome in outcomes]


def _racing_batches(order: Order, count: int, seed: int) -> list[list[Label]]:
    """Labels dealt to the clients: ~8 % reversed, ~10 % repeated and ~3 % posted both ways.

    A repeat or an opposite label always goes to another client than the original, so the
    two requests really race.
    """
    rng = random.Random(seed)
    labels = sample_labels(order, count, flip=0.08, positive_share=0.3, seed=seed)
    dealt: list[tuple[int, Label]] = [(i % CLIENTS, label) for i, label in enumerate(labels)]
    for i, (a, b, label) in enumerate(labels):
        roll = rng.random()
        if roll < 0.10:
            dealt.append(((i + 1 + rng.randrange(CLIENTS - 1)) % CLIENTS, (a, b, label)))
        elif roll < 0.13:
            other = "negative" if label == "positive" else "positive"
            dealt.append(((i + 1 + rng.randrange(CLIENTS - 1)) % CLIENTS, (a, b, other)))
    batches: list[list[Label]] = [[] for _ in range(CLIENTS)]
    for worker, label in dealt:
        batches[worker].append(label)
    for batch in batches:
        rng.shuffle(batch)
    return batches


def check_outcomes(outcomes: list[Outcome], stored: dict[tuple[str, str], dict]) -> None:
    """The database holds exactly the acknowledged labels, and the answers agree with it."""
    unexpected = [o for o in outcomes if o.status not in (200, 201, 409)]
    assert not unexpected, f"answers other than 200/201/409: {unexpected[:5]}"
    acknowledged = {o.label for o in outcomes if o.status in (200, 201)}
    stored_labels = {(a, b, item["label"]) for (a, b), item in stored.items()}
    assert acknowledged - stored_labels == set(), "labels acknowledged with 2xx were lost"
    assert stored_labels - acknowledged == set(), "labels stored that were never acknowledged"

    by_label: dict[Label, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_label[outcome.label].append(outcome)
    for label, answers in by_label.items():
        statuses = sorted(o.status for o in answers)
        if label in acknowledged:
            # Serialized writes: one label; a repeat by another annotator is an answer on it,
            # kept once (its own answer id), never a second label.
            assert statuses.count(201) >= 1 and set(statuses) <= {200, 201}, \
                f"{label}: answers {statuses}"
            kept = [o.body["answer_id"] for o in answers if o.status == 201]
            assert None not in kept and len(set(kept)) == len(kept), f"{label}: {kept}"
            ids = {o.body["id"] for o in answers if o.status in (200, 201)}
            assert ids == {stored[label[:2]]["id"]}, f"{label}: ids {ids} vs the stored label"
        else:
            assert set(statuses) == {409}, f"{label}: answers {statuses}"
            for o in answers:
                assert o.body.get("proof"), f"{label}: a 409 without a proof: {o.body}"


def check_closure(concepts: list[str], stored: dict, decided: dict) -> None:
    """The stored closure equals the brute-force closure of the stored asserted labels."""
    labels = [(a, b, item["label"]) for (a, b), item in stored.items()]
    expected = closure_fixpoint(concepts, labels)
    missing = {p: v for p, v in expected.items() if decided.get(p) != v}
    extra = {p: v for p, v in decided.items() if p not in expected}
    assert not missing and not extra, (
        f"{len(missing)} pairs missing or wrong (e.g. {list(missing.items())[:3]}), "
        f"{len(extra)} pairs decided without reason (e.g. {list(extra.items())[:3]})")


def run_race(servers: list[Server], labels_per_client: int, seed: int) -> None:
    order = generate_order(CONCEPTS, parents=4, seed=seed)
    batches = _racing_batches(order, CLIENTS * labels_per_client, seed)
    with httpx.Client(base_url=servers[0].base_url, timeout=60.0) as client:
        pid = create_project(client, order.concepts)
    outcomes = _post_all([s.base_url for s in servers], pid, batches)
    assert any(o.status == 409 for o in outcomes), "the race produced no contradiction to test"
    for server in servers:
        with httpx.Client(base_url=server.base_url, timeout=60.0) as client:
            stored = fetch_asserted(client, pid)
            check_outcomes(outcomes, stored)
            check_closure(order.concepts, stored, fetch_decided(client, pid))


def test_concurrent_posts_lose_no_label_and_keep_the_closure_exact(
    database_url: str, start_server: Callable[..., Server]
) -> None:
    server = start_server(database_url)
    run_race([server], labels_per_client=60, seed=1)


@pytest.mark.postgres
@pytest.mark.parametrize("topology", ["two-processes", "workers-option"])
def test_two_workers_on_postgresql_answer_as_one(
    postgres_url: str, start_server: Callable[..., Server], topology: str
) -> None:
    """Two `sporal serve` processes on one database (started together, so their migrations
    race), or one started with ``--workers 2``; clients spread over both."""
    if topology == "two-processes":
        servers = [start_server(postgres_url, wait=False), start_server(postgres_url, wait=False)]
        for server in servers:
            server.wait_ready()
    else:
        servers = [start_server(postgres_url, workers=2)]
    run_race(servers, labels_per_client=60, seed=2)


@pytest.mark.postgres
def test_a_label_acknowledged_by_one_worker_is_seen_by_the_other(
    postgres_url: str, start_server: Callable[..., Server]
) -> None:
    """Read-your-writes across processes: right after a 2xx from one worker, the other
    worker's pair status shows the label (its cached state has caught up)."""
    servers = [start_server(postgres_url, wait=False), start_server(postgres_url, wait=False)]
    for server in servers:
        server.wait_ready()
    order = generate_order(60, seed=3)
    batches = [sample_labels(order, 20, seed=30 + w) for w in range(4)]
    with httpx.Client(base_url=servers[0].base_url, timeout=60.0) as client:
        pid = create_project(client, order.concepts)
    stale: list[tuple[Label, dict]] = []

    def check_on_the_other(client: httpx.Client, label: Label, body: dict) -> None:
        other = servers[1] if client.base_url.port == servers[0].port else servers[0]
        status = httpx.get(f"{other.base_url}/projects/{pid}/pairs/status",
                           params={"a": label[0], "b": label[1]}, timeout=60.0).json()
        if status.get("status") != label[2]:
            stale.append((label, status))

    outcomes = _post_all([s.base_url for s in servers], pid, batches, check_on_the_other)
    assert any(o.status in (200, 201) for o in outcomes)
    assert not stale, f"{len(stale)} acknowledged labels unseen by the other worker: {stale[:3]}"
