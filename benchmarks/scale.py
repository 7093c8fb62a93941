"""How far does one project scale? A long chain and a large sparse order, on `sporal serve`.

Run::

    python -m benchmarks.scale --out /tmp/bench_scale      # full sizes: about half an hour
    python -m benchmarks.scale --out /tmp/bench_scale --only chain --chain 2000
    python -m benchmarks.scale --out /tmp/bench_scale --only large --concepts 20000 --pool 200000
    python -m benchmarks.scale --chain 200 --concepts 500 --pool 3000 --questions 20 \
        --refusal-budget 5000            # seconds (tests/benchmarks/test_scale.py)

``--out`` defaults to a new temporary folder (its path is printed at the end).

Two workloads, each on its own fresh server and SQLite database (``--only`` picks one):

``chain``
    A chain of ``--chain`` concepts (20,000): ``c0 ≺ c1 ≺ … ≺ c_{N-1}``, i.e. the N-1 positive
    labels ``(c_i, c_{i+1})``, imported with one ``POST labels/bulk`` into a fresh project on a
    server whose ``SPORAL_MAX_DECIDED_PAIRS`` is raised: the chain decides N(N-1) pairs (every
    ordered pair: half positive, half negative). Measured: the import's wall time, the server's
    peak RSS (its ``VmHWM`` and the sampled ``VmRSS`` of its process group, training workers
    included), the database size after (SQLite file + ``-wal``), the first page of
    ``GET labels?limit=100`` and ``GET export?format=csv`` (time to first byte, total and
    rate; the body is counted, not kept, and reading stops at ``--timeout``: a 20,000-chain's
    CSV is some 14 GB). Then the same import into a server with the default budget (5×10^7
    decided pairs, or ``--refusal-budget``, which a small chain needs to be refused at all):
    it must be refused with 422 ``budget-exceeded``, quickly.
``large``
    A generated sparse order of ``--concepts`` concepts (100,000): a random DAG over a hidden
    random order where each concept picks 0..10 parents among the ``WINDOW`` concepts before it
    (nearby ones preferred) on a strictly lower one of ``DEPTH`` levels, so that every chain is
    short and the truth stays cheap to look up; a pool of ``--pool`` candidate pairs (1,000,000:
    ancestor pairs, their reverses and nearby pairs) with 4 features each, sent in chunks of
    ``--chunk``. A simulated annotator then answers ``--questions`` questions (500) with the
    truth: ``GET next`` (the default strategy), then ``POST labels``. Measured: setup time
    (concepts and pool), label and next p50/p99, server RSS at the end, database size. The same
    loop first runs on a small project (``--small-concepts`` 1,000, ``--small-pool`` 10,000) on
    the same server: the baseline, with ratios large/small.

Targets (``TARGETS``): chain import ≤ 60 s, peak RSS ≤ 2 GiB, database ≤ 500 MiB, refusal
≤ 1 s; large: label p50 ≤ 20 ms, next p50 and p99 ≤ 1 s. A request that runs past
``--timeout``, or a server whose RSS passes ``--max-rss-gb`` (it is killed then, to spare the
machine), is reported as a failed target and the benchmark goes on with the next phase; a
labeling loop stops at ``--loop-seconds`` (its percentiles are then over the questions it
answered). Writes ``scale.csv`` (one figure a row), ``summary.md`` (the table, targets,
verdicts) and the servers' logs into ``--out``, after every phase, and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from tqdm import tqdm

from benchmarks.serving import Server

__all__ = ["COLUMNS", "TARGETS", "Figure", "Order", "generate_order", "main"]

MIB = 1024**2
COLUMNS = ["phase", "metric", "value", "unit", "target", "met", "note"]
# (phase, metric) -> the largest value that meets the target
TARGETS: dict[tuple[str, str], float] = {
    ("chain", "import_s"): 60.0,
    ("chain", "peak_rss_mib"): 2048.0,
    ("chain", "db_mib"): 500.0,
    ("refusal", "refusal_s"): 1.0,
    ("large", "label_p50_ms"): 20.0,
    ("large", "next_p50_ms"): 1000.0,
    ("large", "next_p99_ms"): 1000.0,
}
DEFAULT_DECIDED_PAIRS = 50_000_000  # the server's own default (app/settings.py), for the report
DEFAULT_MAX_CONCEPTS = 50_000  # ditto; raised for a larger project
MAX_ITEMS = 100_000  # the most items one request may hold (app/schemas.py)

DEPTH = 8  # levels of the generated order: a chain of prerequisites has at most DEPTH concepts
WINDOW = 50  # a parent lies at most this many places before its child in the hidden order
MAX_PARENTS = 10
FEATURES = 4
ANNOTATOR = "sim"


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------
@dataclass
class Figure:
    """One measured number; ``value`` None: not measured (``note`` says why)."""

    phase: str
    metric: str
    value: float | None
    unit: str
    note: str = ""
    ok: bool = True  # False: the target fails whatever the value (e.g. a wrong answer)

    @property
    def target(self) -> float | None:
        return TARGETS.get((self.phase, self.metric))

    @property
    def met(self) -> str:
        if self.target is None:
            return ""
        return "yes" if self.ok and self.value is not None and self.value <= self.target else "no"

    def row(self) -> dict[str, Any]:
        return {"phase": self.phase, "metric": self.metric,
                "value": "" if self.value is None else round(self.value, 4), "unit": self.unit,
                "target": "" if self.target is None else f"<= {self.target:g}", "met": self.met,
                "note": self.note}


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if abs(value) >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.3g}"


def write_outputs(out: Path, figures: Sequence[Figure], header: Sequence[str]) -> str:
    """Write ``scale.csv`` and ``summary.md``; return the markdown table."""
    with (out / "scale.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(f.row() for f in figures)
    table = ["| phase | metric | value | unit | target | met | note |",
             "|---|---|---:|---|---|---|---|"]
    table += [f"| {f.phase} | {f.metric} | {_fmt(f.value)} | {f.unit} | "
              f"{'' if f.target is None else f'≤ {f.target:g}'} | {f.met} | "
              f"{f.note.replace('|', '/')} |" for f in figures]
    checked = [f for f in figures if f.target is not None]
    verdict = (f"{sum(f.met == 'yes' for f in checked)} of {len(checked)} targets met"
               + (": missed " + ", ".join(f"{f.phase} {f.metric}" for f in checked
                                          if f.met == "no") if any(f.met == "no" for f in checked)
                  else ""))
    text = "\n".join([*header, "", *table, "", verdict, ""])
    (out / "summary.md").write_text(text)
    return "\n".join([*table, "", verdict])


# --------------------------------------------------------------------------------------------
# the server's memory and database
# --------------------------------------------------------------------------------------------
def _status_kib(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def group_pids(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` (the server, its forkserver and workers)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
        if len(fields) > 2 and int(fields[2]) == pgid:
            pids.append(int(entry))
    return pids


def group_rss(pgid: int) -> int:
    """Bytes resident in the process group now (the sum of each process's VmRSS)."""
    return sum((_status_kib(pid, "VmRSS") or 0) * 1024 for pid in group_pids(pgid))


def main_hwm(server: Server) -> int | None:
    """The server process's own peak resident bytes since it started (VmHWM)."""
    if server.process is None:
        return None
    kib = _status_kib(server.process.pid, "VmHWM")
    return None if kib is None else kib * 1024


def sqlite_bytes(path: Path) -> int:
    """The database file plus its write-ahead log."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


class Monitor:
    """Samples the server's process-group RSS in a thread; kills the group past ``limit``.

    ``peak`` is the largest sample since :meth:`reset`. While a :meth:`ticking` phase runs, a
    tqdm line shows its elapsed time and the RSS.
    """

    def __init__(self, server: Server, limit_bytes: int, interval: float = 0.2) -> None:
        self.server, self.limit, self.interval = server, limit_bytes, interval
        self.peak = 0
        self.killed: str | None = None
        self._bar: Any = None
        self._shown = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            process = self.server.process
            if process is None or process.poll() is not None:
                self._stop.wait(self.interval)
                continue
            rss = group_rss(process.pid)
            self.peak = max(self.peak, rss)
            if rss > self.limit and self.killed is None:
                self.killed = (f"server killed: RSS {rss / MIB:,.0f} MiB passed --max-rss-gb "
                               f"({self.limit / 1024**3:g} GiB)")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            bar = self._bar
            if bar is not None and time.monotonic() - self._shown >= 1.0:
                bar.set_postfix_str(f"RSS {rss / MIB:,.0f} MiB", refresh=False)
                bar.refresh()
                self._shown = time.monotonic()
            self._stop.wait(self.interval)

    def reset(self) -> None:
        process = self.server.process
        self.peak = group_rss(process.pid) if process is not None else 0

    def peak_bytes(self) -> int:
        """The larger of the sampled group peak and the server process's own VmHWM."""
        return max(self.peak, main_hwm(self.server) or 0)

    @contextlib.contextmanager
    def ticking(self, desc: str, progress: bool) -> Iterator[None]:
        bar = tqdm(desc=desc, bar_format="{desc}: {elapsed}{postfix}", disable=not progress,
                   file=sys.stderr)
        self._bar = None if bar.disable else bar
        try:
            yield
        finally:
            self._bar = None
            bar.close()

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------
@dataclass
class Call:
    seconds: float
    response: httpx.Response | None
    error: str | None  # a timeout, a lost connection, or a status other than expected

    def json(self) -> Any:
        return self.response.json() if self.response is not None else None


def call(client: httpx.Client, monitor: Monitor, method: str, url: str, *,
         expect: Sequence[int] = (200, 201), **kwargs: Any) -> Call:
    """One timed request; a timeout or a dead server is an error, never an exception."""
    start = time.perf_counter()
    try:
        response = client.request(method, url, **kwargs)
    except httpx.TimeoutException:
        seconds = time.perf_counter() - start
        return Call(seconds, None, monitor.killed or f"timeout after {seconds:,.0f} s")
    except httpx.HTTPError as exc:
        return Call(time.perf_counter() - start, None,
                    monitor.killed or f"{type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - start
    if response.status_code not in expect:
        return Call(seconds, response, f"HTTP {response.status_code}: {response.text[:300]}")
    return Call(seconds, response, None)


def post_chunks(client: httpx.Client, monitor: Monitor, url: str, key: str, total: int,
                make: Callable[[int, int], list[dict[str, Any]]], chunk: int, desc: str,
                progress: bool) -> Call:
    """POST ``total`` items in chunks of ``chunk`` (``make(start, stop)`` builds one chunk).

    The answer holds the summed seconds and the last response; the first failure stops it.
    """
    seconds, last = 0.0, None
    with tqdm(total=total, desc=desc, unit=key[:-1] if key.endswith("s") else key,
              unit_scale=True, disable=not progress, file=sys.stderr) as bar:
        for start in range(0, total, chunk):
            stop = min(total, start + chunk)
            body = {key: make(start, stop)}
            done = call(client, monitor, "POST", url, json=body)
            seconds += done.seconds
            if done.error:
                return Call(seconds, done.response, f"{desc} [{start}:{stop}]: {done.error}")
            last = done.response
            bar.update(stop - start)
    return Call(seconds, last, None)


def create_project(client: httpx.Client, name: str) -> int:
    response = client.post("/projects", json={"name": name})
    response.raise_for_status()
    return int(response.json()["id"])


@contextlib.contextmanager
def serving(out: Path, work: Path | None, name: str, env: dict[str, str],
            limit_bytes: int, timeout: float) -> Iterator[tuple[Server, Monitor, httpx.Client,
                                                                Path]]:
    """A fresh server on a fresh SQLite file, its RSS monitor and a client."""
    with tempfile.TemporaryDirectory(prefix=f"sporal-scale-{name}-", dir=work) as tmp:
        database = Path(tmp) / f"{name}.db"
        server = Server(f"sqlite:///{database}", out, env=env)
        with server, Monitor(server, limit_bytes) as monitor, \
                httpx.Client(base_url=server.base_url, timeout=timeout) as client:
            yield server, monitor, client, database


# --------------------------------------------------------------------------------------------
# chain
# --------------------------------------------------------------------------------------------
def chain_labels(names: Sequence[str]) -> Callable[[int, int], list[dict[str, Any]]]:
    def make(start: int, stop: int) -> list[dict[str, Any]]:
        return [{"a": names[i], "b": names[i + 1], "label": "positive"}
                for i in range(start, stop)]
    return make


def concept_items(names: Sequence[str]) -> Callable[[int, int], list[dict[str, Any]]]:
    def make(start: int, stop: int) -> list[dict[str, Any]]:
        return [{"name": x} for x in names[start:stop]]
    return make


def run_chain(args: argparse.Namespace, add: Callable[[Figure], None]) -> None:
    """Import the chain on a raised budget, then list and export it."""
    n = args.chain
    names = [f"c{i}" for i in range(n)]
    decided = n * (n - 1)
    env = {"SPORAL_MAX_DECIDED_PAIRS": str(max(DEFAULT_DECIDED_PAIRS, 2 * decided)),
           "SPORAL_MAX_CONCEPTS": str(max(DEFAULT_MAX_CONCEPTS, n))}
    progress = not args.no_progress
    with serving(args.out, args.work, "chain", env, args.max_rss, args.timeout) as (
            server, monitor, client, database):
        pid = create_project(client, f"chain-{n}")
        done = post_chunks(client, monitor, f"/projects/{pid}/concepts", "concepts", n,
                           concept_items(names), args.chunk, "chain concepts", progress)
        add(Figure("chain", "concepts_s", done.seconds, "s", done.error or f"{n:,} concepts"))
        if done.error:
            return
        monitor.reset()
        with monitor.ticking(f"chain import ({n - 1:,} labels)", progress):
            done = post_chunks(client, monitor, f"/projects/{pid}/labels/bulk", "labels",
                               n - 1, chain_labels(names), args.chunk, "chain labels", False)
        decided_now = (done.json() or {}).get("newly_decided") or {}
        note = done.error or (f"{n - 1:,} labels; newly decided: "
                              f"{decided_now.get('positive', 0):,} positive, "
                              f"{decided_now.get('negative', 0):,} negative")
        add(Figure("chain", "import_s", None if done.error else done.seconds, "s", note))
        add(Figure("chain", "peak_rss_mib", monitor.peak_bytes() / MIB, "MiB",
                   "during the import; max of the group's sampled VmRSS and the server's "
                   "VmHWM" + ("; " + monitor.killed if monitor.killed else "")))
        add(Figure("chain", "db_mib", sqlite_bytes(database) / MIB, "MiB",
                   "SQLite file + -wal after the import"
                   + ("" if not done.error else " (the import failed)")))
        if done.error:
            add(Figure("chain", "labels_page_s", None, "s", "skipped: the import failed"))
            return

        page = call(client, monitor, "GET", f"/projects/{pid}/labels", params={"limit": 100})
        total = (page.json() or {}).get("total") if not page.error else None
        add(Figure("chain", "labels_page_s", None if page.error else page.seconds, "s",
                   page.error or "GET labels?limit=100, first call"))
        add(Figure("chain", "decided_pairs", None if total is None else float(total), "pairs",
                   f"labels page total; a chain decides N(N-1) = {decided:,}",
                   ok=total == decided))

        monitor.reset()
        with monitor.ticking("chain export (csv)", progress):
            export = stream_export(client, monitor, pid, args.timeout)
        ttfb, seconds, size, error = export
        add(Figure("chain", "export_ttfb_s", ttfb, "s", error or "GET export?format=csv"))
        add(Figure("chain", "export_s", None if error else seconds, "s", error or ""))
        add(Figure("chain", "export_mib", size / MIB, "MiB",
                   "bytes received" + (" before it stopped" if error else "")))
        streamed = seconds - (ttfb or 0.0)
        add(Figure("chain", "export_rate_mib_s", size / MIB / streamed if streamed > 0 and size
                   else None, "MiB/s", "after the first byte"))
        add(Figure("chain", "export_peak_rss_mib", monitor.peak_bytes() / MIB, "MiB",
                   "server peak since start (VmHWM) or during the export (sampled)"
                   + ("; " + monitor.killed if monitor.killed else "")))


def stream_export(client: httpx.Client, monitor: Monitor, pid: int,
                  deadline: float) -> tuple[float | None, float, int, str | None]:
    """(time to first byte, total seconds, bytes, error) of ``GET export?format=csv``.

    The body is counted, not kept; reading stops (an error) after ``deadline`` seconds in all,
    since a streamed answer never runs into the client's read timeout.
    """
    start = time.perf_counter()
    ttfb: float | None = None
    size = 0
    try:
        with client.stream("GET", f"/projects/{pid}/export", params={"format": "csv"}) as resp:
            for chunk in resp.iter_raw():
                if ttfb is None and chunk:
                    ttfb = time.perf_counter() - start
                size += len(chunk)
                if time.perf_counter() - start > deadline:
                    return (ttfb, time.perf_counter() - start, size,
                            f"stopped at the --timeout ({deadline:g} s) after "
                            f"{size / MIB:,.0f} MiB")
            if resp.status_code != 200:
                return ttfb, time.perf_counter() - start, size, f"HTTP {resp.status_code}"
    except httpx.TimeoutException:
        seconds = time.perf_counter() - start
        return ttfb, seconds, size, monitor.killed or f"timeout after {seconds:,.0f} s"
    except httpx.HTTPError as exc:
        return (ttfb, time.perf_counter() - start, size,
                monitor.killed or f"{type(exc).__name__}: {exc}")
    return ttfb, time.perf_counter() - start, size, None


def run_refusal(args: argparse.Namespace, add: Callable[[Figure], None]) -> None:
    """The chain into a server with the default budget: refused with 422, before the work."""
    n = args.chain
    names = [f"c{i}" for i in range(n)]
    env = {"SPORAL_MAX_CONCEPTS": str(max(DEFAULT_MAX_CONCEPTS, n))}
    budget = DEFAULT_DECIDED_PAIRS
    if args.refusal_budget is not None:
        env["SPORAL_MAX_DECIDED_PAIRS"] = str(args.refusal_budget)
        budget = args.refusal_budget
    progress = not args.no_progress
    with serving(args.out, args.work, "refusal", env, args.max_rss, args.timeout) as (
            _server, monitor, client, _database):
        pid = create_project(client, f"chain-{n}-refused")
        done = post_chunks(client, monitor, f"/projects/{pid}/concepts", "concepts", n,
                           concept_items(names), args.chunk, "refusal concepts", progress)
        if done.error:
            add(Figure("refusal", "refusal_s", None, "s", done.error, ok=False))
            return
        with monitor.ticking(f"chain import, budget {budget:,}", progress):
            done = call(client, monitor, "POST", f"/projects/{pid}/labels/bulk",
                        expect=(422,), json={"labels": chain_labels(names)(0, min(
                            n - 1, MAX_ITEMS))})
        body = done.json() if done.response is not None else None
        if not isinstance(body, dict):
            body = {}
        kind = str(body.get("type", ""))
        refused = done.error is None and kind.endswith("budget-exceeded")
        if refused:
            note = f"422 {kind.rsplit('/', 1)[-1]}: {body.get('detail', '')}"
        elif done.response is not None and done.response.is_success:
            note = f"not refused: HTTP {done.response.status_code}"
        else:
            note = (done.error or f"422 but type {kind!r}")[:200]
        if n * (n - 1) <= budget:
            note += (f" (a {n:,}-chain decides {n * (n - 1):,} pairs, within the budget "
                     f"{budget:,}: pass a lower --refusal-budget)")
        add(Figure("refusal", "refusal_s", done.seconds if done.response is not None else None,
                   "s", note, ok=refused))


# --------------------------------------------------------------------------------------------
# large: a generated sparse order and a labeling loop
# --------------------------------------------------------------------------------------------
@dataclass
class Order:
    """A hidden strict order on positions ``0..n-1`` (parents lie before their children),
    the concepts' names (shuffled, so that names say nothing of positions), and a pool."""

    names: list[str]
    parents: list[list[int]]  # each row descending: the direct prerequisites of a position
    pool: np.ndarray  # (m, 2) positions (a, b): would a precede b?
    features: np.ndarray  # (m, FEATURES)
    position: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.position = {name: i for i, name in enumerate(self.names)}

    def precedes(self, a: int, b: int) -> bool:
        """Is position ``a`` an ancestor of ``b``? A search up from ``b``, never below ``a``."""
        if a >= b or b - a > (DEPTH - 1) * WINDOW:  # every ancestor lies within this reach
            return False
        stack, seen = [b], {b}
        while stack:
            for p in self.parents[stack.pop()]:
                if p < a:
                    break  # rows descend
                if p == a:
                    return True
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return False

    def truth(self, a: str, b: str) -> bool:
        return self.precedes(self.position[a], self.position[b])


def _parents(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(parents (n, MAX_PARENTS) descending, -1 padded; levels) of a random sparse DAG."""
    levels = rng.integers(0, DEPTH, n)
    counts = rng.integers(0, MAX_PARENTS + 1, n)
    offsets = np.minimum(rng.geometric(4.0 / WINDOW, size=(n, MAX_PARENTS)), WINDOW)
    candidates = np.arange(n)[:, None] - offsets
    valid = (np.arange(MAX_PARENTS)[None, :] < counts[:, None]) & (candidates >= 0)
    valid &= levels[np.maximum(candidates, 0)] < levels[:, None]
    parents = -np.sort(-np.where(valid, candidates, -1), axis=1)
    repeated = np.zeros_like(valid)
    repeated[:, 1:] = parents[:, 1:] == parents[:, :-1]
    parents[repeated] = -1
    return -np.sort(-parents, axis=1), levels


def _ancestor_pairs(parents: np.ndarray, size: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """About ``size`` (ancestor, descendant) pairs, by random walks up the parents."""
    n = len(parents)
    width = (parents >= 0).sum(axis=1)
    start = rng.integers(0, n, size)
    steps = rng.integers(1, DEPTH, size)
    here = start.copy()
    moved = np.zeros(size, bool)
    for step in range(DEPTH - 1):
        go = (step < steps) & (width[here] > 0)
        pick = (rng.random(size) * width[here]).astype(np.int64)
        here[go] = parents[here[go], pick[go]]
        moved |= go
    return here[moved], start[moved]


def generate_order(n: int, pool_size: int, seed: int) -> Order:
    """A sparse random order of ``n`` concepts and a pool of ``pool_size`` distinct pairs.

    The pool mixes ancestor pairs (positive, ~35%), their reverses (negative, ~15%) and pairs
    of nearby concepts (mostly incomparable); features are the pair's distance and level gap in
    the hidden order, with noise, and two noise columns.

    Examples
    --------
    >>> order = generate_order(300, 2000, seed=0)
    >>> order.pool.shape, order.features.shape, len(set(map(tuple, order.pool.tolist())))
    ((2000, 2), (2000, 4), 2000)
    >>> a, b = next((a, b) for a, row in enumerate(order.parents) for b in row)
    >>> order.precedes(b, a), order.precedes(a, b)
    (True, False)
    """
    if n < 2:
        raise ValueError("an order needs at least 2 concepts")
    if not 1 <= pool_size <= n * (n - 1):
        raise ValueError(f"the pool must hold 1 .. n(n-1) = {n * (n - 1):,} pairs")
    rng = np.random.default_rng(seed)
    parents, levels = _parents(n, rng)
    reach = (DEPTH - 1) * WINDOW
    keys = np.empty(0, np.int64)
    for attempt in range(50):
        want = 2 * (pool_size - len(keys)) + 64
        if attempt < 40:
            anc, desc = _ancestor_pairs(parents, int(want * 0.35), rng)
            back = rng.random(len(anc)) < 0.3  # some reversed: negative
            a = np.concatenate([np.where(back, desc, anc), rng.integers(0, n, want // 2)])
            near = rng.integers(1, reach + 1, want // 2) * rng.choice([-1, 1], want // 2)
            b = np.concatenate([np.where(back, anc, desc), a[len(anc):] + near])
        else:  # a tiny order: the nearby pairs ran out, draw from all pairs
            a, b = rng.integers(0, n, want), rng.integers(0, n, want)
        keep = (b >= 0) & (b < n) & (a != b)
        fresh = np.setdiff1d(a[keep] * n + b[keep], keys)
        fresh = rng.permutation(np.unique(fresh))[:pool_size - len(keys)]
        keys = np.concatenate([keys, fresh])
        if len(keys) == pool_size:
            break
    else:
        raise RuntimeError("could not draw the pool")
    keys = rng.permutation(keys)
    pool = np.stack([keys // n, keys % n], axis=1)
    gap = pool[:, 1] - pool[:, 0]
    features = np.column_stack([
        gap / reach + rng.normal(0, 0.3, len(pool)),
        (levels[pool[:, 1]] - levels[pool[:, 0]]) / DEPTH + rng.normal(0, 0.3, len(pool)),
        rng.normal(0, 1, (len(pool), FEATURES - 2))]).round(3)
    names = [f"x{i}" for i in rng.permutation(n)]
    rows = [[p for p in row if p >= 0] for row in parents.tolist()]
    return Order(names, rows, pool, features)


def _percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def run_loop(args: argparse.Namespace, client: httpx.Client, monitor: Monitor, phase: str,
             order: Order, add: Callable[[Figure], None]) -> dict[str, float | None]:
    """Register ``order`` in a new project, then ask and answer ``--questions`` questions."""
    progress = not args.no_progress
    names, pool, features = order.names, order.pool, order.features.tolist()

    def pairs(start: int, stop: int) -> list[dict[str, Any]]:
        return [{"a": names[a], "b": names[b], "features": features[i]}
                for i, (a, b) in enumerate(pool[start:stop].tolist(), start)]

    start = time.perf_counter()
    pid = create_project(client, f"{phase}-{len(names)}")
    base = f"/projects/{pid}"
    done = post_chunks(client, monitor, f"{base}/concepts", "concepts", len(names),
                       concept_items(names), args.chunk, f"{phase} concepts", progress)
    if not done.error:
        done = post_chunks(client, monitor, f"{base}/pairs", "pairs", len(pool), pairs,
                           args.chunk, f"{phase} pool", progress)
    setup = time.perf_counter() - start
    add(Figure(phase, "setup_s", None if done.error else setup, "s",
               done.error or f"{len(names):,} concepts, {len(pool):,} pool pairs"))
    if done.error:
        return {}

    label_ms: list[float] = []
    next_ms: list[float] = []
    error, undecided = None, None
    loop_start = time.perf_counter()
    with tqdm(total=args.questions, desc=f"{phase} questions", unit="q",
              disable=not progress, file=sys.stderr) as bar:
        while len(label_ms) < args.questions:
            if time.perf_counter() - loop_start > args.loop_seconds:
                error = f"stopped at the --loop-seconds cap ({args.loop_seconds:g} s)"
                break
            asked = call(client, monitor, "GET", f"{base}/next")
            if asked.error:
                error = f"next: {asked.error}"
                break
            next_ms.append(asked.seconds * 1000)
            body = asked.json()
            undecided = body["undecided"]
            if not body["queries"]:
                error = "every pool pair is decided"
                break
            a, b = body["queries"][0]["a"], body["queries"][0]["b"]
            answer = "positive" if order.truth(a, b) else "negative"
            posted = call(client, monitor, "POST", f"{base}/labels",
                          json={"a": a, "b": b, "label": answer, "annotator": ANNOTATOR})
            if posted.error:
                error = f"label ({a}, {b}, {answer}): {posted.error}"
                break
            label_ms.append(posted.seconds * 1000)
            bar.update(1)
            bar.set_postfix(undecided=undecided, refresh=False)
    figures = {
        "label_p50_ms": _percentile(label_ms, 50), "label_p99_ms": _percentile(label_ms, 99),
        "next_p50_ms": _percentile(next_ms, 50), "next_p99_ms": _percentile(next_ms, 99),
        "next_first_ms": next_ms[0] if next_ms else None,
    }
    note = f"over {len(label_ms)} questions" + (f"; {error}" if error else "")
    for metric, value in figures.items():
        add(Figure(phase, metric, value, "ms", note if metric != "next_first_ms" else
                   "the project's first next (its state is built)"))
    add(Figure(phase, "questions", float(len(label_ms)), "q",
               f"undecided pool pairs after: {undecided:,}" if undecided is not None else ""))
    return figures


def run_large(args: argparse.Namespace, add: Callable[[Figure], None]) -> None:
    """The small baseline, then the large order, on one server."""
    env = {"SPORAL_MAX_CONCEPTS": str(max(DEFAULT_MAX_CONCEPTS, args.concepts,
                                          args.small_concepts))}
    with serving(args.out, args.work, "large", env, args.max_rss, args.timeout) as (
            server, monitor, client, database):
        results = {}
        for phase, n, pool_size, seed in (("small", args.small_concepts, args.small_pool, 1),
                                          ("large", args.concepts, args.pool, 2)):
            start = time.perf_counter()
            order = generate_order(n, pool_size, args.seed * 100 + seed)
            add(Figure(phase, "generate_s", time.perf_counter() - start, "s",
                       "client side: the order and its pool"))
            results[phase] = run_loop(args, client, monitor, phase, order, add)
            process = server.process
            rss = group_rss(process.pid) if process is not None else 0
            add(Figure(phase, "rss_end_mib", rss / MIB if rss else None, "MiB",
                       "server process group VmRSS after the loop"
                       + ("; " + monitor.killed if monitor.killed else "")))
            hwm = main_hwm(server)
            add(Figure(phase, "hwm_mib", None if hwm is None else hwm / MIB, "MiB",
                       "server process VmHWM since start"))
            add(Figure(phase, "db_mib", sqlite_bytes(database) / MIB, "MiB",
                       "SQLite file + -wal" + (" (both projects)" if phase == "large" else "")))
            if monitor.killed:
                break
        small, large = results.get("small", {}), results.get("large", {})
        for metric in ("label_p50_ms", "label_p99_ms", "next_p50_ms", "next_p99_ms"):
            s, x = small.get(metric), large.get(metric)
            add(Figure("large/small", metric.replace("_ms", ""),
                       x / s if x is not None and s else None, "×",
                       f"{args.concepts:,}/{args.small_concepts:,} concepts"))


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for scale.csv, summary.md and the logs (default: a new "
                             "temporary folder)")
    parser.add_argument("--only", choices=["chain", "large"], default=None)
    parser.add_argument("--chain", type=int, default=20_000, help="concepts of the chain")
    parser.add_argument("--concepts", type=int, default=100_000, help="of the large order")
    parser.add_argument("--pool", type=int, default=1_000_000, help="of the large order")
    parser.add_argument("--questions", type=int, default=500, help="per labeling loop")
    parser.add_argument("--small-concepts", type=int, default=1_000, help="of the baseline")
    parser.add_argument("--small-pool", type=int, default=10_000, help="of the baseline")
    parser.add_argument("--chunk", type=int, default=50_000,
                        help=f"items per request when registering (at most {MAX_ITEMS:,})")
    parser.add_argument("--refusal-budget", type=int, default=None,
                        help="SPORAL_MAX_DECIDED_PAIRS of the refusal server (default: the "
                             f"server's own, {DEFAULT_DECIDED_PAIRS:,})")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one request may take before it counts as failed")
    parser.add_argument("--loop-seconds", type=float, default=1800.0,
                        help="a labeling loop stops after this many seconds")
    parser.add_argument("--max-rss-gb", type=float, default=8.0,
                        help="kill a server whose RSS passes this (GiB), to spare the machine")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the databases (default: the system's temp folder)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.chain < 2 or args.concepts < 2 or args.small_concepts < 2:
        parser.error("--chain, --concepts and --small-concepts need at least 2")
    if args.questions < 1 or args.pool < 1 or args.small_pool < 1:
        parser.error("--questions, --pool and --small-pool need at least 1")
    if not 1 <= args.chunk <= MAX_ITEMS:
        parser.error(f"--chunk must be within 1 .. {MAX_ITEMS:,}")
    args.max_rss = int(args.max_rss_gb * 1024**3)
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when it ran (targets may be missed: see summary.md)."""
    args = parse_args(argv)
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="bench_scale-"))
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.scale " + " ".join(sys.argv[1:] if argv is None else argv)
    load = os.getloadavg()[0]
    figures: list[Figure] = []

    def header() -> list[str]:
        return ["# Scale of one project", "", f"`{command}`", "",
                f"Sizes: chain {args.chain:,}; large {args.concepts:,} concepts, pool "
                f"{args.pool:,}, {args.questions} questions; baseline {args.small_concepts:,} "
                f"concepts, pool {args.small_pool:,}. Request timeout {args.timeout:g} s.",
                f"Machine: {os.cpu_count()} cores, load average {load:.2f} at the start, "
                f"{os.getloadavg()[0]:.2f} now. Server logs: server-*.log here."]

    def add(figure: Figure) -> None:
        figures.append(figure)
        value = _fmt(figure.value)
        verdict = f" [{'met' if figure.met == 'yes' else 'MISSED'}]" if figure.met else ""
        print(f"{figure.phase:>11} {figure.metric:<20} {value:>10} {figure.unit:<5}{verdict}"
              f" {figure.note}", flush=True)
        write_outputs(args.out, figures, header())

    if args.only in (None, "chain"):
        run_chain(args, add)
        run_refusal(args, add)
    if args.only in (None, "large"):
        run_large(args, add)
    print()
    print(write_outputs(args.out, figures, header()))
    print(f"\nwrote {args.out / 'scale.csv'} and {args.out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
