"""A scripted team in `consensus`, keys on, and the lead's Review and Progress in a real headless
Chromium (marker ``browser``): three annotators with their own keys (one truthful, one careless,
one answering the direct relation only) answer through the API until disagreements open and
close; a reviewer resolves one and resolves another; the lead then undoes that resolution and
reopens a closed disagreement on the page. The screenshots ``review-team.png`` and
``progress-team.png`` go to ``$SPORAL_SCREENSHOTS``."""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import networkx as nx
import pytest

from benchmarks.serving import Server
from tests.browser.conftest import ADMIN_KEY, _expect, annotator_key

pytestmark = pytest.mark.browser

# A small order: its direct links (the reduction); the truth is their transitive closure.
DIRECT = [("sets", "functions"), ("functions", "limits"), ("limits", "derivatives"),
          ("derivatives", "integrals"), ("functions", "sequences"), ("sequences", "series"),
          ("limits", "series")]
REASONS = {"answers": "settled by later answers", "reviewer": "resolved by the reviewer",
           "retraction": "an answer was retracted", "policy": "the project switched to strict",
           "merge": "concepts merged"}
CARELESS = 0.3  # how often the careless annotator answers wrong


@dataclass
class Team:
    pid: int
    project_key: str
    reviewer_key: str
    api: httpx.Client

    def get(self, path: str) -> Any:
        response = self.api.get(f"/projects/{self.pid}{path}",
                                headers={"X-API-Key": self.project_key})
        response.raise_for_status()
        return response.json()

    def review(self, did: int, action: str, **body: Any) -> dict[str, Any]:
        response = self.api.post(f"/projects/{self.pid}/disagreements/{did}/{action}",
                                 json=body or None, headers={"X-API-Key": self.reviewer_key})
        assert response.status_code == 200, response.text
        return dict(response.json())

    def disagreements(self) -> list[dict[str, Any]]:
        return list(self.get("/disagreements?state=all")["items"])


def _order() -> tuple[list[str], set[tuple[str, str]], list[tuple[str, str]]]:
    graph = nx.DiGraph(DIRECT)
    names = sorted(graph.nodes)
    truth = {(a, b) for a in names for b in nx.descendants(graph, a)}
    pool = [(a, b) for a, b in itertools.permutations(names, 2) if a < b or (a, b) in truth]
    return names, truth, pool


Answer = tuple[str, str, str, str]  # (annotator, a, b, value)


def _answers(truth: set[tuple[str, str]], pool: list[tuple[str, str]]) -> list[Answer]:
    """(annotator, a, b, value) for every pool pair by each of the three, in a fixed order."""
    rng = random.Random(29)
    said = {"ana": lambda pair: pair in truth,  # truthful
            "bo": lambda pair: (pair in truth) != (rng.random() < CARELESS),  # careless
            "cy": lambda pair: pair in DIRECT}  # the direct relation only
    return [(who, a, b, "positive" if said[who]((a, b)) else "negative")
            for a, b in pool for who in ("ana", "bo", "cy")]


def _script_team(api: httpx.Client) -> Team:
    names, truth, pool = _order()
    pid = int(api.post("/projects", json={"name": "team", "policy": "consensus"}).json()["id"])
    project_key = api.post(f"/projects/{pid}/api-key").json()["api_key"]
    reviewer_key = api.post(f"/projects/{pid}/reviewer-key").json()["reviewer_key"]
    api.post(f"/projects/{pid}/concepts",
             json={"concepts": [{"name": n} for n in names]}).raise_for_status()
    api.post(f"/projects/{pid}/pairs", json={"pairs": [
        {"a": a, "b": b, "features": [float(i)]} for i, (a, b) in enumerate(pool)]}
             ).raise_for_status()
    keys = {n: annotator_key(api, pid, project_key, n) for n in ("ana", "bo", "cy")}
    for who, a, b, value in _answers(truth, pool):
        response = api.post(f"/projects/{pid}/labels", json={"a": a, "b": b, "label": value},
                            headers={"X-API-Key": keys[who]})
        assert response.status_code in (200, 201), response.text
    return Team(pid, project_key, reviewer_key, api)


def _reviewer(team: Team) -> tuple[dict[str, Any], dict[str, Any]]:
    """The reviewer resolves two open disagreements by the truth; returns both."""
    _, truth, _ = _order()
    opened = [d for d in team.disagreements() if d["state"] == "open"]
    assert len(opened) >= 2, "the scripted team leaves disagreements open"
    kept, undone = opened[:2]
    for d in (kept, undone):
        value = "positive" if (d["a"], d["b"]) in truth else "negative"
        team.review(d["id"], "resolve", label=value, annotator="rita")
    return kept, undone


