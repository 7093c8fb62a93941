"""Label Studio as each of two people, in a real browser: their own project's labeling page.

Needs a running Label Studio (``SPORAL_TEST_LABEL_STUDIO_URL`` and ``_TOKEN``), Debian's
chromium and Playwright. Ann and Bo each get a project of their own; Bo's answer on a pair Ann
answered the other way is refused, and the refusal with its proof is on Bo's labeling page only.
The screenshots are saved in ``SPORAL_SCREENSHOTS`` (a temporary folder otherwise) as
``labelstudio-user-1.png`` and ``labelstudio-user-2.png`` (docs/img has them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.labelstudio_team import signup
from benchmarks.serving import Server, free_port
from sporal_labelstudio.adapter import Adapter
from sporal_labelstudio.ls_client import LabelStudioClient
from sporal_labelstudio.sporal_client import SporalClient
from sporal_labelstudio.state import State
from tests.labelstudio.harness import choice, order_project

pytestmark = pytest.mark.labelstudio

LS_URL = os.environ.get("SPORAL_TEST_LABEL_STUDIO_URL")
LS_TOKEN = os.environ.get("SPORAL_TEST_LABEL_STUDIO_TOKEN", "")


def _labeling_page(browser: Any, email: str, password: str, ls_project: int,
                   shot: Path) -> str:
    """Log in as ``email``, open their project's labeling stream, screenshot; the page's text."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{LS_URL}/user/login/")
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state("networkidle")
    page.goto(f"{LS_URL}/projects/{ls_project}/data?labeling=1")
    page.get_by_text("needed before").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1000)  # the editor's last paint
    page.screenshot(path=str(shot))
    text = str(page.inner_text("body"))
    page.close()
    return text


def test_each_person_sees_their_own_project_and_only_their_own_notes(tmp_path: Path) -> None:
    if not LS_URL:
        pytest.skip("set SPORAL_TEST_LABEL_STUDIO_URL and _TOKEN (a running Label Studio)")
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("Debian's chromium is not on PATH (apt-get install chromium)")
    run = uuid.uuid4().hex[:6]
    people = [(f"ann-{run}@example.com", f"pw-{run}-ann-long"),
              (f"bo-{run}@example.com", f"pw-{run}-bo-long")]
    tokens = [signup(str(LS_URL), email, password) for email, password in people]
    folder = Path(os.environ.get("SPORAL_SCREENSHOTS") or tempfile.mkdtemp(prefix="sporal-ls-"))
    folder.mkdir(parents=True, exist_ok=True)
    with Server(f"sqlite:///{tmp_path}/sporal.db", tmp_path) as server, \
            SporalClient(server.base_url) as sporal:
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            pid, _ = order_project(client, n=12, pool=30, seed=5)
        adapter = Adapter(sporal, LabelStudioClient(str(LS_URL), LS_TOKEN),
                          State(tmp_path / "adapter.db"), project=pid, window=3)
        adapter.setup(f"http://127.0.0.1:{free_port()}/webhook")  # (nobody listens: called)
        ann, bo = (adapter.add_person(email) for email, _ in people)
        adapter.refresh()
        # Ann answers her first task; Bo answers the same pair the other way: refused
        task = adapter.state.tasks("open", ann.ls_project)[0]
        by = [httpx.Client(base_url=str(LS_URL), headers={"Authorization": f"Token {t}"})
              for t in tokens]
        for who, label in ((by[0], "positive"), (by[1], "negative")):
            posted = who.post(f"/api/tasks/{task.task_id}/annotations",
                              json={"result": choice(label)})
            posted.raise_for_status()
            adapter.forward(posted.json(), task.task_id)
        adapter.serve_next({ann.user_id, bo.user_id})
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable)
            texts = [_labeling_page(browser, email, password, person.ls_project,
                                    folder / f"labelstudio-user-{i}.png")
                     for i, ((email, password), person) in enumerate(
                         zip(people, (ann, bo), strict=True), start=1)]
            browser.close()
    assert "sporal refused annotation" not in texts[0]  # Ann's page: no note of Bo's
    assert "sporal refused annotation" in texts[1] and people[0][0] in texts[1]  # Bo's: his
    assert all("disagree" not in text for text in texts)  # nothing says why a pair is asked
