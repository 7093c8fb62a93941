"""The lead's actions on the agreement table of Progress in a real headless Chromium (marker
``browser``), keys on: a team where one annotator says "no" to everything; the lead (project
key) excludes them from the page and sees what changed, includes them again and re-asks what
only they answered; an annotator key sees no buttons. The screenshot
``agreement-actions.png`` (docs/img) goes to ``$SPORAL_SCREENSHOTS``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.serving import Server
from tests.browser.conftest import ADMIN_KEY, _expect, annotator_key

pytestmark = pytest.mark.browser

CHAIN = ["sets", "functions", "limits", "derivatives", "integrals", "series", "vectors"]


def _team(api: httpx.Client) -> tuple[int, str]:
    """A consensus project answered by ann and bo (truthful) and bad ("no" everywhere, and
    alone on two pairs); its id and project key."""
    made = api.post("/projects", json={"name": "team", "policy": "consensus"})
    pid, key = made.json()["id"], made.json()["api_key"]
    own = {"X-API-Key": key}
    api.post(f"/projects/{pid}/concepts", json={"concepts": [{"name": c} for c in CHAIN]},
             headers=own).raise_for_status()
    pairs = [{"a": a, "b": b, "features": [float(i), float(j)]}
             for i, a in enumerate(CHAIN) for j, b in enumerate(CHAIN) if i != j]
    api.post(f"/projects/{pid}/pairs", json={"pairs": pairs}, headers=own).raise_for_status()
    answers = [(a, b, who, "negative" if who == "bad" else "positive")
               for a, b in zip(CHAIN[:4], CHAIN[1:5], strict=True) for who in ("ann", "bad")]
    answers += [("sets", "limits", "bo", "positive"), ("sets", "limits", "bad", "negative"),
                ("integrals", "series", "bad", "negative"),
                ("series", "vectors", "bad", "negative")]
    for a, b, who, value in answers:
        api.post(f"/projects/{pid}/labels", json={"a": a, "b": b, "label": value,
                                                  "annotator": who},
                 headers=own).raise_for_status()
    return pid, key


def _progress(page: Any, base_url: str, pid: int, field: str, key: str) -> None:
    page.goto(f"{base_url}/ui/")
    page.fill("#pid", str(pid))
    page.fill(field, key)
    if field == "#key":
        page.fill("#annotator", "lead")
    page.press(field, "Enter")
    _expect(page.locator("#connect-status")).to_contain_text("labeling as")
    page.click(".tab[data-view=progress]")
    _expect(page.locator("#view-progress")).to_be_visible()


def test_the_lead_excludes_includes_and_reasks_from_progress(
        browser: Any, keyed_server: Server, screenshots: Path) -> None:
    with httpx.Client(base_url=keyed_server.base_url, timeout=60,
                      headers={"X-API-Key": ADMIN_KEY}) as api:
        pid, key = _team(api)
        ana = annotator_key(api, pid, key, "ann")
        own = {"X-API-Key": key}

        page = browser.new_page(viewport={"width": 1200, "height": 900})
        _progress(page, keyed_server.base_url, pid, "#key", key)
        bad = page.locator("#agreement-rows tr[data-annotator='bad']")
        _expect(bad.locator("button.exclude")).to_have_count(1)
        _expect(page.locator("#agreement-rows button.reask")).to_have_count(3)
        labels_before = api.get(f"/projects/{pid}/labels?source=asserted", headers=own).json()

        bad.locator("button.exclude").click()
        status = page.locator("#agreement-status")
        _expect(status).to_contain_text("Excluded bad: 7 answers no longer count; ")
        people = page.locator("#annotators tr", has_text="bad").locator("td")
        _expect(people.last).to_have_text("7")  # the counts follow: 7 excluded
        _expect(bad).to_contain_text("bad (excluded)")
        _expect(bad.locator("button.include")).to_have_count(1)
        view = api.get(f"/projects/{pid}/agreement", headers=own).json()
        assert {r["annotator"]: r["excluded"] for r in view["annotators"]} == {
            "ann": False, "bad": True, "bo": False}
        labels_after = api.get(f"/projects/{pid}/labels?source=asserted", headers=own).json()
        assert labels_after != labels_before
        page.screenshot(path=screenshots / "agreement-actions.png", full_page=True)

        bad.locator("button.reask").click()
        _expect(status).to_have_text("Re-asked 2 pairs only bad answered: the others get "
                                     "them as second opinions; 2 waiting for one.")
        bad.locator("button.include").click()
        _expect(status).to_contain_text("Included bad again: 7 answers count again; ")
        _expect(bad.locator("button.exclude")).to_have_count(1)

        # an annotator key reads no agreement: no buttons
        other = browser.new_page()
        _progress(other, keyed_server.base_url, pid, "#annotator-key", ana)
        _expect(other.locator("#agreement-summary")).to_contain_text("the lead's view")
        _expect(other.locator("#agreement-rows button")).to_have_count(0)
