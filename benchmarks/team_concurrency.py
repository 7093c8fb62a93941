"""Five annotators posting at once into one ``consensus`` project, on one or two servers.

Every annotator is a client thread; all start at the same moment and post their answers
(``POST /projects/{pid}/labels``) one after the other, as fast as the service answers. The
answers come from a generated order, each wrong with probability ``--noise``; about a third of
the pairs are answered by two or three annotators, so that fast paths (a pair nobody
answered), agreeing second opinions and full consensus paths (a dissent, an answer against the
closure) all occur. With two servers (``--servers 2``, both on the same database) annotators
alternate between them: a write whose plan another server overtook is planned again inside its
write transaction, and the servers log each such replan (``a write was overtaken``).

Prints the throughput (answers per second, wall clock from the first post to the last), the
client-visible latency of a POST (p50, p99, max: replans included), the replans the servers
logged, and the machine's load. Run it on the code before and after a change, on the same
machine, to compare::

    python -m benchmarks.team_concurrency --servers 2 --out /tmp/team_concurrency
    python -m benchmarks.team_concurrency --servers 2 --postgres-url postgresql+psycopg://...

Only loopback: the servers are started here on 127.0.0.1 and stopped at exit.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.serving import Server, postgres_database

__all__ = ["main", "run"]

REPLAN_MARK = "a write was overtaken"


def _answers(concepts: int, annotators: int, per: int, noise: float,
             seed: int) -> list[list[tuple[str, str, str]]]:
    """Each annotator's answers: pairs of a chain (``c{i}`` before ``c{j}`` when i < j),
    a third of them shared with other annotators, each wrong with probability ``noise``."""
    rng = random.Random(seed)
    pairs = [(i, j) for i in range(concepts) for j in range(i + 1, concepts)]
    rng.shuffle(pairs)
    shared = pairs[:per]
    own = iter(pairs[per:])
    dealt: list[list[tuple[str, str, str]]] = []
    for _ in range(annotators):
        mine = [rng.choice(shared) if rng.random() < 0.35 else next(own) for _ in range(per)]
        dealt.append([(f"c{i}", f"c{j}", "negative" if rng.random() < noise else "positive")
                      for i, j in dict.fromkeys(mine)])
    return dealt


def _project(url: str, concepts: int) -> int:
    with httpx.Client(base_url=url, timeout=60.0) as client:
        pid = client.post("/projects", json={"name": "team", "policy": "consensus"}).json()["id"]
        names = [{"name": f"c{k}"} for k in range(concepts)]
        assert client.post(f"/projects/{pid}/concepts", json={"concepts": names}).is_success
        return int(pid)


def _post_all(urls: list[str], pid: int,
              dealt: list[list[tuple[str, str, str]]]) -> tuple[list[float], float, int]:
    """Every annotator's answers, posted at once; the latencies, the wall time, the errors."""
    barrier = threading.Barrier(len(dealt))
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def annotate(k: int) -> None:
        with httpx.Client(base_url=urls[k % len(urls)], timeout=120.0) as client:
            barrier.wait()
            for a, b, value in dealt[k]:
                started = time.perf_counter()
                response = client.post(f"/projects/{pid}/labels", json={
                    "a": a, "b": b, "label": value, "annotator": f"annotator-{k}"})
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    errors[0] += not response.is_success

    threads = [threading.Thread(target=annotate, args=(k,)) for k in range(len(dealt))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, time.perf_counter() - started, errors[0]


def run(database_url: str, out: Path, *, servers: int, annotators: int, per: int,
        concepts: int, noise: float, seed: int) -> dict[str, float]:
    """One measurement (module docstring); the figures."""
    started = [Server(database_url=database_url, log_dir=out).start() for _ in range(servers)]
    try:
        pid = _project(started[0].base_url, concepts)
        dealt = _answers(concepts, annotators, per, noise, seed)
        load = os.getloadavg()[0]
        latencies, wall, errors = _post_all([s.base_url for s in started], pid, dealt)
    finally:
        for server in started:
            server.stop()
    replans = sum(server.log_path.read_text().count(REPLAN_MARK) for server in started)
    ordered = sorted(latencies)
    return {"answers": len(latencies), "seconds": wall, "per_second": len(latencies) / wall,
            "p50_ms": 1000 * statistics.median(ordered),
            "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "max_ms": 1000 * ordered[-1], "replans": replans, "errors": errors, "load": load}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--annotators", type=int, default=5)
    parser.add_argument("--answers", type=int, default=80, help="per annotator")
    parser.add_argument("--concepts", type=int, default=120)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--postgres-url", default=None,
                        help="a PostgreSQL server (a fresh database is made there); "
                        "default: a SQLite file")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="sporal-team-concurrency-"))
    out.mkdir(parents=True, exist_ok=True)
    def measure(url: str) -> dict[str, float]:
        return run(url, out, servers=args.servers, annotators=args.annotators,
                   per=args.answers, concepts=args.concepts, noise=args.noise, seed=args.seed)

    if args.postgres_url:
        with postgres_database(args.postgres_url, "sporal_team_") as url:
            figures = measure(url)
    else:
        figures = measure(f"sqlite:///{out / 'team.db'}")
    print(f"{args.annotators} annotators at once, {args.servers} server(s), "
          f"{'PostgreSQL' if args.postgres_url else 'SQLite'}: "
          f"{figures['answers']:.0f} answers in {figures['seconds']:.1f} s "
          f"({figures['per_second']:.1f}/s); POST p50 {figures['p50_ms']:.0f} ms, "
          f"p99 {figures['p99_ms']:.0f} ms, max {figures['max_ms']:.0f} ms; "
          f"replans {figures['replans']:.0f}; errors {figures['errors']:.0f}; "
          f"load {figures['load']:.1f}")


if __name__ == "__main__":
    main()
