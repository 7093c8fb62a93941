"""No process started by `sporal serve` outlives it, whichever way it ends; its training worker
starts with it.

The server runs in a session of its own (:class:`Server` starts it with ``start_new_session``),
so every process it starts, however deep (uvicorn's workers, the training worker, the
forkserver that forks it, multiprocessing's resource tracker), carries the server's pid as
its session id: after the server is gone, /proc must hold none of them. Only the server's own
process is signalled, as by an operator or the OOM killer; its children are left to notice.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.reliability.harness import Server, sqlite_url

GONE_WITHIN = 5.0  # seconds after the server's death by which every process it started is gone
# fresh=true waits for the worker's first model: a cold worker at nice 10 on a loaded machine
# took more than the default 10 s, so the wait is far above the work (the client's still more)
FRESH = {"SPORAL_FRESH_TIMEOUT": "120"}


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command's name (state, ppid, pgrp, session...)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2:].split()


def _session(sid: int) -> list[str]:
    """The live processes of session ``sid`` ("pid state command"; zombies are dead already)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            state, _ppid, _pgrp, session = _stat(int(entry))[:4]
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:  # ended meanwhile
            continue
        if int(session) == sid and state != "Z":
            found.append(f"{entry} {state} {command.decode()[:160]}")
    return found


def _train(server: Server) -> None:
    """A project with a pool and labels, and its prediction model trained (in the worker)."""
    with httpx.Client(base_url=server.base_url, timeout=180) as client:
        pid = client.post("/projects", json={"name": "orphans"}).json()["id"]
        concepts = [{"name": name} for name in "abcd"]
        assert client.post(f"/projects/{pid}/concepts", json={"concepts": concepts}).is_success
        pairs = [{"a": a, "b": b, "features": [float(i), 1.0 - i / 6]}
                 for i, (a, b) in enumerate(["ab", "bc", "ac", "ca", "da", "ad"])]
        assert client.post(f"/projects/{pid}/pairs", json={"pairs": pairs}).is_success
        for a, b in ["ab", "bc"]:
            response = client.post(f"/projects/{pid}/labels",
                                   json={"a": a, "b": b, "label": "positive"})
            assert response.status_code == 201, response.text
        response = client.get(f"/projects/{pid}/predictions", params={"fresh": "true"})
        assert response.status_code == 200, response.text
        assert response.json()["model"]["name"] == "random_forest"


def test_the_training_worker_starts_with_the_server(start_server: Callable[..., Server],
                                                   tmp_path: Path) -> None:
    """Warmed at start-up, not by the first request that needs a model (a cold worker missed
    ``fresh=true``'s timeout on a busy machine)."""
    server = start_server(sqlite_url(tmp_path / "sporal.db"))
    assert server.process is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        forkservers = [p for p in _session(server.process.pid) if "forkserver" in p]
        if len(forkservers) == 2:  # the forkserver and the worker it forked
            return
        time.sleep(0.2)
    raise AssertionError(f"no training worker: {_session(server.process.pid)}")


def test_the_worker_started_on_first_use_trains_at_nice_10(start_server: Callable[..., Server],
                                                           tmp_path: Path) -> None:
    """Started by the first training (no warm-up), from the trainer's thread at nice 10: the
    worker is at nice 10 too, not 10 more (19: a few percent of a busy core)."""
    server = start_server(sqlite_url(tmp_path / "sporal.db"),
                          env={"SPORAL_WARM_UP": "false", **FRESH})
    assert server.process is not None
    _train(server)
    forked = {int(p.split()[0]) for p in _session(server.process.pid) if "forkserver" in p}
    stats = {pid: _stat(pid) for pid in forked}
    [worker] = [pid for pid in forked if int(stats[pid][1]) in forked]  # the forkserver's child
    assert int(stats[worker][16]) == 10  # field 19 of /proc/PID/stat: the nice value


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
@pytest.mark.parametrize("workers", [1, 2])
def test_no_process_outlives_the_server(start_server: Callable[..., Server], tmp_path: Path,
                                        workers: int, signum: int) -> None:
    server = start_server(sqlite_url(tmp_path / "sporal.db"), workers=workers, env=FRESH)
    assert server.process is not None
    sid = server.process.pid
    _train(server)
    started = _session(sid)
    # the server, the resource tracker, a forkserver and a worker; with --workers, those
    assert len(started) >= 4 + workers * (workers > 1), started
    os.kill(sid, signum)
    server.process.wait(timeout=60)
    deadline = time.monotonic() + GONE_WITHIN
    while (left := _session(sid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], f"alive {GONE_WITHIN} s after the server died: {left}"
