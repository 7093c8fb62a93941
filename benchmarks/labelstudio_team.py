"""Two people answer sporal's questions through a real Label Studio, each in their own project.

A real `sporal serve` (temporary SQLite) holds a generated order (``--concepts`` concepts,
``--pool`` pool pairs, policy ``--policy``); two Label Studio users sign up on its web form, the
adapter gives each a project of their own (``add_person``) and runs as ``sporal labelstudio
run`` does (its webhook endpoint and workers, in this process). Then, ``--answers`` times, in
turns: a person answers the task Label Studio serves them (the truth of the generated order)
and asks Label Studio for their next task, as its editor does; the seconds from the submit to
that next task are timed, and so is each refresh of a person's window that the adapter makes
(after each of their answers: ``next`` for them, the retired, re-ranked and new tasks). A task
taken out while it was served (sporal decided its pair meanwhile: Label Studio answers 404, or
500 when the deletion and the annotation race) is
counted and the next one asked for. Prints the p50, p99 and maximum of both, the load of the
machine before and after (``os.getloadavg()``), and checks on the way that nobody was served a
pair twice and no new question was open in both projects at once.

Needs a running Label Studio (as ``.ci/run`` starts one)::

    SPORAL_TEST_LABEL_STUDIO_URL=http://127.0.0.1:8080 SPORAL_TEST_LABEL_STUDIO_TOKEN=T \\
        python -m benchmarks.labelstudio_team --answers 40
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import secrets
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.serving import Server, create_pool_project, free_port
from reasoning.generate import random_order
from sporal_labelstudio.adapter import Adapter
from sporal_labelstudio.ls_client import LabelStudioClient
from sporal_labelstudio.server import Runner
from sporal_labelstudio.sporal_client import SporalClient
from sporal_labelstudio.state import State

__all__ = ["run", "signup"]


def signup(ls_url: str, email: str, password: str) -> str:
    """A person signs up on Label Studio's web form (or logs in); returns their API token."""
    with httpx.Client(base_url=ls_url, follow_redirects=True, timeout=60) as web:
        page = web.get("/user/signup/")
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        csrf = web.cookies.get("csrftoken") or (found.group(1) if found else "")
        web.post("/user/signup/", data={"email": email, "password": password,
                                        "csrfmiddlewaretoken": csrf},
                 headers={"Referer": f"{ls_url}/user/signup/"})
        if not web.get("/api/current-user/whoami").is_success:  # already signed up: log in
            web.get("/user/login/")
            web.post("/user/login/", data={"email": email, "password": password,
                                           "csrfmiddlewaretoken": web.cookies.get("csrftoken")
                                           or ""},
                     headers={"Referer": f"{ls_url}/user/login/"})
        response = web.get("/api/current-user/token")
        response.raise_for_status()
        return str(response.json()["token"])


def _project(client: httpx.Client, n: int, pool: int, seed: int, policy: str) -> tuple[int, Any]:
    order = random_order(n, pool, degree=1.5, depth=4, positive_share=0.4, random_state=seed)
    names = [f"concept {i:03d}" for i in range(n)]
    pairs = [(names[a], names[b]) for a, b in order.pool.tolist()]
    features = np.random.default_rng(seed).normal(size=(len(pairs), 4)) + order.labels[:, None]
    pid = create_pool_project(client, f"team-{n}", names, pairs, features)
    client.patch(f"/projects/{pid}", json={"policy": policy}).raise_for_status()
    return pid, order


def _next(ls: httpx.Client, ls_project: int, timeout: float = 60.0) -> dict[str, Any]:
    """The task Label Studio serves next (asked again until the window holds one)."""
    deadline = time.monotonic() + timeout
    while True:
        body = ls.get(f"/api/projects/{ls_project}/next").json()
        if "data" in body or time.monotonic() > deadline:
            return dict(body)
        time.sleep(0.05)


def _percentiles(values: list[float]) -> dict[str, float]:
    return {"p50": round(float(np.percentile(values, 50)), 3),
            "p99": round(float(np.percentile(values, 99)), 3),
            "max": round(max(values), 3)}


def _open_pairs(adapter: Adapter, ls_project: int) -> set[tuple[str, str]]:
    return {t.pair for t in adapter.state.tasks("open", ls_project) if t.reason == "new"}


