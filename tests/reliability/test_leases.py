"""Annotators asking for work at the same moment are never handed the same pair.

``GET .../next?annotator=NAME`` reserves what it returns for NAME; the others' ``next`` skips
reserved pairs. Eight annotators ask at once, against one server or against two processes on
one PostgreSQL database (the reservations must live in the database, not in a process).
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.reliability.harness import Server, create_project, generate_order

ANNOTATORS = 8
K = 3


def _project_with_pool(client: httpx.Client, seed: int) -> int:
    order = generate_order(30, seed=seed)
    pid = create_project(client, order.concepts)
    rng = random.Random(seed)
    pairs = rng.sample(list(itertools.combinations(order.concepts, 2)), k=120)
    body = {"pairs": [{"a": a, "b": b, "features": [rng.random() for _ in range(4)]}
                      for a, b in pairs]}
    response = client.post(f"/projects/{pid}/pairs", json=body)
    assert response.status_code == 201, response.text
    return pid


def _ask_at_once(base_urls: list[str], pid: int) -> dict[str, list[tuple[str, str]]]:
    barrier = threading.Barrier(ANNOTATORS)

    def ask(i: int) -> tuple[str, list[tuple[str, str]]]:
        name = f"annotator-{i}"
        with httpx.Client(base_url=base_urls[i % len(base_urls)], timeout=120.0) as client:
            barrier.wait()
            response = client.get(f"/projects/{pid}/next",
                                  params={"annotator": name, "k": K, "strategy": "CNT"})
        assert response.status_code == 200, response.text
        return name, [(q["a"], q["b"]) for q in response.json()["queries"]]

    with ThreadPoolExecutor(ANNOTATORS) as pool:
        return dict(pool.map(ask, range(ANNOTATORS)))


def _assert_disjoint(handed: dict[str, list[tuple[str, str]]]) -> None:
    assert all(len(pairs) == K for pairs in handed.values()), handed
    owners: dict[tuple[str, str], str] = {}
    for name, pairs in handed.items():
        for pair in pairs:
            assert pair not in owners, f"{pair} handed to {owners[pair]} and to {name}"
            owners[pair] = name


def test_parallel_annotators_get_disjoint_questions(
    tmp_path, start_server: Callable[..., Server]
) -> None:
    server = start_server(f"sqlite:///{tmp_path / 'sporal.db'}")
    with httpx.Client(base_url=server.base_url, timeout=60.0) as client:
        pid = _project_with_pool(client, seed=5)
    _assert_disjoint(_ask_at_once([server.base_url], pid))


@pytest.mark.postgres
def test_parallel_annotators_on_two_workers_get_disjoint_questions(
    postgres_url: str, start_server: Callable[..., Server]
) -> None:
    servers = [start_server(postgres_url, wait=False), start_server(postgres_url, wait=False)]
    for server in servers:
        server.wait_ready()
    with httpx.Client(base_url=servers[0].base_url, timeout=60.0) as client:
        pid = _project_with_pool(client, seed=6)
    _assert_disjoint(_ask_at_once([s.base_url for s in servers], pid))
