"""/ui/ for teams in a real headless Chromium (marker ``browser``): the project's question
wording, the agreement tables of Progress, the Review view with its resolve buttons and its
closed disagreements (why, when, every resolution), and the definition shown again after a
failed check question."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.serving import Server
from tests.browser.conftest import calculus_project, open_ui, shown_pair

pytestmark = pytest.mark.browser

QUESTION = "Must one learn {a} before {b}?"


def _expect(locator: Any) -> Any:
    from playwright.sync_api import expect

    return expect(locator)


def _team(api: httpx.Client) -> int:
    pid = calculus_project(api)
    assert api.patch(f"/projects/{pid}", json={"question": QUESTION}).status_code == 200
    for a, b, value, who in [("limit", "derivative", "positive", "ana"),
                             ("limit", "derivative", "positive", "bo"),
                             ("derivative", "integral", "positive", "bo"),
                             ("integral", "limit", "positive", "ana"),  # refused: an answer
                             ("series", "limit", "negative", "ana")]:
        api.post(f"/projects/{pid}/labels", json={"a": a, "b": b, "label": value,
                                                  "annotator": who})
    return pid


def test_the_question_and_the_agreement_come_from_the_project(
        browser: Any, server: Server, api: httpx.Client, screenshots: Path) -> None:
    pid = _team(api)
    page = browser.new_page()
    open_ui(page, server.base_url, pid, "cy")
    a, b = shown_pair(page)
    _expect(page.locator("#question .ask")).to_have_text(f"Must one learn {a} before {b}?")

    page.click(".tab[data-view=progress]")
    page.wait_for_selector("#agreement-rows tr >> text=bo")
    view = api.get(f"/projects/{pid}/agreement").json()
    rows = page.locator("#agreement-rows tr")
    _expect(rows).to_have_count(len(view["annotators"]))
    ana = next(r for r in view["annotators"] if r["annotator"] == "ana")
    text = page.locator("#agreement-rows tr", has_text="ana").inner_text()
    assert f"{round(100 * ana['agreement'])} %" in text
    assert f"{ana['checks']['failed']} of {ana['checks']['asked']}" in text
    _expect(page.locator("#agreement-summary")).to_contain_text(f"{view['answers']} answers")
    _expect(page.locator("#kappa-rows")).to_contain_text("no two annotators share 20 pairs")
    page.screenshot(path=screenshots / "progress-agreement.png", full_page=True)

    page.click(".tab[data-view=review]")
    _expect(page.locator("#view-review")).to_be_visible()
    _expect(page.locator("#view-label")).to_be_hidden()
    _expect(page.locator("#tab-review")).to_have_attribute("aria-current", "page")
    page.wait_for_selector("#no-disagreements")  # a strict project has none
    page.reload()  # the tab keeps its session and comes back to Review
    _expect(page.locator("#view-review")).to_be_visible()
    page.wait_for_selector("#no-disagreements")
    page.click(".tab[data-view=label]")
    _expect(page.locator("#view-review")).to_be_hidden()
    _expect(page.locator("#tab-review")).not_to_have_attribute("aria-current", "page")


def _disagreement(state: str = "open") -> dict[str, Any]:
    def answer(n: int, who: str, label: str) -> dict[str, Any]:
        return {"id": n, "a": "series", "b": "integral", "label": label, "annotator": who,
                "role": "annotator", "source": "api", "created_at": "2026-01-02T03:04:05Z",
                "outcome": "contested", "retracted_at": None}

    closed = state == "closed"
    resolutions = [{"answer_id": 9, "annotator": "cy", "label": "positive",
                    "resolved_at": "2026-01-02T04:00:00Z", "undone_at": None}] if closed else []
    return {"id": 7, "a": "series", "b": "integral", "state": state,
            "opened_at": "2026-01-02T03:04:05Z",
            "closed_at": "2026-01-02T04:00:00Z" if closed else None,
            "closed_reason": "reviewer" if closed else None, "reopened_at": None,
            "resolutions": resolutions, "consensus": "positive" if closed else "negative",
            "positive": [answer(1, "ana", "positive")],
            "negative": [answer(2, "bo", "negative"), answer(3, "dee", "negative")],
            "proof": [{"id": 11, "a": "integral", "b": "series", "label": "positive"}],
            "chains": [["integral", "series"]]}


def test_the_review_view_resolves_and_a_failed_check_shows_the_definition(
        browser: Any, server: Server, api: httpx.Client, screenshots: Path) -> None:
    pid = _team(api)
    page = browser.new_page()
    items: list[dict[str, Any]] = [_disagreement()]
    resolved: list[tuple[Any, str | None]] = []

    def listing(route: Any) -> None:  # two pages: the view follows `next_cursor`
        if "cursor=page-2" not in route.request.url:
            route.fulfill(json={"items": [], "next_cursor": "page-2"})
        else:
            route.fulfill(json={"items": list(items), "next_cursor": None})

    def resolving(route: Any) -> None:
        request = route.request
        resolved.append((json.loads(request.post_data), request.headers.get("x-api-key")))
        items[:] = [_disagreement("closed")]
        route.fulfill(json={**_disagreement("closed"), "closed_others": 2, "opened_others": 0})

    def check_failed(route: Any) -> None:  # the service marks the answer a failed check
        response = route.fetch()
        route.fulfill(response=response, json={**response.json(), "check_failed": True})

    page.route(re.compile(r".*/disagreements\?state=all(&.*)?$"), listing)
    page.route(re.compile(r".*/disagreements/7/resolve$"), resolving)
    open_ui(page, server.base_url, pid, "cy")

    page.click(".tab[data-view=review]")
    card = page.locator("article.disagreement[data-id='7']")
    _expect(card).to_contain_text("series / integral")
    _expect(card.locator(".side").nth(0)).to_contain_text("ana")
    _expect(card.locator(".side").nth(1)).to_contain_text("bo")
    _expect(card.locator(".side").nth(1)).to_contain_text("dee")
    _expect(card.locator(".proof")).to_contain_text("integral → series (label #11)")
    _expect(page.locator("#review-count")).to_have_text("— 1 open")
    page.screenshot(path=screenshots / "review.png", full_page=True)
    page.fill("#reviewer-key", "the-reviewer-key")
    card.locator("button[data-label=positive]").click()
    page.wait_for_selector("#no-disagreements")
    assert resolved == [({"label": "positive", "annotator": "cy"}, "the-reviewer-key")]
    _expect(page.locator("#review-status")).to_have_text(
        "Resolved series / integral as positive. The refit closed 2 other disagreements and "
        "opened 0.")
    closed = page.locator("#closed-disagreements article.disagreement[data-id='7']")
    _expect(closed.locator(".closed-reason")).to_have_text("resolved by the reviewer")
    _expect(closed.locator(".resolutions li")).to_contain_text(
        "cy resolved it: yes (series → integral)")
    _expect(closed.locator(".resolutions li")).to_contain_text("stands")
    _expect(closed.locator("button.undo")).to_be_visible()
    _expect(closed.locator("button.reopen")).to_be_visible()

    page.route(re.compile(r".*/projects/\d+/labels$"), check_failed)
    page.click(".tab[data-view=label]")
    _expect(page.locator("#question")).not_to_have_attribute("data-pair", "")
    _expect(page.locator("#definition")).to_be_hidden()
    page.locator("#question").focus()
    page.keyboard.press("n")
    _expect(page.locator("#definition")).to_be_visible()
    _expect(page.locator("#definition-question")).to_have_text("Must one learn A before B?")
    page.screenshot(path=screenshots / "definition-again.png", full_page=True)
    page.click("#definition-close")
    _expect(page.locator("#definition")).to_be_hidden()