def _answers(adapter: Adapter, people: list[Any], clients: list[httpx.Client], order: Any,
             answers: int) -> dict[str, Any]:
    """The answers in turns, timed; the refreshes, timed; the served pairs checked."""
    current = [_next(c, p.ls_project) for c, p in zip(clients, people, strict=True)]
    submit_next: list[float] = []
    taken_out = 0
    served: list[set[tuple[str, str]]] = [set(), set()]
    for i in range(answers):
        k = i % 2
        task = current[k]
        if "data" not in task:
            raise RuntimeError(f"{people[k].name} has no task: {task}")
        pair = (task["data"]["sporal_pair"]["a"], task["data"]["sporal_pair"]["b"])
        assert pair not in served[k], f"{pair} served twice to {people[k].name}"
        served[k].add(pair)
        truth = order.is_positive(int(pair[0].split()[-1]), int(pair[1].split()[-1]))
        started = time.monotonic()
        posted = clients[k].post(f"/api/tasks/{task['id']}/annotations", json={"result": [
            {"from_name": "prerequisite", "to_name": "question", "type": "choices",
             "value": {"choices": ["positive" if truth else "negative"]}}]})
        current[k] = _next(clients[k], people[k].ls_project)
        gone = posted.status_code == 404 or (  # Label Studio 1.23 may say 500 then
            posted.status_code == 500
            and clients[k].get(f"/api/tasks/{task['id']}").status_code == 404)
        if gone:  # decided meanwhile: taken out of the window
            taken_out += 1
            continue
        posted.raise_for_status()
        submit_next.append(time.monotonic() - started)
        both = _open_pairs(adapter, people[0].ls_project) & _open_pairs(
            adapter, people[1].ls_project)
        assert not both, f"new questions open for both at once: {both}"
    refresh = [r.seconds for r in adapter.recent]
    return {"answers": len(submit_next), "taken_out_while_served": taken_out,
            "submit_to_next_s": _percentiles(submit_next),
            "refresh_s": _percentiles(refresh)}


def run(ls_url: str, token: str, *, window: int = 3, answers: int = 40, concepts: int = 40,
        pool: int = 300, seed: int = 0, policy: str = "consensus") -> dict[str, Any]:
    """Set up, answer ``answers`` times in turns, and return the figures."""
    load_before = os.getloadavg()
    tag = secrets.token_hex(4)
    with tempfile.TemporaryDirectory() as folder, \
            Server(f"sqlite:///{folder}/sporal.db", Path(folder)) as server, \
            httpx.Client(base_url=server.base_url, timeout=60) as client:
        pid, order = _project(client, concepts, pool, seed, policy)
        emails = [f"bench{i}-{tag}@example.com" for i in (1, 2)]
        tokens = [signup(ls_url, email, f"pw-{tag}-{i}-long") for i, email in enumerate(emails)]
        adapter = Adapter(SporalClient(server.base_url), LabelStudioClient(ls_url, token),
                          State(Path(folder) / "adapter.db"), project=pid, window=window)
        listen = f"127.0.0.1:{free_port()}"
        adapter.setup(f"http://{listen}/webhook")
        people = [adapter.add_person(email) for email in emails]
        runner = Runner(adapter, listen, reconcile_every=3600)
        thread = threading.Thread(target=runner.serve, daemon=True)
        thread.start()
        clients = [httpx.Client(base_url=ls_url, timeout=60,
                                headers={"Authorization": f"Token {t}"}) for t in tokens]
        try:
            figures = _answers(adapter, people, clients, order, answers)
        finally:
            runner.stop()
            thread.join(30)
            for ls in clients:
                ls.close()
    return {"policy": policy, "window": window, "concepts": concepts, "pool": pool,
            **figures, "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ls-url", default=os.environ.get("SPORAL_TEST_LABEL_STUDIO_URL"))
    parser.add_argument("--ls-token", default=os.environ.get("SPORAL_TEST_LABEL_STUDIO_TOKEN"))
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--answers", type=int, default=40)
    parser.add_argument("--concepts", type=int, default=40)
    parser.add_argument("--pool", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", default="consensus", choices=["consensus", "strict"])
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if not args.ls_url or not args.ls_token:
        parser.error("a running Label Studio: --ls-url and --ls-token (or the environment)")
    print(json.dumps(run(args.ls_url, args.ls_token, window=args.window, answers=args.answers,
                         concepts=args.concepts, pool=args.pool, seed=args.seed,
                         policy=args.policy)))


if __name__ == "__main__":
    main()
