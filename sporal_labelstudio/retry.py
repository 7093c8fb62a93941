"""Sending a request again after a dropped connection or a transient answer, with backoff."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

__all__ = ["send"]


def send(http: httpx.Client, method: str, url: str, *, retries: int, base_delay: float,
         retry_after: Callable[[httpx.Response, int], float | None],
         **kwargs: Any) -> httpx.Response:
    """The response to ``method url``, sent up to ``retries`` more times.

    A transport error is retried after ``base_delay · 2^attempt`` seconds; a response is
    retried when ``retry_after(response, attempt)`` gives the seconds to wait (None: it is the
    answer). The last attempt's transport error is raised, its response returned.
    """
    for attempt in range(retries + 1):
        try:
            response = http.request(method, url, **kwargs)
        except httpx.TransportError:
            if attempt == retries:
                raise
            time.sleep(base_delay * 2 ** attempt)
            continue
        delay = None if attempt == retries else retry_after(response, attempt)
        if delay is None:
            return response
        time.sleep(delay)
    raise AssertionError("unreachable")
