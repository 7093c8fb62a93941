"""A ``consensus`` project at 2,000 / 20,000 / 100,000 answers: what one answer and the team's
reads cost as the project grows (issue: incremental consensus).

For each size a real ``sporal serve`` process on a fresh SQLite file holds one project whose
team of five annotators answered ``size / 5`` pairs of a random order over ``--concepts``
concepts (every annotator every pair, each answer wrong with probability ``--noise``), built
by ``POST labels/bulk``. Then, timed from the client over loopback:

* **contested**: ``--answers`` answers, each by a new annotator, against the answers already
  on a random answered pair (``--pause`` seconds apart, a team's pace);
* **agreeing**: as many answers by new annotators agreeing with a pair every answer agrees on;
* **agreement**: ``GET agreement`` right after each of five agreeing answers (the read a lead's
  page makes while the team answers: where the service has one, the last view computed,
  ``as_of.current`` false, while a job computes the next); how long after the last answer it
  is current again; read again once current (cached); and the first read of a server
  restarted on the same database;
* **disagreements**: ``GET disagreements`` first page (50);
* **five at once**: five new annotators each post ``--burst`` contested answers at the same
  time (a thread each, no pause): the client-visible p50/p99 and the answers a second.

``--postgres-url`` runs each size on a fresh database of that PostgreSQL server instead of a
SQLite file, and ``--servers N`` starts N servers on the same database: the answers go to the
servers in turn (the burst's annotators too), the reads to the first.

Prints one row per size with p50/p99 of the answers, the medians of the reads, the build time
and the 1-minute load average (start–end). ``--serve-from DIR`` serves another checkout's code
(``PYTHONPATH``), for a before/after comparison on the same machine::

    python -m benchmarks.consensus_scale --sizes 2000 20000
    python -m benchmarks.consensus_scale --sizes 2000 20000 --serve-from /tmp/main-checkout
    python -m benchmarks.consensus_scale --servers 2 --postgres-url postgresql+psycopg://...
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.serving import Server, postgres_database

__all__ = ["Figures", "main", "run"]

TEAM = ("t0", "t1", "t2", "t3", "t4")


@dataclass(frozen=True)
class Reads:
    """``GET agreement`` (seconds): after an answer (each), whether each was current, the
    wait until current, cached, the first read of a restarted server."""

    after_answer: list[float]
    current: list[bool]
    until_current: float
    cached: float
    restarted: float = float("nan")


@dataclass(frozen=True)
class Figures:
    """One size's measurements (seconds)."""

    answers: int
    build: float
    contested: list[float]
    agreeing: list[float]
    agreement: Reads
    disagreements: float
    load: tuple[float, float]
    burst: list[float] = field(default_factory=list)
    burst_wall: float = float("nan")


def _quantile(values: list[float], q: float) -> float:
    return float(np.quantile(values, q)) if values else float("nan")


def _team_answers(size: int, concepts: int, noise: float, rng: np.random.Generator
                  ) -> tuple[list[dict[str, Any]], dict[tuple[str, str], list[bool]]]:
    """Every annotator's answer on ``size / 5`` random pairs of a random order."""
    rank = rng.permutation(concepts)
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < size // len(TEAM):
        a, b = (int(x) for x in rng.integers(0, concepts, 2))
        if a != b and (b, a) not in pairs:
            pairs.add((a, b))
    items, given = [], {}
    for a, b in sorted(pairs):
        truth = bool(rank[a] < rank[b])
        values = [truth ^ bool(rng.random() < noise) for _ in TEAM]
        given[(f"c{a}", f"c{b}")] = values
        items += [{"a": f"c{a}", "b": f"c{b}", "annotator": who,
                   "label": "positive" if value else "negative"}
                  for who, value in zip(TEAM, values, strict=True)]
    return items, given


def _build(client: httpx.Client, size: int, concepts: int, noise: float,
           rng: np.random.Generator) -> tuple[int, dict[tuple[str, str], list[bool]], float]:
    """The project, its answers by bulk; its id, the answers per pair, the build time."""
    pid = int(client.post("/projects", json={"name": f"scale-{size}", "policy": "consensus"})
              .raise_for_status().json()["id"])
    client.post(f"/projects/{pid}/concepts", json={
        "concepts": [{"name": f"c{k}"} for k in range(concepts)]}).raise_for_status()
    items, given = _team_answers(size, concepts, noise, rng)
    start = time.perf_counter()
    client.post(f"/projects/{pid}/labels/bulk", json={"labels": items},
                timeout=3600).raise_for_status()
    return pid, given, time.perf_counter() - start


