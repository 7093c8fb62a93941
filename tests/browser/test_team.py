"""/ui/ for a team in a real headless Chromium (marker ``browser``): each person undoes only
their own answer, a check question looks like any other, the page names who answers (whoami),
and, with keys on, each person opens the page with their own annotator key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.services import asking
from benchmarks.serving import Server
from reasoning.consensus.asking import AskPolicy
from tests.browser.conftest import (
    ADMIN_KEY,
    CALCULUS_POOL,
    CALCULUS_TRUTH,
    _expect,
    annotator_key,
    calculus_project,
    inprocess_server,
    open_ui,
    shown_pair,
    wait_for_other_question,
)

pytestmark = pytest.mark.browser

# What the answering screen must not say: a prediction, a model, or why a pair is asked.
GIVEAWAYS = ("p(", "p =", "predict", "model", "check", "second", "opinion", "disagree",
             "reason")


def _consensus(api: httpx.Client, headers: dict[str, str] | None = None) -> int:
    pid = calculus_project(api)
    response = api.patch(f"/projects/{pid}", json={"policy": "consensus"}, headers=headers)
    assert response.status_code == 200, response.text
    return pid


def _arrow(a: str, b: str, value: str) -> str:
    return f"{a} {'→' if value == 'positive' else '↛'} {b}"


def _answers(api: httpx.Client, pid: int, a: str, b: str, **kw: Any) -> dict[str, dict]:
    items = api.get(f"/projects/{pid}/answers", params={"a": a, "b": b}, **kw).json()["items"]
    return {x["annotator"]: x for x in items}


def _answer(page: Any, value: str) -> None:
    before = page.get_attribute("#question", "data-pair")
    page.keyboard.press("y" if value == "positive" else "n")
    wait_for_other_question(page, before)


def _question_shape(page: Any) -> str:
    """The question box's words with its two concepts replaced by A and B."""
    a, b = shown_pair(page)
    text = page.inner_text("#question")
    return re.sub(rf"\b{re.escape(b)}\b", "B", re.sub(rf"\b{re.escape(a)}\b", "A", text))


def test_u_retracts_only_ones_own_answer_and_says_what_changed(
        browser: Any, server: Server, api: httpx.Client, screenshots: Path) -> None:
    pid = _consensus(api)
    page = browser.new_page()
    open_ui(page, server.base_url, pid, "ana")
    a, b = shown_pair(page)
    value = "positive" if (a, b) in CALCULUS_TRUTH else "negative"
    # bo answers the pair on screen first; ana then gives the same answer
    api.post(f"/projects/{pid}/labels",
             json={"a": a, "b": b, "label": value, "annotator": "bo"}).raise_for_status()
    _answer(page, value)
    page.screenshot(path=screenshots / "team-label-answered.png", full_page=True)

    page.keyboard.press("u")
    undone = page.locator("#undone")
    _expect(undone).to_contain_text(f"Undone: your answer {_arrow(a, b, value)} is retracted")
    answers = _answers(api, pid, a, b)
    assert answers["ana"]["retracted_at"] is not None
    assert answers["bo"]["retracted_at"] is None  # the colleague's answer is still live
    status = api.get(f"/projects/{pid}/pairs/status", params={"a": a, "b": b}).json()
    assert status["status"] == value  # and still decides the pair
    assert shown_pair(page) == (a, b)  # asked again

    page.keyboard.press("u")  # nothing left in this tab
    _expect(undone).to_have_text("Nothing of yours to undo in this tab.")

    def no_answer_kept(route: Any) -> None:  # the service's answer to a repeat keeps none
        response = route.fetch()
        route.fulfill(response=response, json={**response.json(), "answer_id": None})

    page.route(re.compile(r".*/projects/\d+/labels$"), no_answer_kept)
    _answer(page, value)
    kept = _answers(api, pid, a, b)
    page.keyboard.press("u")
    _expect(undone).to_contain_text(f"Nothing of yours to undo: your last answer ({a} / {b})")
    assert _answers(api, pid, a, b) == kept  # nothing retracted


