"""Latency of the service over HTTP against a real `sporal serve` process.

Measures, on a precalculus-size project (224 concepts, 2,060 pool pairs with 38 features):

* ``POST /labels``: one label, applied with the reasoning core and written with everything it
  decides (target p50 ≤ 10 ms);
* ``GET /next?strategy=LC-R+`` right after a label, so the classifier is retrained each time
  (target p50 ≤ 150 ms);
* ``GET /labels?limit=10000``: a page of 10,000 decided pairs (on a generated order whose
  closure holds more than 10,000 pairs);

and ``GET /health`` as the baseline (the floor of one HTTP round trip through the stack).
Prints p50/p99 per operation and the ratio to the baseline; ``--csv`` also writes them.

Run::

    python -m benchmarks.api_latency --data ../shared/datasets/al-cpl
    python -m benchmarks.api_latency --database-url postgresql://user@host/db   # PostgreSQL
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from benchmarks.serving import Server
from reasoning.data import load_domain
from reasoning.generate import random_order

__all__ = ["main", "measure"]

ROOT = Path(__file__).resolve().parents[1]
TARGETS_MS = {"POST label": 10.0, "GET next LC-R+ after a label": 150.0}


def measure(call: Callable[[], httpx.Response], expect: tuple[int, ...] = (200, 201)) -> float:
    """Milliseconds of one request (fails loudly on an unexpected status)."""
    start = time.perf_counter()
    response = call()
    elapsed = (time.perf_counter() - start) * 1000
    if response.status_code not in expect:
        raise RuntimeError(f"{response.status_code}: {response.text[:500]}")
    return elapsed


def _precalculus_project(client: httpx.Client, data: Path) -> tuple[int, dict]:
    domain = load_domain(data, "precalculus")
    pid = client.post("/projects", json={"name": "precalculus"}).json()["id"]
    client.post(f"/projects/{pid}/concepts",
                json={"concepts": [{"name": c} for c in domain.concepts]}).raise_for_status()
    pairs = [{"a": a, "b": b, "features": row.tolist()}
             for (a, b), row in zip(domain.pairs, domain.features, strict=True)]
    client.post(f"/projects/{pid}/pairs", json={"pairs": pairs}).raise_for_status()
    truth = {pair: bool(v) for pair, v in zip(domain.pairs, domain.labels, strict=True)}
    return pid, truth


def _label(client: httpx.Client, pid: int, a: str, b: str, value: bool) -> httpx.Response:
    return client.post(f"/projects/{pid}/labels",
                       json={"a": a, "b": b, "label": "positive" if value else "negative"})


def _large_closure_project(client: httpx.Client, seed: int) -> tuple[int, int]:
    order = random_order(400, 6000, degree=2.0, depth=6, random_state=seed)
    names = [f"concept-{i:04d}" for i in order.concepts]
    pid = client.post("/projects", json={"name": "generated"}).json()["id"]
    client.post(f"/projects/{pid}/concepts",
                json={"concepts": [{"name": n} for n in names]}).raise_for_status()
    labels = [{"a": names[a], "b": names[b], "label": "positive" if v else "negative"}
              for a, b, v in order.sample_labels(random_state=seed)]
    client.post(f"/projects/{pid}/labels/bulk", json={"labels": labels}).raise_for_status()
    total = client.get(f"/projects/{pid}/labels", params={"limit": 1}).json()["total"]
    return pid, int(total)


def run(url: str, data: Path, posts: int, nexts: int, lists: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    times: dict[str, list[float]] = {}
    with httpx.Client(base_url=url, timeout=300) as client:
        times["GET health (baseline)"] = [measure(lambda: client.get("/health"))
                                          for _ in range(200)]
        pid, truth = _precalculus_project(client, data)
        pool = list(truth)
        order = rng.permutation(len(pool))
        times["POST label"] = [
            measure(lambda p=pool[i]: _label(client, pid, *p, truth[p]))
            for i in order[:posts]]

        pid, truth = _precalculus_project(client, data)
        after: list[float] = []
        query = client.get(f"/projects/{pid}/next", params={"strategy": "LC-R+"}).json()
        for _ in range(nexts):
            if not query["queries"]:
                break
            q = query["queries"][0]
            _label(client, pid, q["a"], q["b"], truth[(q["a"], q["b"])]).raise_for_status()
            start = time.perf_counter()
            response = client.get(f"/projects/{pid}/next", params={"strategy": "LC-R+"})
            after.append((time.perf_counter() - start) * 1000)
            response.raise_for_status()
            query = response.json()
        times["GET next LC-R+ after a label"] = after

        big, total = _large_closure_project(client, seed)
        if total < 10_000:
            raise RuntimeError(f"the generated closure has only {total} pairs")
        times["GET labels, 10,000 items"] = [
            measure(lambda: client.get(f"/projects/{big}/labels", params={"limit": 10_000}))
            for _ in range(lists)]
    return times


def summarize(times: dict[str, list[float]]) -> list[dict]:
    base = float(np.percentile(times["GET health (baseline)"], 50))
    rows = []
    for name, values in times.items():
        p50, p99 = np.percentile(values, [50, 99])
        target = TARGETS_MS.get(name)
        rows.append({"operation": name, "n": len(values), "p50_ms": round(float(p50), 2),
                     "p99_ms": round(float(p99), 2), "p50_vs_health": round(float(p50) / base, 1),
                     "target_p50_ms": target,
                     "met": "" if target is None else ("yes" if p50 <= target else "NO")})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/datasets/al-cpl",
                        help="the AL-CPL folder (precalculus.pairs, .features)")
    parser.add_argument("--database-url", default=None,
                        help="default: a fresh SQLite file in a temporary folder")
    parser.add_argument("--posts", type=int, default=300)
    parser.add_argument("--nexts", type=int, default=100)
    parser.add_argument("--lists", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        with Server(url, Path(tmp)) as server:
            times = run(server.base_url, args.data, args.posts, args.nexts, args.lists, args.seed)
    rows = summarize(times)
    print(f"{'operation':34s} {'n':>5s} {'p50 ms':>9s} {'p99 ms':>9s} {'x health':>9s}  target")
    for r in rows:
        target = f"p50 <= {r['target_p50_ms']:.0f} ms: {r['met']}" if r["target_p50_ms"] else ""
        print(f"{r['operation']:34s} {r['n']:5d} {r['p50_ms']:9.2f} {r['p99_ms']:9.2f} "
              f"{r['p50_vs_health']:9.1f}  {target}")
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
