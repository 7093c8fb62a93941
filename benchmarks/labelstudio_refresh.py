"""Seconds per refresh of the Label Studio adapter's window, against a real Label Studio.

A real `sporal serve` (temporary SQLite) holds a generated order (``--concepts`` concepts,
``--pool`` pool pairs); the adapter (in this process) sets up a Label Studio project with a
window of ``--window`` tasks. Then, ``--answers`` times: an annotator answers the task Label
Studio serves (the truth of the generated order), the adapter forwards it, and one refresh is
timed. Prints, per refresh, the seconds and the tasks it retired, created and re-ranked, then
the median, p90 and maximum and the mean tasks touched per answer (retired + created).

Needs a running Label Studio (as ``.ci/run`` starts one)::

    SPORAL_TEST_LABEL_STUDIO_URL=http://127.0.0.1:8080 SPORAL_TEST_LABEL_STUDIO_TOKEN=T \\
        python -m benchmarks.labelstudio_refresh --window 10 --answers 30
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.serving import Server, create_pool_project, free_port
from reasoning.generate import random_order
from sporal_labelstudio.adapter import Adapter, Refreshed
from sporal_labelstudio.ls_client import LabelStudioClient
from sporal_labelstudio.sporal_client import SporalClient
from sporal_labelstudio.state import State


def _project(client: httpx.Client, n: int, pool: int, seed: int) -> tuple[int, Any]:
    order = random_order(n, pool, degree=1.5, depth=4, positive_share=0.4, random_state=seed)
    names = [f"concept {i:03d}" for i in range(n)]
    pairs = [(names[a], names[b]) for a, b in order.pool.tolist()]
    features = np.random.default_rng(seed).normal(size=(len(pairs), 4)) + order.labels[:, None]
    return create_pool_project(client, f"refresh-{n}", names, pairs, features), order


def _answer(ls: httpx.Client, adapter: Adapter, order: Any) -> bool:
    """The annotator answers the task Label Studio serves; the adapter forwards it."""
    served = ls.get(f"/api/projects/{adapter.ls_project}/next")
    if served.status_code != 200 or "id" not in served.json():
        return False
    task = served.json()
    a, b = task["data"]["sporal_pair"]["a"], task["data"]["sporal_pair"]["b"]
    label = "positive" if order.is_positive(int(a.split()[-1]), int(b.split()[-1])) \
        else "negative"
    posted = ls.post(f"/api/tasks/{task['id']}/annotations", json={"result": [
        {"from_name": "prerequisite", "to_name": "question", "type": "choices",
         "value": {"choices": [label]}}]})
    posted.raise_for_status()
    adapter.forward(posted.json(), int(task["id"]))
    return True


def run(ls_url: str, token: str, window: int, answers: int, concepts: int, pool: int,
        seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder, \
            Server(f"sqlite:///{folder}/sporal.db", Path(folder)) as server, \
            httpx.Client(base_url=server.base_url, timeout=60) as client:
        pid, order = _project(client, concepts, pool, seed)
        adapter = Adapter(SporalClient(server.base_url), LabelStudioClient(ls_url, token),
                          State(Path(folder) / "adapter.db"), project=pid, window=window)
        # nothing listens there: Label Studio's webhook fails at once, the adapter is called
        adapter.setup(f"http://127.0.0.1:{free_port()}/webhook")
        first = adapter.refresh()
        print(f"first refresh: {first.created} tasks in {first.seconds:.3f} s")
        done: list[Refreshed] = []
        with httpx.Client(base_url=ls_url, timeout=60,
                          headers={"Authorization": f"Token {token}"}) as ls:
            for _ in range(answers):
                if not _answer(ls, adapter, order):
                    break
                started = time.monotonic()
                refreshed = adapter.refresh()
                done.append(refreshed)
                print(f"refresh {time.monotonic() - started:.3f} s: {refreshed.retired} "
                      f"retired, {refreshed.created} created, {refreshed.rescored} re-ranked")
    seconds = sorted(r.seconds for r in done)
    return {"window": window, "refreshes": len(done),
            "seconds_median": round(statistics.median(seconds), 3),
            "seconds_p90": round(seconds[int(0.9 * (len(seconds) - 1))], 3),
            "seconds_max": round(seconds[-1], 3),
            "touched_per_answer": round(statistics.mean(r.touched for r in done), 2),
            "reranked_per_answer": round(statistics.mean(r.rescored for r in done), 2),
            "load_1min": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ls-url", default=os.environ.get("SPORAL_TEST_LABEL_STUDIO_URL"))
    parser.add_argument("--ls-token", default=os.environ.get("SPORAL_TEST_LABEL_STUDIO_TOKEN"))
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--answers", type=int, default=30)
    parser.add_argument("--concepts", type=int, default=40)
    parser.add_argument("--pool", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not args.ls_url or not args.ls_token:
        parser.error("a running Label Studio: --ls-url and --ls-token (or the environment)")
    figures = run(args.ls_url, args.ls_token, args.window, args.answers, args.concepts,
                  args.pool, args.seed)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