def test_a_check_question_looks_like_any_other(
        browser: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        screenshots: Path) -> None:
    # every question a check question, while one is left (in this process's service)
    monkeypatch.setattr(asking, "POLICY", AskPolicy(check_rate=1.0, passed_rate=1.0))
    names = ["alpha", "beta", "gamma", "delta"]
    pool = [("alpha", "beta"), ("beta", "gamma"), ("alpha", "gamma"), ("gamma", "delta")]
    with inprocess_server(tmp_path) as base, httpx.Client(base_url=base, timeout=60) as api:
        pid = api.post("/projects", json={"name": "team", "policy": "consensus"}).json()["id"]
        api.post(f"/projects/{pid}/concepts",
                 json={"concepts": [{"name": n} for n in names]}).raise_for_status()
        api.post(f"/projects/{pid}/pairs", json={"pairs": [
            {"a": a, "b": b, "features": [float(i)]} for i, (a, b) in enumerate(pool)]}
                 ).raise_for_status()
        for a, b in [("alpha", "beta"), ("beta", "gamma")]:
            api.post(f"/projects/{pid}/labels",
                     json={"a": a, "b": b, "label": "positive", "annotator": "ann"}
                     ).raise_for_status()

        page = browser.new_page()
        open_ui(page, base, pid, "dan")
        # the one check question: decided positive only through two steps
        assert shown_pair(page) == ("alpha", "gamma")
        check = _question_shape(page)
        assert not [w for w in GIVEAWAYS if w in page.inner_text("#view-label").lower()]
        _expect(page.locator("#question-note")).to_be_hidden()
        page.screenshot(path=screenshots / "label-check-question.png", full_page=True)

        before = page.get_attribute("#question", "data-pair")
        page.keyboard.press("n")  # a "no": the service marks the check failed
        _expect(page.locator("#definition")).to_be_visible()
        page.click("#definition-close")
        wait_for_other_question(page, before)
        agreement = {r["annotator"]: r for r in api.get(f"/projects/{pid}/agreement").json()
                     ["annotators"]}
        assert agreement["dan"]["checks"] == {"asked": 1, "failed": 1}
        assert _question_shape(page) == check  # the next question looks the same

        _lead_screens(page, screenshots)


def _lead_screens(page: Any, screenshots: Path) -> None:
    """Progress explains the bounds in one plain line; the lead's screens keep their words."""
    page.click(".tab[data-view=progress]")
    page.wait_for_selector("#agreement-rows tr >> text=dan")
    progress = page.inner_text("#view-progress")
    assert "Theorem" not in progress and "asserted" not in progress
    _expect(page.locator("#bounds-line")).to_be_visible()
    _expect(page.locator("#bounds")).to_contain_text("between")
    # how right the map is: the wrong pairs expected among the decided ones, with an interval
    _expect(page.locator("#quality-decided")).to_contain_text(" of ")
    _expect(page.locator("#quality-decided")).to_contain_text("–")
    page.screenshot(path=screenshots / "team-progress.png", full_page=True)
    page.click(".tab[data-view=review]")
    _expect(page.locator("#view-review")).to_be_visible()
    page.wait_for_selector("#disagreements > *")
    page.screenshot(path=screenshots / "team-review.png", full_page=True)


def test_the_page_names_who_answers_and_asks_a_name_or_a_key(
        browser: Any, server: Server, api: httpx.Client) -> None:
    pid = calculus_project(api)
    page = browser.new_page()
    page.goto(f"{server.base_url}/ui/")
    page.keyboard.type(str(pid))
    page.keyboard.press("Enter")  # no name, no key: nobody to answer as
    _expect(page.locator("#connect-status")).to_contain_text(
        "type your name, or paste your annotator key")
    _expect(page.locator("#view-label")).to_be_visible()
    assert page.get_attribute("#question", "data-pair") == ""  # nothing asked

    open_ui(page, server.base_url, pid, "ana")
    status = page.inner_text("#connect-status")
    whoami = api.get(f"/projects/{pid}/whoami")
    if whoami.status_code == 404:  # a service without whoami: the name typed, no role
        assert status == f"Project {pid}: calculus — labeling as ana"
    else:  # keys off: everyone is admin, the name comes from the field
        assert whoami.json()["open"] is True
        assert status == f"Project {pid}: calculus — labeling as ana (keys off)"


# ---------------------------------------------------------------------------------- keys on
def test_with_keys_on_each_person_opens_the_page_with_their_own_key(
        browser: Any, keyed_server: Server) -> None:
    admin = {"X-API-Key": ADMIN_KEY}
    with httpx.Client(base_url=keyed_server.base_url, timeout=60, headers=admin) as api:
        pid = _consensus(api)
        project_key = api.post(f"/projects/{pid}/api-key").json()["api_key"]
        ana, bo = (annotator_key(api, pid, project_key, n) for n in ("ana", "bo"))
        page = browser.new_page()
        page.goto(f"{keyed_server.base_url}/ui/")
        page.fill("#pid", str(pid))
        page.fill("#annotator-key", ana)
        page.press("#annotator-key", "Enter")
        _expect(page.locator("#connect-status")).to_have_text(
            f"Project {pid}: calculus — labeling as ana (annotator)")
        _expect(page.locator("#annotator")).to_have_value("ana")  # the key names the person
        _expect(page.locator("#question")).not_to_have_attribute("data-pair", "")
        a, b = shown_pair(page)
        value = "positive" if (a, b) in CALCULUS_TRUTH else "negative"
        api.post(f"/projects/{pid}/labels", json={"a": a, "b": b, "label": value},
                 headers={"X-API-Key": bo}).raise_for_status()
        _answer(page, value)
        page.keyboard.press("u")
        _expect(page.locator("#undone")).to_contain_text("Undone: your answer")
        answers = _answers(api, pid, a, b, headers={"X-API-Key": project_key})
        assert answers["ana"]["retracted_at"] is not None
        assert answers["bo"]["retracted_at"] is None
        _annotators_views(page, a, b)


