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
WAIT = 120  # seconds a command may take at most: far above its work, even on a busy machine
AT_ONCE = 3  # how many times the baseline's imports a refusal "at once" may take


def sporal(*args: str, env: dict[str, str] | None = None,
           timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _imports_of_serve() -> float:
    """Seconds a fresh interpreter takes to import what `sporal serve` imports before it binds:
    the baseline of the busy-port test, measured beside it so that a busy machine slows both."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import app.cli, app.server"], cwd=ROOT, check=True,
                   capture_output=True, timeout=WAIT)
    return time.monotonic() - started


def test_serve_on_a_busy_port_fails_at_once_before_migrating(tmp_path: Path) -> None:
    database = tmp_path / "never-created.sqlite"
    env = {**os.environ, "SPORAL_DATABASE_URL": f"sqlite:///{database}"}
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        before = _imports_of_serve()
        started = time.monotonic()
        try:
            done = sporal("serve", "--port", str(port), env=env, timeout=WAIT)
        except subprocess.TimeoutExpired:
            pytest.fail("sporal serve kept running on a busy port")
        elapsed = time.monotonic() - started
        baseline = max(before, _imports_of_serve())
    assert done.returncode != 0
    assert (f"sporal: cannot listen on 127.0.0.1:{port}: address already in use"
            in done.stderr), done.stderr
    # At once: about as long as its imports (measured: 1.0x at load 8), never a retry or a wait
    assert elapsed < AT_ONCE * baseline, (elapsed, baseline)
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
                          text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_labelstudio_command_is_there_when_asked_for() -> None:
    listed = sporal("--help")
    assert listed.returncode == 0, listed.stderr
    assert "labelstudio" in listed.stdout
    done = sporal("labelstudio", "--help")
    assert done.returncode == 0, done.stderr
    assert "setup" in done.stdout and "run" in done.stdout
