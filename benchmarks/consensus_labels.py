"""Label POST latency in a ``consensus`` project at precalculus size, through the real app.

A team of annotators (each answer wrong with probability ``--noise``) answers the pool pairs
of an AL-CPL domain in a random order; a share of the pairs (``--second``) gets a second
answer from another annotator, so that both the fast path (a pair nobody answered, not
contradicted by the closure) and the full consensus (an answered pair, or an answer against
the closure) are exercised as a team would. Each ``POST /projects/{pid}/labels`` is timed
in-process (FastAPI's ``TestClient`` on a temporary SQLite database: no network, the whole
app with its middleware, unit of work and write transaction).

Prints p50/p99/max over all label POSTs and per path (fast: the answer was the pair's first;
full: it was not, or it opened or closed a disagreement), the machine's load average while
measuring, and PASS/FAIL against the target (p50 ≤ 20 ms).

Run::

    python -m benchmarks.consensus_labels --data ../shared/datasets/al-cpl
    python -m benchmarks.consensus_labels --answers 200   # quicker
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from app.db import migrate
from app.main import create_app
from app.settings import Settings
from reasoning.data import load_domain

__all__ = ["main", "run"]

ROOT = Path(__file__).resolve().parents[1]
TARGET_P50_MS = 20.0
TEAM = ["ann", "bob", "cy", "dan", "eve"]



def _count_open(client: TestClient, pid: int) -> int:
    """The open disagreements, counted page after page (``next_cursor`` → ``cursor``)."""
    count, cursor = 0, None
    while True:
        params: dict[str, Any] = {"limit": 10000, **({"cursor": cursor} if cursor else {})}
        page = client.get(f"/projects/{pid}/disagreements", params=params).json()
        count += len(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return count

def _project(client: TestClient, domain: Any, policy: str) -> int:
    pid = int(client.post("/projects", json={"name": "bench", "policy": policy})
              .json()["id"])
    client.post(f"/projects/{pid}/concepts",
                json={"concepts": [{"name": c} for c in domain.concepts]}).raise_for_status()
    body = [{"a": a, "b": b, "features": row}
            for (a, b), row in zip(domain.pairs, np.asarray(domain.features).tolist(),
                                   strict=True)]
    client.post(f"/projects/{pid}/pairs", json={"pairs": body}).raise_for_status()
    return pid


def _answers(domain: Any, n: int, noise: float, second: float,
             rng: random.Random) -> list[tuple[str, str, bool, str]]:
    """``n`` answers ``(a, b, positive, annotator)``: pool pairs in a random order, some
    answered twice (by two annotators)."""
    order = list(range(len(domain.pairs)))
    rng.shuffle(order)
    out: list[tuple[str, str, bool, str]] = []
    for row in order:
        a, b = domain.pairs[row]
        truth = bool(domain.labels[row])
        who = rng.sample(TEAM, 2)
        for k in range(2 if rng.random() < second else 1):
            value = truth if rng.random() >= noise else not truth
            out.append((a, b, value, who[k]))
        if len(out) >= n:
            break
    return out[:n]


def _quantile(values: list[float], q: float) -> float:
    return float(np.quantile(values, q)) if values else float("nan")


def run(data: Path, domain_name: str, n: int, noise: float, second: float,
        seed: int, policy: str = "consensus") -> dict[str, Any]:
    """Post ``n`` answers into a fresh consensus project; the timings by path."""
    domain = load_domain(data, domain_name)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        migrate(url)
        settings = Settings(database_url=url)
        with TestClient(create_app(settings)) as client:
            pid = _project(client, domain, policy)
            seen: set[tuple[str, str]] = set()
            fast: list[float] = []
            full: list[float] = []
            load_before = os.getloadavg()[0]
            for a, b, value, who in _answers(domain, n, noise, second, rng):
                body = {"a": a, "b": b, "label": "positive" if value else "negative",
                        "annotator": who}
                start = time.perf_counter()
                response = client.post(f"/projects/{pid}/labels", json=body)
                ms = (time.perf_counter() - start) * 1000
                assert response.status_code in (200, 201, 409), response.text
                first = (a, b) not in seen and response.status_code != 409 and (
                    response.json().get("disagreement") is None)
                (fast if first else full).append(ms)
                seen.add((a, b))
            load_after = os.getloadavg()[0]
            nexts = _time_next(client, pid)
            open_now = _count_open(client, pid)
    every = fast + full
    return {"domain": domain_name, "concepts": len(domain.concepts), "pool": len(domain.pairs),
            "answers": len(every), "fast": len(fast), "full": len(full),
            "p50": _quantile(every, 0.5), "p99": _quantile(every, 0.99), "max": max(every),
            "fast_p50": _quantile(fast, 0.5), "full_p50": _quantile(full, 0.5),
            "full_p99": _quantile(full, 0.99), "mean": statistics.fmean(every),
            "load": (load_before, load_after), "open_disagreements": open_now,
            "next_p50": _quantile(nexts, 0.5), "next_p99": _quantile(nexts, 0.99)}


def _time_next(client: TestClient, pid: int, calls: int = 60) -> list[float]:
    """Time ``next`` for the team (Random strategy: no model), each annotator in turn."""
    out = []
    for k in range(calls):
        start = time.perf_counter()
        response = client.get(f"/projects/{pid}/next?strategy=Random&annotator={TEAM[k % 5]}")
        out.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.text
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/datasets/al-cpl")
    parser.add_argument("--domain", default="precalculus")
    parser.add_argument("--answers", type=int, default=800)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--second", type=float, default=0.3,
                        help="share of pairs answered by a second annotator")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", choices=("consensus", "strict"), default="consensus",
                        help="strict: the same answers in a strict project (a baseline; "
                        "contradictions are 409)")
    args = parser.parse_args(argv)
    result = run(args.data, args.domain, args.answers, args.noise, args.second, args.seed,
                 args.policy)
    print(f"policy {args.policy}; {result['domain']}: {result['concepts']} concepts, "
          f"{result['pool']} pool pairs, "
          f"{result['answers']} label POSTs ({result['fast']} first answers, "
          f"{result['full']} on answered pairs or opening/closing a disagreement)")
    print(f"label POST  p50 {result['p50']:.1f} ms  p99 {result['p99']:.1f} ms  "
          f"max {result['max']:.1f} ms  mean {result['mean']:.1f} ms")
    print(f"  first answers p50 {result['fast_p50']:.1f} ms; others p50 "
          f"{result['full_p50']:.1f} ms, p99 {result['full_p99']:.1f} ms")
    print(f"open disagreements at the end: {result['open_disagreements']}")
    print(f"next (team questions first; Random for new pairs) p50 {result['next_p50']:.1f} ms, "
          f"p99 {result['next_p99']:.1f} ms")
    print(f"load average (1 min) before/after: {result['load'][0]:.2f} / "
          f"{result['load'][1]:.2f} on {os.cpu_count()} CPUs")
    ok = result["p50"] <= TARGET_P50_MS
    print(f"{'PASS' if ok else 'FAIL'}: p50 {result['p50']:.1f} ms (target ≤ {TARGET_P50_MS} ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
