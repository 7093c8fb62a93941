"""Staged imports over a real `sporal serve`: 1,000,000 label lines within 1.5 GB; SIGKILL.

Memory is that of the server's whole process group (the server and every child it started:
the resource tracker, the forkserver and the training worker it forks), sampled while the
import runs and while the next request rebuilds the project's cache from the database; the
figure is the largest sum seen.

The sum is of each process's proportional set size (``Pss:`` in ``/proc/PID/smaps_rollup``):
a page shared by k processes counts 1/k in each, so the sum is what the group holds in
memory, each page once. The sum of the resident sets (``VmRSS``) counts a shared page once
per process that maps it: the worker is forked from the forkserver and shares most of its
pages (the interpreter, NumPy, scikit-learn), which that sum counts twice. It is printed
beside the asserted figure, for comparison.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest

from benchmarks.serving import Server

LINES = 1_000_000
CONCEPTS = 1_500
LIMIT = 1_500_000_000


def write_file(path: Path) -> int:
    """Concepts, then ``LINES`` positive labels of one order (repeats included); the number
    of distinct pairs."""
    rng = random.Random(7)
    order = [f"concept-{k:05d}" for k in range(CONCEPTS)]
    rng.shuffle(order)
    pairs = set()
    with path.open("w") as handle:
        for name in sorted(order):
            handle.write(json.dumps({"kind": "concept", "name": name}) + "\n")
        for _ in range(LINES):
            i = rng.randrange(CONCEPTS - 1)
            j = rng.randrange(i + 1, CONCEPTS)
            pairs.add((i, j))
            handle.write(json.dumps({"kind": "label", "a": order[i], "b": order[j],
                                     "label": "positive", "annotator": "bulk"}) + "\n")
    return len(pairs)


def _kib(path: str, field: str) -> int:
    for line in Path(path).read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def group_memory(pgid: int) -> tuple[int, int]:
    """Bytes in memory in the processes of group ``pgid``: the sum of their proportional
    set sizes (each page once) and the sum of their resident sets (shared pages once per
    process)."""
    pss = rss = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            one_pss = _kib(f"/proc/{entry}/smaps_rollup", "Pss:")
            one_rss = _kib(f"/proc/{entry}/status", "VmRSS:")
        except (OSError, ValueError, IndexError):  # the process ended meanwhile
            continue
        pss, rss = pss + one_pss * 1024, rss + one_rss * 1024
    return pss, rss


@pytest.mark.slow
def test_a_million_label_lines_import_within_1_5_gb(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    distinct = write_file(path)
    with Server(f"sqlite:///{tmp_path}/sporal.db", tmp_path) as server, \
            httpx.Client(base_url=server.base_url, timeout=1800) as client:
        assert server.process is not None
        pgid = server.process.pid
        first = group_memory(pgid)
        peak, stop = list(first), threading.Event()

        def sample() -> None:
            while not stop.is_set():
                pss, rss = group_memory(pgid)
                peak[:] = [max(peak[0], pss), max(peak[1], rss)]
                time.sleep(0.1)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            pid = client.post("/projects", json={"name": "big"}).json()["id"]
            started = time.perf_counter()
            with path.open("rb") as body:
                response = client.post(f"/projects/{pid}/import", content=body,
                                       headers={"Content-Type": "application/jsonl"})
            took = time.perf_counter() - started
            assert response.status_code == 200, response.text[:2000]
            counts = client.get(f"/projects/{pid}").json()["counts"]  # the cache, rebuilt
        finally:
            stop.set()
            sampler.join()
    print(f"\n1,000,000 label lines ({distinct} pairs, {CONCEPTS} concepts): {took:.1f} s, "
          f"peak PSS of the server's group {peak[0] / 1e6:.0f} MB ({first[0] / 1e6:.0f} MB "
          f"before the import); peak sum of VmRSS {peak[1] / 1e6:.0f} MB "
          f"({first[1] / 1e6:.0f} MB before)")
    assert response.json()["labels_created"] == distinct == counts["asserted_labels"]
    assert response.json()["labels_unchanged"] == LINES - distinct
    assert peak[0] <= LIMIT, f"peak PSS {peak[0] / 1e6:.0f} MB"


def staged_rows(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as connection:
        return (connection.execute("SELECT count(*) FROM import_stages").fetchone()[0],
                connection.execute("SELECT count(*) FROM staged_labels").fetchone()[0])


@pytest.mark.slow
def test_sigkill_while_staging_leaves_the_project_as_before_and_the_next_import_sweeps(
        tmp_path: Path) -> None:
    db = tmp_path / "sporal.db"
    order = [f"c{k:03d}" for k in range(700)]
    body = "".join(json.dumps({"kind": "concept", "name": n}) + "\n" for n in order)
    body += "".join(json.dumps({"kind": "label", "a": order[i], "b": order[j],
                                "label": "positive"}) + "\n"
                    for i in range(700) for j in range(i + 1, 700))  # 244,650 labels
    env = {"SPORAL_IMPORT_STAGE_LABELS": "1", "SPORAL_IMPORT_STAGE_TIMEOUT": "1"}
    with Server(f"sqlite:///{db}", tmp_path, env=env) as server, \
            httpx.Client(base_url=server.base_url, timeout=600) as client:
        pid = client.post("/projects", json={"name": "p"}).json()["id"]
        client.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": "x"}]})
        before = client.get(f"/projects/{pid}").json()["counts"]

        def post() -> None:
            with contextlib.suppress(httpx.HTTPError), \
                    httpx.Client(base_url=server.base_url, timeout=600) as other:
                other.post(f"/projects/{pid}/import", content=body.encode(),
                           headers={"Content-Type": "application/jsonl"})

        thread = threading.Thread(target=post)
        thread.start()
        deadline = time.monotonic() + 300
        while staged_rows(db)[1] == 0:  # killed once some labels are staged
            assert time.monotonic() < deadline, server.log_tail()
            time.sleep(0.05)
        server.kill()
        thread.join()
        assert staged_rows(db)[1] > 0
        server.start()
        assert client.get(f"/projects/{pid}").json()["counts"] == before
        time.sleep(1.5)  # the dead stage's heartbeat ages past the timeout
        small = (json.dumps({"kind": "concept", "name": "y"}) + "\n"
                 + json.dumps({"kind": "label", "a": "x", "b": "y", "label": "positive"}))
        answer = client.post(f"/projects/{pid}/import", content=small.encode(),
                             headers={"Content-Type": "application/jsonl"})
        assert answer.status_code == 200, answer.text
        assert staged_rows(db) == (0, 0)
        assert client.get(f"/projects/{pid}").json()["counts"]["asserted_labels"] == 1
