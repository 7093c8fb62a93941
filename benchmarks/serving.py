"""A real `sporal serve` process and a throw-away PostgreSQL database, for tests and benchmarks.

The end-to-end and reliability tests and the HTTP benchmarks all drive the service the way a
team does: a separate server process on a free loopback port. Starting, waiting for and
stopping that process, and making a fresh database for it, live here once so that a fix (a
leaked worker, a lost log) reaches every caller. Nothing here imports the service: callers see
only its command line and its REST contract.

Examples
--------
>>> with Server("sqlite:///tmp/sporal.db", Path("/tmp/logs")) as server:  # doctest: +SKIP
...     httpx.get(f"{server.base_url}/health")
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

__all__ = [
    "Server",
    "create_pool_project",
    "free_port",
    "postgres_admin_url",
    "postgres_database",
    "serve_command",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    Returns
    -------
    int
        The port the kernel chose for a socket bound to port 0.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_command() -> list[str]:
    """The command that runs the `sporal` CLI.

    Returns
    -------
    list of str
        The `sporal` console script next to this interpreter (the one of this environment,
        even when PATH points elsewhere), else the one on PATH, else the same CLI through this
        interpreter (``python -m app.cli``).
    """
    script = Path(sys.executable).with_name("sporal")
    if script.exists():
        return [str(script)]
    found = shutil.which("sporal")
    if found:
        return [found]
    return [sys.executable, "-m", "app.cli"]


@dataclass
class Server:
    """A `sporal serve` process on 127.0.0.1, in its own process group.

    The process group matters: with ``--workers`` uvicorn forks children, and a crash test
    must kill all of them at once, as a power cut or the OOM killer would. The server sees
    none of the caller's ``SPORAL_*`` variables, only ``database_url`` and ``env``, so that a
    setting left in a developer's shell cannot change what a test or a benchmark measures.

    Parameters
    ----------
    database_url : str
        The SQLAlchemy URL the server uses (``SPORAL_DATABASE_URL``).
    log_dir : Path
        Working directory of the process and folder of its log, ``server-PORT.log``.
    port : int, optional
        Default: a free port, kept across restarts.
    workers : int, default 1
        ``sporal serve --workers``.
    env : dict of str to str, optional
        More environment variables for the server, such as ``SPORAL_ADMIN_KEY``.
    startup_timeout : float, default 90.0
        Seconds to wait for ``GET /health`` to answer 200.
    stop_timeout : float, default 20.0
        Seconds a clean stop waits after SIGTERM before it kills the group.

    Examples
    --------
    >>> server = Server("sqlite:///db.sqlite", Path("logs")).start()  # doctest: +SKIP
    >>> server.kill(); server.start()  # same port, same database  # doctest: +SKIP
    >>> server.stop()  # doctest: +SKIP
    """

    database_url: str
    log_dir: Path
    port: int = field(default_factory=free_port)
    workers: int = 1
    env: dict[str, str] = field(default_factory=dict)
    startup_timeout: float = 90.0
    stop_timeout: float = 20.0
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The file that receives the server's stdout and stderr, across restarts."""
        return self.log_dir / f"server-{self.port}.log"

    def start(self, wait: bool = True) -> Server:
        """Start the process (on the same port and database as before, after a kill).

        Parameters
        ----------
        wait : bool, default True
            Return only once ``GET /health`` answers (see :meth:`wait_ready`).

        Returns
        -------
        Server
            ``self``, for chaining.

        Raises
        ------
        RuntimeError
            When the process is already running, or (with ``wait``) exits or stays silent
            during start-up; the message holds the end of its log.
        """
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("the server is already running")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPORAL_")}
        env.update({"SPORAL_DATABASE_URL": self.database_url, "PYTHONUNBUFFERED": "1"})
        env.update(self.env)
        command = [*serve_command(), "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        if self.workers != 1:
            command += ["--workers", str(self.workers)]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== start {self.starts}: {' '.join(command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(command, cwd=self.log_dir, env=env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Block until GET /health answers 200; fail with the server's log if it dies.

        Raises
        ------
        RuntimeError
            When the process exits, or does not answer within ``startup_timeout``.
        """
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"the server exited during start-up:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/health", timeout=2.0).status_code == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"the server did not answer /health in time:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown handler runs, as in a crash."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """A clean stop (SIGTERM, then SIGKILL after ``stop_timeout`` seconds)."""
        if self.process is None or self.process.poll() is not None:
            self._reap_group()
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reap_group()

    def _reap_group(self) -> None:
        # Forked workers may outlive their parent; never leave them holding the port or the DB.
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def log_tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the server's log, for error messages."""
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def create_pool_project(client: httpx.Client, name: str, concepts: Sequence[str],
                        pairs: Sequence[tuple[str, str]], features: np.ndarray) -> int:
    """A new project holding ``concepts`` and the pool ``pairs`` with their feature rows.

    Parameters
    ----------
    client : httpx.Client
        A client whose ``base_url`` is the server.
    name : str
        The project's name.
    concepts : sequence of str
        Every concept a pair names.
    pairs : sequence of (str, str)
        The pool, in the project's direction (``(a, b)``: a would precede b).
    features : array of shape (len(pairs), f)
        Row ``i`` is the feature vector of ``pairs[i]``.

    Returns
    -------
    int
        The project's id.
    """
    response = client.post("/projects", json={"name": name})
    response.raise_for_status()
    pid = int(response.json()["id"])
    client.post(f"/projects/{pid}/concepts",
                json={"concepts": [{"name": c} for c in concepts]}).raise_for_status()
    body = [{"a": a, "b": b, "features": row}
            for (a, b), row in zip(pairs, np.asarray(features, float).tolist(), strict=True)]
    client.post(f"/projects/{pid}/pairs", json={"pairs": body}, timeout=600).raise_for_status()
    return pid


def postgres_admin_url(base_url: str) -> str:
    """A plain libpq URL of the server of ``base_url`` (for psycopg: no SQLAlchemy driver)."""
    from sqlalchemy.engine import make_url

    return make_url(base_url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextlib.contextmanager
def postgres_database(
    base_url: str, prefix: str = "sporal_", *, template: str | None = None
) -> Iterator[str]:
    """A fresh database on the PostgreSQL server of ``base_url``; dropped afterwards.

    Each test or benchmark run gets its own database, so that runs never see each other's
    projects and a half-migrated schema of a failed run cannot leak into the next one.

    Parameters
    ----------
    base_url : str
        Any database URL of the server, such as ``postgresql+psycopg://user@host:5432/postgres``.
    prefix : str, default "sporal_"
        Start of the new database's name (a random suffix follows), saying who made it.
    template : str, optional
        The database to copy (``CREATE DATABASE ... TEMPLATE``); default: an empty one.

    Yields
    ------
    str
        The SQLAlchemy URL of the new database, with the psycopg driver the project ships.
    """
    import psycopg
    from sqlalchemy.engine import make_url

    admin = postgres_admin_url(base_url)
    name = f"{prefix}{uuid.uuid4().hex[:12]}"
    clause = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{clause}')
    try:
        yield make_url(base_url).set(drivername="postgresql+psycopg",
                                     database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
