"""Load: 16 annotators at once on two projects of a real server, SQLite and PostgreSQL.

Each client runs the annotation loop of a labeling tool for a fixed time: ask for the next
question (``GET .../next?annotator=NAME``), answer it with the true label of a generated order
(``POST .../labels``); when its project's pool is exhausted it labels random pairs instead.
Half of the clients work on each of two projects. The script prints, per database, the request
throughput, p50/p99 latency per kind of request and the number of errors (non-2xx answers or
failed connections).

Usage::

    python -m benchmarks.load                         # SQLite, plus PostgreSQL when
                                                      # SPORAL_TEST_POSTGRES_URL is set
    python -m benchmarks.load --duration 10 --postgres-url postgresql+psycopg://...

Only loopback: the server is started here, on 127.0.0.1 and a free port, and stopped at exit.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from benchmarks.serving import Server, postgres_database

__all__ = ["LoadResult", "main", "run_load"]


# --------------------------------------------------------------------------------------------
# Projects: a generated order, a pool with informative features
# --------------------------------------------------------------------------------------------


@dataclass
class Project:
    pid: int
    concepts: list[str]
    less: np.ndarray
    index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.index = {c: i for i, c in enumerate(self.concepts)}

    def label(self, a: str, b: str) -> str:
        return "positive" if self.less[self.index[a], self.index[b]] else "negative"


def _generate_order(n: int, rng: random.Random) -> np.ndarray:
    less = np.zeros((n, n), dtype=bool)
    for child in range(1, n):
        for parent in rng.sample(range(child), k=min(child, rng.randint(0, 2))):
            less[parent, child] = True
    for k in range(n):
        less |= np.outer(less[:, k], less[k, :])
    perm = list(range(n))
    rng.shuffle(perm)
    return less[np.ix_(perm, perm)]


def create_project(client: httpx.Client, name: str, n: int, pool: int, features: int,
                   rng: random.Random) -> Project:
    less = _generate_order(n, rng)
    concepts = [f"{name}-concept-{i:03d}" for i in range(n)]
    response = client.post("/projects", json={"name": name})
    response.raise_for_status()
    pid = response.json()["id"]
    client.post(f"/projects/{pid}/concepts",
                json={"concepts": [{"name": c} for c in concepts]}).raise_for_status()
    pairs = rng.sample(list(itertools.permutations(range(n), 2)), k=pool)
    body = []
    for i, j in pairs:
        # The first feature leans towards the truth, so the prediction model has signal.
        vector = [float(less[i, j]) * 0.5 + rng.random()]
        vector += [rng.random() for _ in range(features - 1)]
        body.append({"a": concepts[i], "b": concepts[j], "features": vector})
    client.post(f"/projects/{pid}/pairs", json={"pairs": body}, timeout=300).raise_for_status()
    return Project(pid, concepts, less)


# --------------------------------------------------------------------------------------------
# The load
# --------------------------------------------------------------------------------------------


@dataclass
class LoadResult:
    database: str
    duration: float
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"next": [], "label": []})
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    empty_next: int = 0  # `next` answered with no question: the pool was exhausted

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values()) + self.errors

    def report(self) -> str:
        lines = [f"{self.database}: {self.requests} requests in {self.duration:.1f} s = "
                 f"{self.requests / self.duration:.1f} req/s, errors {self.errors}, "
                 f"next without a question {self.empty_next}"]
        everything = [x for v in self.latencies.values() for x in v]
        for kind, values in [*self.latencies.items(), ("all", everything)]:
            if values:
                p50, p99 = np.percentile(np.array(values) * 1000, [50, 99])
                lines.append(f"  {kind:>5}: n={len(values):6d}  p50 {p50:8.1f} ms  "
                             f"p99 {p99:8.1f} ms")
        lines.extend(f"  error: {sample}" for sample in self.error_samples[:5])
        return "\n".join(lines)


def _client_loop(base_url: str, project: Project, name: str, strategy: str, deadline: float,
                 max_requests: int, result: LoadResult, lock: threading.Lock,
                 rng: random.Random) -> None:
    n = len(project.concepts)
    with httpx.Client(base_url=base_url, timeout=120.0) as client:
        for _ in range(max_requests // 2):
            if time.monotonic() >= deadline:
                return
            ok, queries = _timed(client, "next", result, lock, "GET",
                                 f"/projects/{project.pid}/next",
                                 params={"annotator": name, "k": 1, "strategy": strategy})
            if ok and queries["queries"]:
                a, b = queries["queries"][0]["a"], queries["queries"][0]["b"]
            else:
                if ok:
                    with lock:
                        result.empty_next += 1
                i, j = rng.sample(range(n), 2)
                a, b = project.concepts[i], project.concepts[j]
            if time.monotonic() >= deadline:
                return
            _timed(client, "label", result, lock, "POST", f"/projects/{project.pid}/labels",
                   json={"a": a, "b": b, "label": project.label(a, b), "annotator": name})


def _timed(client: httpx.Client, kind: str, result: LoadResult, lock: threading.Lock,
           method: str, url: str, **kwargs: object) -> tuple[bool, dict]:
    start = time.perf_counter()
    try:
        response = client.request(method, url, **kwargs)  # type: ignore[arg-type]
    except httpx.HTTPError as error:
        with lock:
            result.errors += 1
            result.error_samples.append(f"{kind}: {error!r}")
        return False, {}
    elapsed = time.perf_counter() - start
    with lock:
        if response.is_success:
            result.latencies[kind].append(elapsed)
        else:
            result.errors += 1
            result.error_samples.append(f"{kind}: {response.status_code} {response.text[:200]}")
    return response.is_success, response.json() if response.is_success else {}


def run_load(base_url: str, database: str, *, clients: int = 16, duration: float = 60.0,
             concepts: int = 150, pool: int = 4000, features: int = 8,
             strategy: str = "LC-R+", max_requests: int = 100_000, seed: int = 0) -> LoadResult:
    """Two projects, ``clients`` annotation loops for ``duration`` seconds; the figures."""
    rng = random.Random(seed)
    with httpx.Client(base_url=base_url, timeout=120.0) as client:
        projects = [create_project(client, f"load-{k}", concepts, pool, features, rng)
                    for k in range(2)]
    result = LoadResult(database, duration)
    lock = threading.Lock()
    start = time.monotonic()
    deadline = start + duration
    threads = [threading.Thread(target=_client_loop, args=(
        base_url, projects[i % 2], f"annotator-{i}", strategy, deadline, max_requests, result,
        lock, random.Random(seed * 1000 + i))) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.duration = time.monotonic() - start
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--concepts", type=int, default=150, help="concepts per project")
    parser.add_argument("--pool", type=int, default=4000, help="pool pairs per project")
    parser.add_argument("--strategy", default="LC-R+")
    parser.add_argument("--workers", type=int, default=1, help="`sporal serve --workers`")
    parser.add_argument("--postgres-url", default=os.environ.get("SPORAL_TEST_POSTGRES_URL"),
                        help="a PostgreSQL server to test as well (a fresh database is made)")
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args(argv)
    options = {"clients": args.clients, "duration": args.duration, "concepts": args.concepts,
               "pool": args.pool, "strategy": args.strategy}
    print(f"load: {args.clients} clients, {args.duration:.0f} s, two projects of {args.concepts} "
          f"concepts and {args.pool} pool pairs, strategy {args.strategy}, "
          f"{args.workers} worker(s)", flush=True)
    with tempfile.TemporaryDirectory(prefix="sporal-load-") as tmp:
        workdir = Path(tmp)
        if not args.skip_sqlite:
            with Server(f"sqlite:///{workdir / 'load.db'}", workdir, workers=args.workers,
                        startup_timeout=120) as server:
                print(run_load(server.base_url, "SQLite", **options).report(), flush=True)
        if args.postgres_url:
            with postgres_database(args.postgres_url, "sporal_load_") as database_url, \
                    Server(database_url, workdir, workers=args.workers,
                           startup_timeout=120) as server:
                print(run_load(server.base_url, "PostgreSQL", **options).report(), flush=True)
        else:
            print("PostgreSQL: skipped (no --postgres-url and SPORAL_TEST_POSTGRES_URL unset)")


if __name__ == "__main__":
    main()
