"""Over a real uvicorn server, a body over the limit gets its 413 and the server stays up.

In-process tests cannot show what a real socket does when the service answers before it has
read the whole body: the client must still receive the 413 problem (not a reset connection),
whether the body announced its length or came chunked, and the next request must be served.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import httpx

from tests.reliability.harness import Server, sqlite_url

LIMIT = 100_000


def test_an_oversized_body_is_413_over_a_real_socket(
    tmp_path, start_server: Callable[..., Server]
) -> None:
    server = start_server(sqlite_url(tmp_path / "sporal.db"),
                          env={"SPORAL_MAX_BODY_BYTES": str(LIMIT)})
    with httpx.Client(base_url=server.base_url, timeout=60.0) as client:
        pid = client.post("/projects", json={"name": "limits"}).json()["id"]
        for size in (3 * LIMIT, 100 * LIMIT):
            body = json.dumps({"concepts": [{"name": f"n{i:09d}"} for i in range(size // 20)]})
            for chunked in (False, True):
                content = _chunks(body.encode()) if chunked else body.encode()
                response = client.post(f"/projects/{pid}/concepts", content=content,
                                       headers={"content-type": "application/json"})
                assert response.status_code == 413, (size, chunked, response.text)
                assert response.headers["content-type"].startswith("application/problem+json")
        # Nothing of the refused bodies was stored, and the server still serves.
        assert client.get(f"/projects/{pid}/concepts").json()["total"] == 0
        assert client.get("/health").status_code == 200


def _chunks(body: bytes) -> Iterator[bytes]:
    """The body as a generator: httpx then sends it chunked, without a Content-Length."""
    for start in range(0, len(body), 65_536):
        yield body[start:start + 65_536]
