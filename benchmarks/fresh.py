"""Does the README's step 8, ``predictions?fresh=true``, answer in time on a fresh server?

Each run starts a new `sporal serve` on a new SQLite file (a cold server: nothing trained, the
training worker just started) and, as soon as ``/health`` answers, runs the README's
walk-through ("Five minutes with curl") over HTTP up to its step 8, the concept map with
``fresh=true``, which waits for the prediction model trained on every label so far (at most
``SPORAL_FRESH_TIMEOUT``, 10 s by default, then 503 ``model-not-ready``). Prints how many runs
answered 200 and the p50/p99 seconds of step 8.

The figure that matters is on a busy machine: ``--load`` runs a named command beside the runs
(started before them, in a session of its own, stopped after them), and the benchmark prints
the load average while it measures::

    python -m benchmarks.fresh                                  # 20 runs, whatever else runs
    python -m benchmarks.fresh --load "stress-ng --cpu 4"       # at load >= 4 on 2 cores
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from benchmarks.serving import Server

__all__ = ["Run", "main", "walk_through"]

JSON_PAIRS = [("limit", "derivative", [0.9, 0.2]), ("derivative", "integral", [0.8, 0.3]),
              ("limit", "integral", [0.7, 0.5]), ("integral", "limit", [0.1, 0.5]),
              ("series", "limit", [0.2, 0.9]), ("limit", "series", [0.6, 0.4])]


@dataclass(frozen=True)
class Run:
    """One walk-through: step 8's status and seconds, the whole walk's seconds, the load."""

    status: int
    seconds: float
    walk_seconds: float
    load: float


def _expect(response: httpx.Response, *status: int) -> httpx.Response:
    if response.status_code not in status:
        raise RuntimeError(f"{response.request.method} {response.request.url}: "
                           f"{response.status_code} {response.text[:300]}")
    return response


def walk_through(client: httpx.Client) -> tuple[int, float]:
    """The README's steps 1 to 8 (as its curl lines send them); step 8's status and seconds."""
    pid = _expect(client.post("/projects", json={"name": "calculus"}), 201).json()["id"]
    api = f"/projects/{pid}"
    concepts = [{"name": n} for n in ("limit", "derivative", "integral", "series")]
    _expect(client.post(f"{api}/concepts", json={"concepts": concepts}), 201)
    pairs = [{"a": a, "b": b, "features": f} for a, b, f in JSON_PAIRS]
    _expect(client.post(f"{api}/pairs", json={"pairs": pairs}), 201)
    _expect(client.get(f"{api}/next", params={"strategy": "LC-R+"}), 200)
    for a, b in [("limit", "derivative"), ("derivative", "integral")]:
        body = {"a": a, "b": b, "label": "positive", "annotator": "ana"}
        _expect(client.post(f"{api}/labels", json=body), 201)
    body = {"a": "integral", "b": "limit", "label": "positive"}
    _expect(client.post(f"{api}/labels", json=body), 409)
    _expect(client.get(f"{api}/pairs/status", params={"a": "limit", "b": "integral"}), 200)
    _expect(client.get(f"{api}/labels", params={"source": "inferred"}), 200)
    _expect(client.get(api), 200)
    _expect(client.get(f"{api}/next", params={"annotator": "bo", "k": 2}), 200)
    started = time.perf_counter()
    response = _expect(client.get(f"{api}/predictions", params={"fresh": "true"}), 200, 503)
    return response.status_code, time.perf_counter() - started


def _one_run(folder: Path, env: dict[str, str]) -> Run:
    with Server(f"sqlite:///{folder / 'sporal.db'}", folder / "logs", env=env) as server, \
            httpx.Client(base_url=server.base_url, timeout=120) as client:
        started = time.perf_counter()
        status, seconds = walk_through(client)
        return Run(status, seconds, time.perf_counter() - started, os.getloadavg()[0])


@contextlib.contextmanager
def _load(command: str | None, settle: float) -> Iterator[None]:
    """``command`` running (in a session of its own) for the duration; nothing when None."""
    if not command:
        yield
        return
    process = subprocess.Popen(shlex.split(command), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        print(f"load: {command!r} (pid {process.pid}); {settle:.0f} s to settle", flush=True)
        time.sleep(settle)
        if process.poll() is not None:
            raise RuntimeError(f"the load command exited at once ({process.returncode})")
        yield
    finally:
        for signum in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signum)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
                break


def _autogroup() -> str:
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip()
    except OSError:
        return "unknown"


def _report(runs: list[Run], timeout: float) -> None:
    seconds = np.array([run.seconds for run in runs])
    ok = sum(run.status == 200 and run.seconds <= timeout for run in runs)
    loads = [run.load for run in runs]
    print(f"step 8 (predictions?fresh=true): {ok}/{len(runs)} answered 200 within "
          f"{timeout:g} s; p50 {np.percentile(seconds, 50):.2f} s, "
          f"p99 {np.percentile(seconds, 99):.2f} s, max {seconds.max():.2f} s")
    print(f"whole walk-through (steps 1-8): p50 "
          f"{np.percentile([run.walk_seconds for run in runs], 50):.2f} s")
    print(f"load average (1 min) while measuring: min {min(loads):.2f}, "
          f"max {max(loads):.2f} on {os.cpu_count()} cores "
          f"(sched_autogroup_enabled {_autogroup()})")


def main(argv: list[str] | None = None) -> list[Run]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="walk-throughs, each on a new server")
    parser.add_argument("--load", default=None,
                        help='a command run beside the runs, e.g. "stress-ng --cpu 4"')
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds between starting --load and the first run")
    parser.add_argument("--fresh-timeout", type=float, default=None,
                        help="SPORAL_FRESH_TIMEOUT of the servers (default: the service's, 10)")
    args = parser.parse_args(argv)
    env = {} if args.fresh_timeout is None else {"SPORAL_FRESH_TIMEOUT": str(args.fresh_timeout)}
    timeout = 10.0 if args.fresh_timeout is None else args.fresh_timeout
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="sporal-fresh-") as temp, \
            _load(args.load, args.settle):
        for number in range(args.runs):
            folder = Path(temp) / f"run-{number:02d}"
            run = _one_run(folder, env)
            runs.append(run)
            print(f"run {number + 1}/{args.runs}: {run.status} in {run.seconds:.2f} s "
                  f"(walk {run.walk_seconds:.2f} s, load {run.load:.2f})", flush=True)
    _report(runs, timeout)
    return runs


if __name__ == "__main__":
    main()
