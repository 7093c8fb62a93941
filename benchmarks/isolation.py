"""Does heavy work on one project slow another project's labels? Over a real `sporal serve`.

Project B is small; a client posts its labels one after another and records each latency.
Meanwhile project A does heavy work, in one of two scenarios:

* ``next``: two clients call ``GET next?k=100`` on A, a generated order of ``--concepts``
  concepts (5,000) with a ``--pool`` pool (20,000), in a loop;
* ``chain``: one client imports chains of ``--chain`` concepts (900), one after another, each
  into its own project (registered with its concepts beforehand) with ``POST labels/bulk``
  (about ``chain²`` decided pairs each), for as long as B posts its labels;
* ``import``: one client imports a JSON Lines file of ``--import-concepts`` concepts (500) and
  ``--import-labels`` labels (100,000, distinct pairs of one order) into a new project with
  ``POST .../import``; B posts its labels (again from the start once they run out) for as long
  as the import runs.

Each scenario prints B's label p50/p99 while A works, against B alone before it (the baseline
in the same server and process), and writes ``isolation.csv`` and ``summary.md``.

Run::

    python -m benchmarks.isolation --out /tmp/bench_isolation
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.serving import Server, create_pool_project
from reasoning.generate import random_order

__all__ = ["main"]


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
            order = random_order(args.concepts, args.pool, degree=5, depth=20, random_state=3)
            names = [f"a{i}" for i in order.concepts]
            features = np.random.default_rng(4).normal(size=(len(order.pool), 38))
            a = create_pool_project(client, "A", names,
                                    [(names[x], names[y]) for x, y in order.pool.tolist()],
                                    features)
            client.post(f"/projects/{a}/labels/bulk", json={"labels": [
                {"a": names[x], "b": names[y], "label": "positive" if v else "negative"}
                for x, y, v in order.sample_labels(200, random_state=5)]}).raise_for_status()
            client.get(f"/projects/{a}/next", params={"k": 100}).raise_for_status()  # warm
            stop, calls = threading.Event(), []
            threads = [threading.Thread(target=_hammer_next, args=(server.base_url, a, stop,
                                                                    calls)) for _ in range(2)]
            for thread in threads:
                thread.start()
            time.sleep(1.0)
            busy = _post_labels(client, b, labels, stop, args.labels)
            stop.set()
            for thread in threads:
                thread.join()
            labels = labels[args.labels:]
            rows.append({"scenario": "next", "a_work": f"{len(calls)} next?k=100, p50 "
                         f"{_percentile(calls, 50):.0f} ms", "n": len(busy),
                         "p50": _percentile(busy, 50), "p99": _percentile(busy, 99)})
            print(f"B while two clients call next?k=100 on A ({args.concepts} concepts): label "
                  f"p50 {rows[-1]['p50']:.1f} ms, p99 {rows[-1]['p99']:.1f} ms; A: "
                  f"{rows[-1]['a_work']}")

        if "chain" in args.scenarios:
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
                with httpx.Client(base_url=server.base_url, timeout=1200) as other:
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
            rows.append({"scenario": "chain", "a_work": f"{len(imports)} {args.chain}-chain bulk "
                         f"imports, p50 {_percentile(imports, 50):.2f} s", "n": len(busy),
                         "p50": _percentile(busy, 50), "p99": _percentile(busy, 99)})
            print(f"B while A imports {args.chain}-chains one after another: label p50 "
                  f"{rows[-1]['p50']:.1f} ms, p99 {rows[-1]['p99']:.1f} ms over {len(busy)} "
                  f"labels; A: {rows[-1]['a_work']}")

        if "import" in args.scenarios:
            rows.append(import_scenario(client, server.base_url, b, labels, args))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenarios", default="next,chain")
    parser.add_argument("--concepts", type=int, default=5000)
    parser.add_argument("--pool", type=int, default=20000)
    parser.add_argument("--chain", type=int, default=900)
    parser.add_argument("--chains", type=int, default=80,
                        help="projects ready for the chain imports (A stops when they run out)")
    parser.add_argument("--labels", type=int, default=150, help="B's labels per measurement")
    parser.add_argument("--import-labels", type=int, default=100_000)
    parser.add_argument("--import-concepts", type=int, default=500)
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
