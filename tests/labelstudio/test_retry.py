"""Both clients retry through one helper: dropped connections and transient answers only."""

from __future__ import annotations

import httpx
import pytest

from sporal_labelstudio import retry


def _client(answers: list[object]) -> tuple[httpx.Client, list[int]]:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        answer = answers[len(calls) - 1]
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, httpx.Response)
        return answer

    return httpx.Client(transport=httpx.MockTransport(handler), base_url="http://x"), calls


def _busy(response: httpx.Response, attempt: int) -> float | None:
    return 0.0 if response.status_code == 503 else None


def test_a_dropped_connection_and_a_transient_answer_are_sent_again() -> None:
    http, calls = _client([httpx.ConnectError("down"), httpx.Response(503),
                           httpx.Response(200, json={"ok": True})])
    response = retry.send(http, "GET", "/a", retries=3, base_delay=0.0, retry_after=_busy)
    assert response.json() == {"ok": True} and len(calls) == 3


def test_an_answer_that_is_not_transient_is_returned_at_once() -> None:
    http, calls = _client([httpx.Response(409), httpx.Response(200)])
    response = retry.send(http, "POST", "/a", retries=3, base_delay=0.0, retry_after=_busy)
    assert response.status_code == 409 and len(calls) == 1


def test_the_last_attempt_is_the_answer_or_the_error() -> None:
    http, calls = _client([httpx.Response(503), httpx.Response(503)])
    response = retry.send(http, "GET", "/a", retries=1, base_delay=0.0, retry_after=_busy)
    assert response.status_code == 503 and len(calls) == 2
    http, calls = _client([httpx.ConnectError("down"), httpx.ConnectError("down")])
    with pytest.raises(httpx.ConnectError):
        retry.send(http, "GET", "/a", retries=1, base_delay=0.0, retry_after=_busy)
    assert len(calls) == 2