def _open_as_lead(page: Any, base_url: str, team: Team) -> None:
    page.goto(f"{base_url}/ui/")
    page.fill("#pid", str(team.pid))
    page.fill("#key", team.project_key)
    page.fill("#annotator", "lead")
    page.press("#annotator", "Enter")
    _expect(page.locator("#connect-status")).to_contain_text("labeling as lead (lead, project key)")
    page.click(".tab[data-view=review]")
    _expect(page.locator("#view-review")).to_be_visible()


def _card(page: Any, did: int) -> Any:
    return page.locator(f"article.disagreement[data-id='{did}']")


def _shows_every_closed_reason(page: Any, team: Team) -> None:
    items = team.disagreements()
    opened = [d for d in items if d["state"] == "open"]
    closed = [d for d in items if d["state"] == "closed"]
    _expect(page.locator("#review-count")).to_have_text(f"— {len(opened)} open" if opened else "")
    _expect(page.locator("#disagreements article")).to_have_count(len(opened))
    _expect(page.locator("#closed-disagreements article")).to_have_count(len(closed))
    _expect(page.locator("#closed-disagreements .closed-reason")).to_have_text(
        [REASONS[d["closed_reason"]] for d in closed])


def _click_and_read(page: Any, button: Any, action: str) -> dict[str, Any]:
    with page.expect_response(re.compile(rf".*/disagreements/\d+/{action}$")) as answer:
        button.click()
    return dict(answer.value.json())


def _others(done: dict[str, Any]) -> str:
    closed = done["closed_others"]
    return (f"The refit closed {closed} other disagreement{'' if closed == 1 else 's'} and "
            f"opened {done['opened_others']}.")


def _undo_and_reopen(page: Any, team: Team, undone: dict[str, Any]) -> None:
    card = _card(page, undone["id"])
    page.fill("#reviewer-key", team.reviewer_key)
    page.press("#reviewer-key", "Tab")  # the change shows the buttons
    _expect(page.locator("#review-rights")).to_be_hidden()
    done = _click_and_read(page, card.locator("button.undo"), "undo")
    # open again, or closed again when the answers (and the other resolution) settle it
    now = ("it is open again." if done["state"] == "open"
           else f"it stays closed ({REASONS[done['closed_reason']]}).")
    _expect(page.locator("#review-status")).to_have_text(
        f"Undid the latest resolution of {undone['a']} / {undone['b']}: {now} " + _others(done))
    _expect(card.locator(".resolutions li")).to_contain_text("rita resolved it")
    _expect(card.locator(".resolutions li")).to_contain_text("undone")
    _expect(card.locator("button.undo")).to_have_count(0)  # nothing stands to undo

    settled = next(d for d in team.disagreements() if d["closed_reason"] == "answers")
    done = _click_and_read(page, _card(page, settled["id"]).locator("button.reopen"), "reopen")
    _expect(page.locator("#review-status")).to_have_text(
        f"Reopened {settled['a']} / {settled['b']} for review. " + _others(done))
    reopened = page.locator(f"#disagreements article[data-id='{settled['id']}']")
    _expect(reopened).to_contain_text("reopened")
    _expect(reopened.locator("button.resolve")).to_have_count(2)


def test_the_lead_follows_a_scripted_teams_review_and_progress(
        browser: Any, keyed_server: Server, screenshots: Path) -> None:
    with httpx.Client(base_url=keyed_server.base_url, timeout=60,
                      headers={"X-API-Key": ADMIN_KEY}) as api:
        team = _script_team(api)
        kept, undone = _reviewer(team)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        _open_as_lead(page, keyed_server.base_url, team)

        # the project key reads Review but makes no decision: no buttons, and why
        _shows_every_closed_reason(page, team)
        _expect(page.locator("#review-rights")).to_contain_text("the project's reviewer key")
        _expect(page.locator("#view-review button.resolve, #view-review button.undo, "
                             "#view-review button.reopen")).to_have_count(0)
        resolution = _card(page, kept["id"]).locator(".resolutions li")
        value = "yes" if team.get(f"/disagreements/{kept['id']}")["resolutions"][0][
            "label"] == "positive" else "no"
        _expect(resolution).to_contain_text(f"rita resolved it: {value}")
        _expect(resolution).to_contain_text("stands")

        _undo_and_reopen(page, team, undone)
        _shows_every_closed_reason(page, team)
        page.screenshot(path=screenshots / "review-team.png", full_page=True)

        page.click(".tab[data-view=progress]")
        people = {p["annotator"]: p for p in team.get("/annotators")["items"]}
        rows = page.locator("#annotators tr")
        _expect(rows).to_have_count(len(people))
        for name in ("ana", "bo", "cy"):
            _expect(page.locator("#annotators tr", has_text=name)).to_contain_text(
                str(people[name]["answered"]))
        _expect(page.locator("#agreement-rows tr")).to_have_count(
            len(team.get("/agreement")["annotators"]))
        page.screenshot(path=screenshots / "progress-team.png", full_page=True)