def _settle(client: httpx.Client, pid: int) -> None:
    """Wait for the background refit (a service without one answers 404 or 405)."""
    response = client.post(f"/projects/{pid}/labels/refit")
    if response.status_code in (404, 405):
        return
    response.raise_for_status()
    while True:
        job = client.get(response.headers["Location"])
        if job.status_code == 404 or job.json()["state"] not in ("queued", "running"):
            return
        time.sleep(0.05)


def _timed_post(client: httpx.Client, pid: int, body: dict[str, Any]) -> float:
    start = time.perf_counter()
    client.post(f"/projects/{pid}/labels", json=body).raise_for_status()
    return time.perf_counter() - start


def _against(given: dict[tuple[str, str], list[bool]], pair: tuple[str, str],
             annotator: str) -> dict[str, Any]:
    """An answer of ``annotator`` against the majority of the answers on ``pair``."""
    values = given[pair]
    majority = sum(values) * 2 > len(values)
    return {"a": pair[0], "b": pair[1], "annotator": annotator,
            "label": "negative" if majority else "positive"}


def _answers(clients: list[httpx.Client], pid: int, given: dict[tuple[str, str], list[bool]],
             n: int, pause: float, rng: np.random.Generator) -> tuple[list[float], list[float]]:
    """``n`` contested answers, then ``n`` agreeing ones, each by a new annotator, sent to
    the servers in turn."""
    pairs = list(given)
    picks = rng.choice(len(pairs), n, replace=False)
    contested, agreeing = [], []
    for k, index in enumerate(picks):
        body = _against(given, pairs[int(index)], f"new-{k}")
        contested.append(_timed_post(clients[k % len(clients)], pid, body))
        time.sleep(pause)
    _settle(clients[0], pid)
    unanimous = [p for p in pairs if len(set(given[p])) == 1]
    for k, index in enumerate(rng.choice(len(unanimous), n, replace=False)):
        (a, b) = unanimous[int(index)]
        body = {"a": a, "b": b, "annotator": f"agree-{k}",
                "label": "positive" if given[(a, b)][0] else "negative"}
        agreeing.append(_timed_post(clients[k % len(clients)], pid, body))
        time.sleep(pause)
    return contested, agreeing


def _burst(clients: list[httpx.Client], pid: int, given: dict[tuple[str, str], list[bool]],
           each: int, rng: np.random.Generator) -> tuple[list[float], float]:
    """Five new annotators post ``each`` contested answers at once (a thread each): every
    answer's latency and the wall time of the whole burst."""
    pairs = list(given)
    picks = rng.choice(len(pairs), 5 * each, replace=False)

    def one(who: int) -> list[float]:
        client = clients[who % len(clients)]
        return [_timed_post(client, pid, _against(given, pairs[int(picks[who * each + k])],
                                                  f"burst-{who}")) for k in range(each)]

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=5) as pool:
        times = [t for part in pool.map(one, range(5)) for t in part]
    return times, time.perf_counter() - start


def _read(client: httpx.Client, path: str) -> float:
    start = time.perf_counter()
    client.get(path).raise_for_status()
    return time.perf_counter() - start


def _view(client: httpx.Client, pid: int, **params: Any) -> tuple[float, bool]:
    """One ``GET agreement``: its time and whether it was current (a service without
    ``as_of`` always is)."""
    start = time.perf_counter()
    view = client.get(f"/projects/{pid}/agreement", params=params).raise_for_status().json()
    return time.perf_counter() - start, bool(view.get("as_of", {}).get("current", True))


def _agreement_reads(client: httpx.Client, pid: int,
                     given: dict[tuple[str, str], list[bool]], rng: np.random.Generator
                     ) -> Reads:
    """``GET agreement`` right after each of five agreeing answers, then until current, and
    cached (:class:`Reads`)."""
    unanimous = [p for p in given if len(set(given[p])) == 1]
    after, current = [], []
    for k, index in enumerate(rng.choice(len(unanimous), 5, replace=False)):
        (a, b) = unanimous[int(index)]
        client.post(f"/projects/{pid}/labels", json={
            "a": a, "b": b, "annotator": f"reader-{k}",
            "label": "positive" if given[(a, b)][0] else "negative"}).raise_for_status()
        took, now = _view(client, pid)
        after.append(took)
        current.append(now)
        time.sleep(0.2)
    start = time.perf_counter()
    while not _view(client, pid)[1]:
        time.sleep(0.1)
    until = time.perf_counter() - start
    cached = statistics.median(_view(client, pid)[0] for _ in range(5))
    return Reads(after, current, until, cached)


