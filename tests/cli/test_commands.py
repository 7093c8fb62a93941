"""The ``sporal`` command: what it says before it serves anything."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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


def test_the_service_does_not_import_the_label_studio_adapter() -> None:
    """The adapter is an HTTP client of sporal: importing the app or the command leaves it out.

    In a fresh interpreter, so that no other test's imports count.
    """
    code = ("import sys, app.main, app.cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sporal_labelstudio'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_labelstudio_command_is_there_when_asked_for() -> None:
    listed = sporal("--help")
    assert listed.returncode == 0, listed.stderr
    assert "labelstudio" in listed.stdout
    done = sporal("labelstudio", "--help")
    assert done.returncode == 0, done.stderr
    assert "setup" in done.stdout and "run" in done.stdout
