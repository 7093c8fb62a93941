"""Does heavy work on one project slow another project's labels? Over a real `sporal serve`.

Project B is small; a client posts its labels one after another and records each latency.
Meanwhile project A does heavy work, in one of four scenarios:

* ``next``: two clients call ``GET next?k=100`` on A, a generated order of ``--concepts``
  concepts (5,000) with a ``--pool`` pool (20,000), in a loop;
* ``chain``: one client imports chains of ``--chain`` concepts (900), one after another, each
  into its own project (registered with its concepts beforehand) with ``POST labels/bulk``
  (about ``chain²`` decided pairs each), for as long as B posts its labels;
* ``import``: one client imports a JSON Lines file of ``--import-concepts`` concepts (500) and
  ``--import-labels`` labels (100,000, distinct pairs of one order) into a new project with
  ``POST .../import``; B posts its labels (again from the start once they run out) for as long
  as the import runs;
* ``links``: ``--link-posts`` (50) concurrent ``POST links`` on a project whose features
  sporal computes (``--link-concepts`` concepts with texts, 400, and ``--link-pool`` pool
  pairs, 4,000), each retried after ``Retry-After`` while refused (429), while ``/health``
  is watched; it prints the answers, ``/health``'s slowest answer and the last job's state;
* ``team``: one ``POST labels/bulk`` of ``--team-answers`` answers (50,000: five annotators
  on each of ``--team-answers``/5 pairs of a generated order of ``--team-concepts`` concepts,
  400, each answer wrong with probability 10%) into a ``consensus`` project, while a fresh
  project B posts its labels one by one (at least 100, as in ``links``) and ``/health`` is
  watched; it prints B's p50/p99/max and answers that are 5xx or none, ``/health``'s slowest
  answer and the 1-minute load average before and after.

Each scenario prints B's label p50/p99 while A works, against B alone before it (the baseline
in the same server and process), and writes ``isolation.csv`` and ``summary.md``.

Run::

    python -m benchmarks.isolation --out /tmp/bench_isolation
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.serving import Server, create_pool_project
from reasoning.corpus import random_corpus
from reasoning.generate import random_order

__all__ = ["computed_project", "heavy_links", "main", "team_bulk"]


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def _small_project(client: httpx.Client, n: int) -> tuple[int, list[tuple[str, str, str]]]:
    """Project B: a random order of ``n`` concepts; its labels, to post one by one."""
    order = random_order(n, n * (n - 1) // 2, degree=1.5, depth=5, random_state=1)
    names = [f"b{i}" for i in order.concepts]
    pid = create_pool_project(client, "B", names,
                              [(names[a], names[b]) for a, b in order.pool.tolist()],
                              np.zeros((len(order.pool), 1)))
    labels = [(names[a], names[b], "positive" if y else "negative")
              for a, b, y in order.sample_labels(random_state=2)]
    return pid, labels


def _post_labels(client: httpx.Client, pid: int, labels: list[tuple[str, str, str]],
                 stop: threading.Event | None, limit: int) -> list[float]:
    times = []
    for a, b, value in labels[:limit]:
        if stop is not None and stop.is_set():
            break
        started = time.perf_counter()
        response = client.post(f"/projects/{pid}/labels",
                               json={"a": a, "b": b, "label": value})
        times.append((time.perf_counter() - started) * 1000)
        if response.status_code not in (200, 201, 409):
            raise RuntimeError(f"label on B: {response.status_code} {response.text}")
    return times


def _hammer_next(base_url: str, pid: int, stop: threading.Event, calls: list[float]) -> None:
    with httpx.Client(base_url=base_url, timeout=120) as client:
        while not stop.is_set():
            started = time.perf_counter()
            response = client.get(f"/projects/{pid}/next", params={"k": 100})
            response.raise_for_status()
            calls.append((time.perf_counter() - started) * 1000)


def computed_project(client: httpx.Client, name: str, concepts: int, pool: int, words: int,
                     links: int) -> tuple[int, list[tuple[str, str]]]:
    """A project whose features sporal computes: ``concepts`` concepts with texts, their
    links and ``pool`` pool pairs; and ``links`` new links to post to it."""
    corpus = random_corpus(concepts, pool, words=words, random_state=6)
    titles = corpus.titles
    pid = int(client.post("/projects", json={"name": name}).json()["id"])
    client.post(f"/projects/{pid}/concepts", json={"concepts": [
        {"name": t, "text": x} for t, x in zip(titles, corpus.texts, strict=True)]}
                ).raise_for_status()
    known = {(titles[u], titles[v]) for u, v in corpus.links.tolist()}
    client.post(f"/projects/{pid}/links", json={"links": [
        {"source": u, "target": v} for u, v in sorted(known)]}).raise_for_status()
    client.post(f"/projects/{pid}/pairs", json={"pairs": [
        {"a": titles[a], "b": titles[b]} for a, b in corpus.order.pool.tolist()]},
                timeout=600).raise_for_status()
    new = [(titles[b], titles[a]) for a, b in corpus.order.pool.tolist()
           if (titles[b], titles[a]) not in known]
    return pid, list(dict.fromkeys(new))[:links]


def _watch_health(base_url: str, stop: threading.Event, times: list[float],
                  statuses: list[int]) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                statuses.append(client.get("/health").status_code)
            except httpx.TimeoutException:
                statuses.append(0)
            times.append((time.perf_counter() - started) * 1000)
            stop.wait(0.05)


def _post_link(base_url: str, pid: int, link: tuple[str, str], start: threading.Barrier,
               deadline: float, out: list[tuple[int, str | None]]) -> None:
    """POST one link, again after ``Retry-After`` while refused (429, 503), until accepted."""
    with httpx.Client(base_url=base_url, timeout=120) as client:
        start.wait()
        while True:
            try:
                response = client.post(f"/projects/{pid}/links", json={"links": [
                    {"source": link[0], "target": link[1]}]})
            except httpx.TimeoutException:
                out.append((0, None))  # no answer in 120 s
                return
            out.append((response.status_code, response.headers.get("location")))
            if response.status_code not in (429, 503) or time.monotonic() > deadline:
                return
            time.sleep(float(response.headers.get("retry-after", "1")))


def _last_job(client: httpx.Client, answers: list[tuple[int, str | None]],
              timeout: float) -> dict[str, Any] | None:
    """The newest job the link POSTs started, once it ended (None: no job)."""
    jobs = sorted({loc for status, loc in answers if status == 202 and loc},
                  key=lambda loc: int(loc.rsplit("/", 1)[1]))
    if not jobs:
        return None
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = client.get(jobs[-1]).json()
        if job["state"] in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def _labels_meanwhile(base_url: str, pid: int, labels: list[tuple[str, str, str]],
                      posters: list[threading.Thread],
                      until: float) -> tuple[list[float], list[int]]:
    """Post labels one by one while the posters run (at least 100 unless past ``until``);
    each waits 10 s at most (status 0: no answer)."""
    times, statuses = [], []
    with httpx.Client(base_url=base_url, timeout=10) as client:
        for a, b, value in labels:
            if not any(poster.is_alive() for poster in posters) and (
                    len(times) >= 100 or time.monotonic() > until):
                break
            started = time.perf_counter()
            try:
                status = client.post(f"/projects/{pid}/labels",
                                     json={"a": a, "b": b, "label": value}).status_code
            except httpx.TimeoutException:
                status = 0
            times.append((time.perf_counter() - started) * 1000)
            statuses.append(status)
    return times, statuses


def heavy_links(client: httpx.Client, *, concepts: int, pool: int, words: int = 200,
                posts: int = 50, deadline: float = 120.0) -> dict[str, Any]:
    """``posts`` concurrent link POSTs on a computed-features project, while another project
    posts labels one by one and ``/health`` is watched.

    Returns every answer of the link POSTs (``statuses``), ``/health``'s latencies and
    statuses, the other project's label latencies and statuses, how many of the ``links_new``
    links were stored (``links_added``) and the last job, waited for.
    """
    base_url = str(client.base_url)
    b, labels = _small_project(client, 40)
    pid, links = computed_project(client, "P", concepts, pool, words, posts)
    before = client.get(f"/projects/{pid}/links", params={"limit": 1}).json()["total"]
    stop, health, health_statuses = threading.Event(), [], []
    watcher = threading.Thread(target=_watch_health, args=(base_url, stop, health,
                                                           health_statuses))
    watcher.start()
    start, answers = threading.Barrier(len(links) + 1), []
    until = time.monotonic() + deadline
    posters = [threading.Thread(target=_post_link, args=(base_url, pid, link, start, until,
                                                          answers)) for link in links]
    for poster in posters:
        poster.start()
    start.wait()
    label_ms, label_statuses = _labels_meanwhile(base_url, b, labels, posters, until)
    for poster in posters:
        poster.join()
    last = _last_job(client, answers, deadline)
    stop.set()
    watcher.join()
    try:
        added = client.get(f"/projects/{pid}/links",
                           params={"limit": 1}).json()["total"] - before
    except httpx.TimeoutException:  # the server is still busy with the project
        added = None
    return {"statuses": [status for status, _ in answers], "health_ms": health,
            "health_statuses": health_statuses, "label_ms": label_ms,
            "label_statuses": label_statuses, "links_new": len(links),
            "links_added": added, "last_job": last}


def _next_row(client: httpx.Client, base_url: str, b: int,
              labels: list[tuple[str, str, str]], args: argparse.Namespace) -> dict[str, Any]:
    """B's labels while two clients call ``next?k=100`` on a large project A."""
    order = random_order(args.concepts, args.pool, degree=5, depth=20, random_state=3)
    names = [f"a{i}" for i in order.concepts]
    features = np.random.default_rng(4).normal(size=(len(order.pool), 38))
    a = create_pool_project(client, "A", names,
                            [(names[x], names[y]) for x, y in order.pool.tolist()], features)
    client.post(f"/projects/{a}/labels/bulk", json={"labels": [
        {"a": names[x], "b": names[y], "label": "positive" if v else "negative"}
        for x, y, v in order.sample_labels(200, random_state=5)]}).raise_for_status()
    client.get(f"/projects/{a}/next", params={"k": 100}).raise_for_status()  # warm
    stop, calls = threading.Event(), []
    threads = [threading.Thread(target=_hammer_next, args=(base_url, a, stop, calls))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    busy = _post_labels(client, b, labels, stop, args.labels)
    stop.set()
    for thread in threads:
        thread.join()
    row = {"scenario": "next", "a_work": f"{len(calls)} next?k=100, p50 "
           f"{_percentile(calls, 50):.0f} ms", "n": len(busy),
           "p50": _percentile(busy, 50), "p99": _percentile(busy, 99)}
    print(f"B while two clients call next?k=100 on A ({args.concepts} concepts): label "
          f"p50 {row['p50']:.1f} ms, p99 {row['p99']:.1f} ms; A: {row['a_work']}")
    return row


def _chain_row(client: httpx.Client, base_url: str, b: int,
               labels: list[tuple[str, str, str]], args: argparse.Namespace) -> dict[str, Any]:
    """B's labels while A imports chains, one after another, each into its own project."""
    names = [f"chain{i}" for i in range(args.chain)]
    done = threading.Event()
    imports: list[float] = []
    # projects with their concepts ready, so that A's work is the imports alone
    ready = []
    for _ in range(args.chains):
        c = client.post("/projects", json={"name": "chain"}).json()["id"]
        client.post(f"/projects/{c}/concepts", json={
            "concepts": [{"name": x} for x in names]}).raise_for_status()
        ready.append(c)
    body = {"labels": [{"a": x, "b": y, "label": "positive"}
                       for x, y in zip(names, names[1:], strict=False)]}

    def import_chains() -> None:
        # one chain after another, each into its own project, until B has its labels
        with httpx.Client(base_url=base_url, timeout=1200) as other:
            for c in ready:
                if done.is_set():
                    break
                started = time.perf_counter()
                other.post(f"/projects/{c}/labels/bulk", json=body).raise_for_status()
                imports.append(time.perf_counter() - started)

    thread = threading.Thread(target=import_chains)
    thread.start()
    time.sleep(0.5)
    busy = _post_labels(client, b, labels, None, args.labels)
    done.set()
    thread.join()
    row = {"scenario": "chain", "a_work": f"{len(imports)} {args.chain}-chain bulk "
           f"imports, p50 {_percentile(imports, 50):.2f} s", "n": len(busy),
           "p50": _percentile(busy, 50), "p99": _percentile(busy, 99)}
    print(f"B while A imports {args.chain}-chains one after another: label p50 "
          f"{row['p50']:.1f} ms, p99 {row['p99']:.1f} ms over {len(busy)} labels; A: "
          f"{row['a_work']}")
    return row


def _import_file(concepts: int, labels: int) -> bytes:
    """JSON Lines: ``concepts`` concepts, then ``labels`` positive labels of one random order."""
    rng = np.random.default_rng(6)
    names = [f"imp{k}" for k in rng.permutation(concepts)]
    lines = [json.dumps({"kind": "concept", "name": n}) for n in names]
    seen: set[tuple[int, int]] = set()
    while len(seen) < min(labels, concepts * (concepts - 1) // 2):
        i, j = sorted(rng.choice(concepts, 2, replace=False).tolist())
        if (i, j) not in seen:
            seen.add((i, j))
            lines.append(json.dumps({"kind": "label", "a": names[i], "b": names[j],
                                     "label": "positive"}))
    return ("\n".join(lines) + "\n").encode()


def import_scenario(client: httpx.Client, base_url: str, b: int,
                    labels: list[tuple[str, str, str]],
                    args: argparse.Namespace) -> dict[str, Any]:
    """B's labels while A imports a file of ``--import-labels`` labels (see the docstring)."""
    body = _import_file(args.import_concepts, args.import_labels)
    a = client.post("/projects", json={"name": "import"}).json()["id"]
    done = threading.Event()
    took: list[float] = []

    def import_file() -> None:
        with httpx.Client(base_url=base_url, timeout=3600) as other:
            started = time.perf_counter()
            try:
                other.post(f"/projects/{a}/import", content=body,
                           headers={"Content-Type": "application/jsonl"}).raise_for_status()
                took.append(time.perf_counter() - started)
            finally:
                done.set()

    thread = threading.Thread(target=import_file)
    thread.start()
    busy: list[float] = []
    while not done.is_set():
        busy += _post_labels(client, b, labels, done, len(labels))
    thread.join()
    if not took:
        raise RuntimeError("the import failed")
    row = {"scenario": "import", "a_work": f"a {args.import_labels}-label import "
           f"({args.import_concepts} concepts), {took[0]:.1f} s", "n": len(busy),
           "p50": _percentile(busy, 50), "p99": _percentile(busy, 99)}
    print(f"B while A imports {args.import_labels} labels: label p50 {row['p50']:.1f} ms, "
          f"p99 {row['p99']:.1f} ms over {len(busy)} labels; A: {row['a_work']}")
    return row


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, \
            Server(f"sqlite:///{tmp}/sporal.db", Path(tmp),
                   env={"SPORAL_MAX_DECIDED_PAIRS": str(10**9)}) as server, \
            httpx.Client(base_url=server.base_url, timeout=600) as client:
        b, labels = _small_project(client, 40)
        baseline = _post_labels(client, b, labels, None, args.labels)
        rows.append({"scenario": "alone", "a_work": "-", "n": len(baseline),
                     "p50": _percentile(baseline, 50), "p99": _percentile(baseline, 99)})
        print(f"B alone: label p50 {rows[-1]['p50']:.1f} ms, p99 {rows[-1]['p99']:.1f} ms")
        labels = labels[args.labels:]
        if "next" in args.scenarios:
            rows.append(_next_row(client, server.base_url, b, labels, args))
            labels = labels[args.labels:]
        if "chain" in args.scenarios:
            rows.append(_chain_row(client, server.base_url, b, labels, args))
        if "import" in args.scenarios:
            rows.append(import_scenario(client, server.base_url, b, labels, args))
        if "links" in args.scenarios:
            rows.append(_links_row(client, args))
        if "team" in args.scenarios:
            rows.append(_team_row(client, args))
    return rows


def _links_row(client: httpx.Client, args: argparse.Namespace) -> dict[str, Any]:
    figures = heavy_links(client, concepts=args.link_concepts, pool=args.link_pool,
                          posts=args.link_posts)
    statuses = Counter(figures["statuses"])
    job = figures["last_job"] or {}
    work = (f"{args.link_posts} concurrent link POSTs ({args.link_concepts} concepts with "
            f"texts, {args.link_pool} pairs): answers {dict(sorted(statuses.items()))}, "
            f"/health max {max(figures['health_ms']):.0f} ms, last job {job.get('state')}")
    row = {"scenario": "links", "a_work": work, "n": len(figures["label_ms"]),
           "p50": _percentile(figures["label_ms"], 50),
           "p99": _percentile(figures["label_ms"], 99)}
    print(f"B while {work}: label p50 {row['p50']:.1f} ms, p99 {row['p99']:.1f} ms; "
          f"5xx: {sum(n for s, n in statuses.items() if s >= 500)}, B's non-2xx: "
          f"{sum(1 for s in figures['label_statuses'] if not 200 <= s < 300)}")
    return row


def _team_answers(n_answers: int, n_concepts: int) -> tuple[list[str], list[dict[str, str]]]:
    """A generated order's concepts, and ``n_answers`` answers on its pairs: five annotators
    per pair, each wrong with probability 10%."""
    team, rng = ["ann", "bob", "cy", "dan", "eve"], random.Random(7)
    order = random_order(n_concepts, max(1, n_answers // len(team)), degree=3, depth=10,
                         random_state=3)
    names = [f"t{i}" for i in order.concepts]
    items = [{"a": names[a], "b": names[b], "annotator": who,
              "label": "positive" if bool(y) != (rng.random() < 0.1) else "negative"}
             for a, b, y in order.sample_labels(random_state=2) for who in team]
    return names, items[:n_answers]


def team_bulk(client: httpx.Client, *, answers: int, concepts: int) -> dict[str, Any]:
    """One consensus bulk of ``answers`` answers into a project of ``concepts`` concepts,
    while a fresh project B posts its labels one by one and ``/health`` is watched.

    Returns B's label latencies and statuses, ``/health``'s latencies and statuses, the
    bulk's status and seconds, and the 1-minute load average before and after.
    """
    base_url = str(client.base_url)
    b, labels = _small_project(client, 60)
    names, items = _team_answers(answers, concepts)
    a = int(client.post("/projects", json={"name": "team", "policy": "consensus"})
            .json()["id"])
    client.post(f"/projects/{a}/concepts",
                json={"concepts": [{"name": n} for n in names]}).raise_for_status()
    body = json.dumps({"labels": items}).encode()
    stop, health, health_statuses = threading.Event(), list[float](), list[int]()
    watcher = threading.Thread(target=_watch_health, args=(base_url, stop, health,
                                                           health_statuses))
    bulk: list[tuple[int, float]] = []

    def post_bulk() -> None:
        with httpx.Client(base_url=base_url, timeout=3600) as other:
            started = time.perf_counter()
            response = other.post(f"/projects/{a}/labels/bulk", content=body,
                                  headers={"Content-Type": "application/json"})
            bulk.append((response.status_code, time.perf_counter() - started))

    load = [os.getloadavg()[0]]
    watcher.start()
    poster = threading.Thread(target=post_bulk)
    poster.start()
    label_ms, label_statuses = _labels_meanwhile(base_url, b, labels, [poster],
                                                 time.monotonic() + 60)
    poster.join()
    stop.set()
    watcher.join()
    load.append(os.getloadavg()[0])
    return {"label_ms": label_ms, "label_statuses": label_statuses, "health_ms": health,
            "health_statuses": health_statuses, "bulk": bulk[0] if bulk else (0, 0.0),
            "load": load}


def _team_row(client: httpx.Client, args: argparse.Namespace) -> dict[str, Any]:
    figures = team_bulk(client, answers=args.team_answers, concepts=args.team_concepts)
    ms, statuses, health = figures["label_ms"], figures["label_statuses"], figures["health_ms"]
    status, seconds = figures["bulk"]
    errors = sum(1 for s in statuses if s >= 500 or s == 0)
    work = (f"a consensus bulk of {args.team_answers} answers: {status} in {seconds:.1f} s; "
            f"B max {max(ms):.0f} ms, B 5xx/no answer {errors}, /health max "
            f"{max(health):.0f} ms (5xx {sum(1 for s in figures['health_statuses'] if s != 200)})"
            f", load {figures['load'][0]:.1f} -> {figures['load'][1]:.1f}")
    row = {"scenario": "team", "a_work": work, "n": len(ms), "p50": _percentile(ms, 50),
           "p99": _percentile(ms, 99)}
    print(f"B while {work}: label p50 {row['p50']:.1f} ms, p99 {row['p99']:.1f} ms over "
          f"{len(ms)} labels")
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenarios", default="next,chain,import,links,team")
    parser.add_argument("--concepts", type=int, default=5000)
    parser.add_argument("--pool", type=int, default=20000)
    parser.add_argument("--chain", type=int, default=900)
    parser.add_argument("--chains", type=int, default=80,
                        help="projects ready for the chain imports (A stops when they run out)")
    parser.add_argument("--labels", type=int, default=150, help="B's labels per measurement")
    parser.add_argument("--import-labels", type=int, default=100_000,
                        help="import: labels of the imported file")
    parser.add_argument("--import-concepts", type=int, default=500,
                        help="import: concepts of the imported file")
    parser.add_argument("--link-concepts", type=int, default=400,
                        help="links: concepts with texts of the computed-features project")
    parser.add_argument("--link-pool", type=int, default=4000, help="links: its pool pairs")
    parser.add_argument("--link-posts", type=int, default=50, help="links: concurrent POSTs")
    parser.add_argument("--team-answers", type=int, default=50_000,
                        help="team: answers of the consensus bulk")
    parser.add_argument("--team-concepts", type=int, default=400,
                        help="team: concepts of the consensus project")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = run(args)
    with open(args.out / "isolation.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["scenario", "a_work", "n", "p50", "p99"])
        writer.writeheader()
        writer.writerows(rows)
    lines = ["# Isolation between projects", "", "| B's labels while | A's work | n | "
             "p50 ms | p99 ms |", "|---|---|---:|---:|---:|"]
    lines += [f"| {r['scenario']} | {r['a_work']} | {r['n']} | {r['p50']:.1f} | "
              f"{r['p99']:.1f} |" for r in rows]
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