@dataclass(frozen=True)
class Setup:
    """Where a size runs: ``servers`` servers on a fresh SQLite file, or on a fresh database
    of the PostgreSQL server ``postgres_url``; ``serve_from`` another checkout's code."""

    servers: int = 1
    postgres_url: str | None = None
    serve_from: Path | None = None


@contextlib.contextmanager
def _servers(setup: Setup, tmp: str) -> Iterator[tuple[list[Server], list[httpx.Client]]]:
    """The setup's servers started on a fresh database; a client for each."""
    env = {"PYTHONPATH": str(setup.serve_from)} if setup.serve_from else {}
    with contextlib.ExitStack() as stack:
        url = (stack.enter_context(postgres_database(setup.postgres_url, "sporal_scale_"))
               if setup.postgres_url else f"sqlite:///{tmp}/scale.db")
        servers: list[Server] = []
        stack.callback(lambda: [server.stop() for server in servers])
        for _ in range(setup.servers):
            servers.append(Server(url, Path(tmp), env=env).start())
        yield servers, [stack.enter_context(httpx.Client(base_url=s.base_url, timeout=600))
                        for s in servers]


def run(size: int, *, concepts: int, noise: float, n: int, pause: float, seed: int,
        setup: Setup = Setup(), burst: int = 6) -> Figures:
    """Build one project of ``size`` answers on fresh servers and measure it."""
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="sporal-scale-") as tmp, \
            _servers(setup, tmp) as (servers, clients):
        client, load = clients[0], os.getloadavg()[0]
        pid, given, build = _build(client, size, concepts, noise, rng)
        contested, agreeing = _answers(clients, pid, given, n, pause, rng)
        _settle(client, pid)
        reads = _agreement_reads(client, pid, given, rng)
        pages = statistics.median(_read(client, f"/projects/{pid}/disagreements?limit=50")
                                  for _ in range(5))
        together, wall = _burst(clients, pid, given, burst, rng) if burst else ([], 0.0)
        _settle(client, pid)
        servers[0].stop()
        servers[0].start()
        with httpx.Client(base_url=servers[0].base_url, timeout=600) as again:
            reads = replace(reads, restarted=_view(again, pid)[0])
        return Figures(size, build, contested, agreeing, reads, pages,
                       (load, os.getloadavg()[0]), together, wall)


def _row(f: Figures) -> str:
    ms = 1000.0
    return (f"| {f.answers:,} | {f.build:.1f} s | {_quantile(f.contested, .5) * ms:.0f} / "
            f"{_quantile(f.contested, .99) * ms:.0f} ms | {_quantile(f.agreeing, .5) * ms:.0f} ms"
            f" | {_reads_cell(f.agreement)} | "
            f"{f.disagreements * ms:.0f} ms | {_burst_cell(f)} | "
            f"{f.load[0]:.1f}–{f.load[1]:.1f} |")


def _reads_cell(r: Reads) -> str:
    ms = 1000.0
    return (f"{_quantile(r.after_answer, .5) * ms:.0f} / {max(r.after_answer) * ms:.0f} ms "
            f"({sum(r.current)}/{len(r.current)} current), current after "
            f"{r.until_current:.1f} s, cached {r.cached * ms:.0f} ms, restarted "
            f"{r.restarted * ms:.0f} ms")


def _burst_cell(f: Figures) -> str:
    if not f.burst:
        return "–"
    return (f"{_quantile(f.burst, .5) * 1000:.0f} / {_quantile(f.burst, .99) * 1000:.0f} ms, "
            f"{len(f.burst) / f.burst_wall:.1f} answers/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000, 100000])
    parser.add_argument("--concepts", type=int, default=300)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--answers", type=int, default=30)
    parser.add_argument("--pause", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--serve-from", type=Path, default=None)
    parser.add_argument("--burst", type=int, default=6,
                        help="contested answers each of five annotators posts at once (0: none)")
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--postgres-url", default=None,
                        help="run on fresh databases of this PostgreSQL server, not SQLite")
    args = parser.parse_args(argv)
    setup = Setup(args.servers, args.postgres_url, args.serve_from)
    print(f"{'PostgreSQL' if args.postgres_url else 'SQLite'}, {args.servers} server(s)")
    print("| answers | build (bulk) | contested p50 / p99 | agreeing p50 | "
          "`GET agreement` after an answer p50 / max; until current; cached; "
          "restarted | `GET disagreements` first page | "
          "five at once: p50 / p99, throughput | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        figures = run(size, concepts=args.concepts, noise=args.noise, n=args.answers,
                      pause=args.pause, seed=args.seed, setup=setup, burst=args.burst)
        print(_row(figures), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
