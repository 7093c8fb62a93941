"""Fixtures of the browser tests: one `sporal serve`, Debian's headless Chromium, screenshots.

Playwright for Python drives the system's Chromium (``apt-get install chromium``); it never
downloads a browser. The screenshots of each view go to ``$SPORAL_SCREENSHOTS`` (default: a
temporary folder), whose path the end of the pytest run prints.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.serving import Server, free_port

CALCULUS = ["limit", "derivative", "integral", "series"]
CALCULUS_POOL = [("limit", "derivative", [0.9, 0.2]), ("derivative", "integral", [0.8, 0.3]),
                 ("limit", "integral", [0.7, 0.5]), ("integral", "limit", [0.1, 0.5]),
                 ("series", "limit", [0.2, 0.9]), ("limit", "series", [0.6, 0.4])]
# The README's example order: limit before derivative before integral, and before series.
CALCULUS_TRUTH = {("limit", "derivative"), ("derivative", "integral"), ("limit", "integral"),
                  ("limit", "series")}

# The admin key of the keyed server (keys on).
ADMIN_KEY = "admin-key-of-the-browser-tests"

_shots: list[Path] = []


def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's chromium is not on PATH (apt-get install chromium)")
    return path


@pytest.fixture(scope="session")
def screenshots() -> Path:
    folder = Path(os.environ.get("SPORAL_SCREENSHOTS") or tempfile.mkdtemp(prefix="sporal-ui-"))
    folder.mkdir(parents=True, exist_ok=True)
    _shots.append(folder)
    return folder


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for folder in _shots:
        terminalreporter.write_line(f"browser screenshots: {folder}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("ui-server")
    with Server(f"sqlite:///{folder / 'sporal.db'}", folder) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = chromium_path()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A `sporal serve` with keys on (the admin key: ADMIN_KEY)."""
    folder = tmp_path_factory.mktemp("ui-keyed-server")
    with Server(f"sqlite:///{folder / 'sporal.db'}", folder,
                env={"SPORAL_ADMIN_KEY": ADMIN_KEY}) as running:
        yield running


def annotator_key(api: httpx.Client, pid: int, project_key: str, name: str) -> str:
    """A new annotator key for ``name``, made with the project key."""
    response = api.post(f"/projects/{pid}/annotator-keys", json={"annotator": name},
                        headers={"X-API-Key": project_key})
    assert response.status_code == 201, response.text
    return str(response.json()["api_key"])


@pytest.fixture
def api(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        yield client


def calculus_project(api: httpx.Client) -> int:
    """The README's calculus project: four concepts (with descriptions), six pool pairs."""
    pid = int(api.post("/projects", json={"name": "calculus"}).json()["id"])
    concepts = [{"name": c, "description": f"the {c} of a function"} for c in CALCULUS]
    api.post(f"/projects/{pid}/concepts", json={"concepts": concepts}).raise_for_status()
    pairs = [{"a": a, "b": b, "features": f} for a, b, f in CALCULUS_POOL]
    api.post(f"/projects/{pid}/pairs", json={"pairs": pairs}).raise_for_status()
    return pid


@contextmanager
def inprocess_server(folder: Path) -> Iterator[str]:
    """The service in this process (uvicorn in a thread), for a test that patches it.

    A `sporal serve` process cannot be monkeypatched; this one can (the question policy, say).
    Yields its base URL; open mode, a fresh SQLite database in ``folder``.
    """
    import uvicorn

    from app.db import migrate
    from app.main import create_app
    from app.settings import Settings

    url = f"sqlite:///{folder / 'sporal.db'}"
    migrate(url)
    port = free_port()
    config = uvicorn.Config(create_app(Settings(database_url=url)), host="127.0.0.1", port=port,
                            log_level="warning", lifespan="on")
    served = uvicorn.Server(config)
    thread = threading.Thread(target=served.run, daemon=True)
    thread.start()
    try:
        while not served.started:  # a start that fails ends the thread
            if not thread.is_alive():
                raise RuntimeError("the in-process server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        served.should_exit = True
        thread.join()


def _expect(locator: Any) -> Any:
    from playwright.sync_api import expect  # here: the default suite runs without playwright

    return expect(locator)


def open_ui(page: Any, base_url: str, pid: int, annotator: str, *, question: bool = True) -> None:
    """Open /ui/ and the project by keyboard alone (type, Tab, type, Enter); wait for a question."""
    page.goto(f"{base_url}/ui/")
    page.keyboard.type(str(pid))  # the project id field has the focus
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.type(annotator)
    page.keyboard.press("Enter")
    page.wait_for_selector("#connect-status >> text=labeling as")
    if question:
        _expect(page.locator("#question")).not_to_have_attribute("data-pair", "")


def shown_pair(page: Any) -> tuple[str, str]:
    return page.inner_text("#qa"), page.inner_text("#qb")


def wait_for_other_question(page: Any, before: str) -> None:
    # Playwright's locator assertions, not wait_for_function: the page's CSP forbids eval.
    _expect(page.locator("#question")).not_to_have_attribute("data-pair", before)