def _annotators_views(page: Any, a: str, b: str) -> None:
    """What an annotator key opens: the reasons, Progress, the map; the lead's views say so."""
    page.fill("#why-a", a)
    page.fill("#why-b", b)
    page.click("#why button[type=submit]")
    _expect(page.locator("#reason")).to_contain_text(a)
    _expect(page.locator("#reason .error")).to_have_count(0)

    page.click(".tab[data-view=progress]")
    _expect(page.locator("#progress-updated")).to_contain_text("updated")
    _expect(page.locator("#decided-text")).to_contain_text(" of 6")
    _expect(page.locator("#quality-decided")).to_contain_text("about")
    _expect(page.locator("#annotators-refused")).to_contain_text("the lead's view")
    _expect(page.locator("#agreement-summary")).to_contain_text("the lead's view")
    assert "failed" not in page.inner_text("#progress-updated")

    page.click(".tab[data-view=map]")
    _expect(page.locator("#map-status")).to_contain_text("4 concepts")

    page.click(".tab[data-view=review]")
    _expect(page.locator("#review-refused")).to_contain_text("Review is the lead's view")
    _expect(page.locator("#view-review .error")).to_have_count(0)


# ------------------------------------------------------------------ what a lead acts on
def test_progress_shows_false_no_and_yes_the_minority_answers_and_the_trend(
        browser: Any, server: Server, api: httpx.Client, screenshots: Path) -> None:
    pid = _consensus(api)
    wrong = [("limit", "derivative"), ("derivative", "integral")]  # dee's false "no"
    for a, b, _ in CALCULUS_POOL:
        truth = "positive" if (a, b) in CALCULUS_TRUTH else "negative"
        for who in ("ana", "bo", "cy", "dee"):
            value = "negative" if who == "dee" and (a, b) in wrong else truth
            api.post(f"/projects/{pid}/labels", json={"a": a, "b": b, "label": value,
                                                      "annotator": who}).raise_for_status()
    view = {r["annotator"]: r for r in api.get(f"/projects/{pid}/agreement").json()
            ["annotators"]}
    assert (view["dee"]["false_no"], view["dee"]["minority"]) == (2, 2)

    page = browser.new_page()
    open_ui(page, server.base_url, pid, "lead", question=False)  # every pool pair is decided
    page.click(".tab[data-view=progress]")
    row = page.locator("#agreement-rows tr[data-annotator=dee]")
    _expect(row.locator("td.false-no")).to_have_text("2")
    _expect(row.locator("td.false-yes")).to_have_text("0")
    _expect(row.locator("td.actions button.exclude")).to_have_count(1)  # the lead's actions
    note = row.locator("details.note")  # six shared pairs: the note says so, folded
    _expect(note.locator("summary")).to_have_text("mostly the prior")
    note.locator("summary").click()
    _expect(note).to_contain_text("the estimated accuracy is mostly the prior (90%)")
    _expect(row.locator("td.trend")).to_have_text("67 %")  # one window of six answers
    _expect(row.locator("td.trend")).to_have_attribute(
        "title", "agreement per window of 20 answers, oldest first: 67 % of 6")
    ana = page.locator("#agreement-rows tr[data-annotator=ana]")
    _expect(ana.locator(".minority-link")).to_have_count(0)  # nothing against the consensus
    row.locator(".minority-link").click()
    listed = page.locator("#minority-answers li")
    _expect(listed).to_have_count(2)
    _expect(page.locator("#minority-title")).to_have_text("dee: 2 answers against the consensus")
    for a, b in wrong:
        _expect(page.locator("#minority-answers")).to_contain_text(f"{a} ↛ {b}")
    page.screenshot(path=screenshots / "team-progress-minority.png", full_page=True)

    def longer(route: Any) -> None:  # dee, 45 answers on: better, then worse
        response = route.fetch()
        body = response.json()
        for item in body["annotators"]:
            if item["annotator"] == "dee":
                item["trend"] = [{"answers": 5, "agreement": 0.6},
                                 {"answers": 20, "agreement": 0.9},
                                 {"answers": 20, "agreement": 0.5}]
        route.fulfill(response=response, json=body)

    page.route(re.compile(r".*/agreement$"), longer)
    _expect(row.locator("td.trend")).to_have_text("50 % ↘", timeout=15_000)  # the next poll
    _expect(row.locator("td.trend svg polyline")).to_have_count(1)
    assert len(row.locator("td.trend polyline").get_attribute("points").split()) == 3
