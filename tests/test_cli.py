"""The ``sporal`` command: what it says before it serves anything."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def sporal(*args: str, env: dict[str, str] | None = None,
           timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_serve_on_a_busy_port_fails_at_once_before_migrating(tmp_path: Path) -> None:
    database = tmp_path / "never-created.sqlite"
    env = {**os.environ, "SPORAL_DATABASE_URL": f"sqlite:///{database}"}
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        try:
            done = sporal("serve", "--port", str(port), env=env, timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("sporal serve kept running on a busy port")
        elapsed = time.monotonic() - started
    assert done.returncode != 0
    assert (f"sporal: cannot listen on 127.0.0.1:{port}: address already in use"
            in done.stderr), done.stderr
    assert elapsed < 8
    assert not database.exists()  # refused before the migrations


def test_version_option_prints_the_package_version() -> None:
    from app import __version__

    done = sporal("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"sporal {__version__}"
    assert __version__ and __version__[0].isdigit()
