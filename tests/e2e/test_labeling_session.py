"""End to end: a real `sporal serve` process, a whole LC-R+ labeling session on data_mining.

The server runs on a free port with a temporary SQLite file (or a fresh PostgreSQL database
when ``SPORAL_TEST_POSTGRES_URL`` is set). Over HTTP the test registers the domain, asks `next`
until no pool pair is undecided, answering each question with the true label, and checks that
every decided pair equals the truth and that the stored closure equals the closure rebuilt from
the asserted labels after a restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.serving import Server
from reasoning.closure import Closure
from reasoning.data import load_domain
from reasoning.generate import random_order
from tests.api.databases import backend, postgres_database, require_postgres, sqlite_url


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    if backend() == "sqlite":
        yield sqlite_url(tmp_path / "sporal.db")
        return
    with postgres_database(require_postgres()) as url:
        yield url


@pytest.fixture
def service(database_url: str, tmp_path: Path) -> Iterator[Server]:
    with Server(database_url, tmp_path) as server:
        yield server


def _all_labels(client: httpx.Client, pid: int, source: str) -> list[dict]:
    items: list[dict] = []
    while True:
        page = client.get(f"/projects/{pid}/labels",
                          params={"source": source, "limit": 10_000, "offset": len(items)})
        assert page.status_code == 200, page.text
        body = page.json()
        items += body["items"]
        if len(items) >= body["total"]:
            return items


@pytest.mark.slow
def test_a_whole_lc_r_plus_session_on_data_mining(al_cpl: Path, service: Server) -> None:
    domain = load_domain(al_cpl, "data_mining")
    truth = {pair: bool(value) for pair, value in zip(domain.pairs, domain.labels, strict=True)}
    with httpx.Client(base_url=service.base_url, timeout=60) as client:
        pid = client.post("/projects", json={"name": "data mining"}).json()["id"]
        response = client.post(f"/projects/{pid}/concepts",
                               json={"concepts": [{"name": c} for c in domain.concepts]})
        assert response.status_code == 201, response.text
        pairs = [{"a": a, "b": b, "features": row.tolist()}
                 for (a, b), row in zip(domain.pairs, domain.features, strict=True)]
        response = client.post(f"/projects/{pid}/pairs", json={"pairs": pairs})
        assert response.status_code == 201 and response.json()["created"] == len(pairs)

        questions = 0
        while True:
            body = client.get(f"/projects/{pid}/next", params={"strategy": "LC-R+"}).json()
            if not body["queries"]:
                assert body["undecided"] == 0
                break
            (query,) = body["queries"]
            value = "positive" if truth[(query["a"], query["b"])] else "negative"
            response = client.post(f"/projects/{pid}/labels",
                                   json={"a": query["a"], "b": query["b"], "label": value,
                                         "annotator": "oracle"})
            assert response.status_code == 201, response.text
            questions += 1
            assert questions <= len(truth)
        # Reasoning decided the other pool pairs without asking.
        assert questions < len(truth)

        decided = {(i["a"], i["b"]): i["label"] == "positive"
                   for i in _all_labels(client, pid, "all")}
        assert all(decided[pair] == value for pair, value in truth.items())
        detail_before = client.get(f"/projects/{pid}").json()

    service.stop()
    service.start()  # a new process: its cache is rebuilt from the database
    with httpx.Client(base_url=service.base_url, timeout=60) as client:
        asserted = _all_labels(client, pid, "asserted")
        assert len(asserted) == questions
        rebuilt = Closure.from_labels(
            [(i["a"], i["b"], i["label"] == "positive") for i in asserted], domain.concepts)
        stored = {(i["a"], i["b"]): i["label"] == "positive"
                  for i in _all_labels(client, pid, "all")}
        assert stored == {(a, b): value for a, b, value, _ in rebuilt.decided()}
        detail_after = client.get(f"/projects/{pid}").json()
        assert detail_after["counts"] == detail_before["counts"]
        assert detail_after["counts"]["undecided_pool_pairs"] == 0


@pytest.mark.slow
def test_two_workers_answer_like_one(database_url: str, tmp_path: Path) -> None:
    order = random_order(40, 400, degree=1.5, depth=5, random_state=11)
    names = [f"concept {i}" for i in order.concepts]
    labels = order.sample_labels(80, random_state=12)
    server = Server(database_url, tmp_path, workers=2)
    server.start()
    try:
        # A fresh connection per request lets the kernel spread them over both workers.
        def call(method: str, path: str, **kwargs: object) -> httpx.Response:
            with httpx.Client(base_url=server.base_url, timeout=60) as client:
                return client.request(method, path, **kwargs)  # type: ignore[arg-type]

        pid = call("POST", "/projects", json={"name": "two workers"}).json()["id"]
        call("POST", f"/projects/{pid}/concepts",
             json={"concepts": [{"name": n} for n in names]})
        posted = []
        for i, (a, b, positive) in enumerate(labels):
            response = call("POST", f"/projects/{pid}/labels", json={
                "a": names[a], "b": names[b], "label": "positive" if positive else "negative"})
            assert response.status_code in (200, 201), response.text
            posted.append((names[a], names[b], positive))
            if i == 40:  # a retraction in the middle: every worker must rebuild
                call("DELETE", f"/projects/{pid}/labels/{response.json()['id']}")
                posted.pop()
        expected = Closure.from_labels(posted, names)
        truth = {(a, b): v for a, b, v, _ in expected.decided()}
        for _ in range(6):  # whichever worker answers, it has caught up
            body = call("GET", f"/projects/{pid}/labels", params={"limit": 10_000}).json()
            assert {(i["a"], i["b"]): i["label"] == "positive" for i in body["items"]} == truth
            counts = call("GET", f"/projects/{pid}").json()["counts"]
            assert counts["asserted_labels"] == len({(a, b) for a, b, _ in posted})
    finally:
        server.stop()
