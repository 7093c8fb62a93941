"""Idempotency-Key over a real server: the first answer is the answer, whatever it was.

A client that retries after a lost answer must get the first response back, a 409 as much as
a 201; and a key once used stays bound to its request body (another body → 422), so a buggy
client that reuses keys cannot slip a different label in under an old key.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from tests.reliability.harness import Server, create_project, sqlite_url


def test_a_key_whose_first_answer_was_a_contradiction_stays_bound_to_its_body(
    tmp_path, start_server: Callable[..., Server]
) -> None:
    server = start_server(sqlite_url(tmp_path / "sporal.db"))
    with httpx.Client(base_url=server.base_url, timeout=30.0) as client:
        pid = create_project(client, ["x", "y"])
        url = f"/projects/{pid}/labels"
        assert client.post(url, json={"a": "x", "b": "y", "label": "positive"}).status_code == 201
        key = {"Idempotency-Key": "contradiction-1"}
        first = client.post(url, headers=key, json={"a": "y", "b": "x", "label": "positive"})
        assert first.status_code == 409, first.text
        retry = client.post(url, headers=key, json={"a": "y", "b": "x", "label": "positive"})
        assert (retry.status_code, retry.json()) == (409, first.json())
        # (y, x) negative is consistent and would be stored: under this key it must not be.
        reuse = client.post(url, headers=key, json={"a": "y", "b": "x", "label": "negative"})
        assert reuse.status_code == 422, f"key reused with another body: {reuse.text}"
