"""What the Label Studio tests share: a real sporal server with a generated order, annotators
who sign up and answer through Label Studio's REST API, and a webhook recorder for fixtures."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.serving import create_pool_project
from reasoning.generate import GeneratedOrder, random_order

FIXTURES = Path(__file__).with_name("fixtures")


def concept_name(i: int) -> str:
    return f"concept {i:02d}"


def order_project(client: httpx.Client, n: int = 25, pool: int = 60,
                  seed: int = 3) -> tuple[int, GeneratedOrder]:
    """A sporal project whose pool is that of a generated order of ``n`` concepts."""
    order = random_order(n, pool, degree=1.5, depth=4, positive_share=0.4, random_state=seed)
    rng = np.random.default_rng(seed)
    pairs = [(concept_name(a), concept_name(b)) for a, b in order.pool.tolist()]
    features = rng.normal(size=(len(pairs), 4)) + order.labels[:, None] * 0.8
    pid = create_pool_project(client, f"generated-{n}", [concept_name(i) for i in range(n)],
                              pairs, features)
    return pid, order


def truth(order: GeneratedOrder, a: str, b: str) -> str:
    return "positive" if order.is_positive(int(a.split()[-1]), int(b.split()[-1])) else "negative"


def choice(label: str) -> list[dict[str, Any]]:
    """The result Label Studio's editor writes for a yes/no answer (the Choice's alias)."""
    return [{"from_name": "prerequisite", "to_name": "question", "type": "choices",
             "value": {"choices": [label]}}]


class Recorder:
    """A webhook endpoint that keeps every payload (to capture fixtures)."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                recorder.payloads.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/webhook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
