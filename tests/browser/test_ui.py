"""/ui/ in a real headless Chromium against a real `sporal serve` (marker ``browser``).

The README's calculus example labeled by keyboard, what each answer decided and why, a refused
contradiction retracted and answered again, undo, two annotators, progress, the map of a
data_mining project, and a page that asks nothing of anyone but the service.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import networkx as nx
import pytest

from benchmarks.serving import Server
from reasoning.data import load_domain
from tests.browser.conftest import (
    CALCULUS,
    CALCULUS_TRUTH,
    _expect,
    calculus_project,
    open_ui,
    shown_pair,
    wait_for_other_question,
)

pytestmark = pytest.mark.browser


def _answer_truly(page: Any) -> tuple[str, str]:
    pair = shown_pair(page)
    before = page.get_attribute("#question", "data-pair")
    page.keyboard.press("y" if pair in CALCULUS_TRUTH else "n")
    wait_for_other_question(page, before)
    return pair


def _labels(api: httpx.Client, pid: int, source: str) -> list[dict]:
    return api.get(f"/projects/{pid}/labels", params={"source": source}).json()["items"]


def test_the_readme_example_labeled_by_keyboard_with_reasons_and_undo(
        browser: Any, server: Server, api: httpx.Client, screenshots: Path) -> None:
    pid = calculus_project(api)
    page = browser.new_page()
    open_ui(page, server.base_url, pid, "ana")
    page.screenshot(path=screenshots / "label-question.png", full_page=True)

    _answer_truly(page)
    _answer_truly(page)
    second = _labels(api, pid, "asserted")[0]  # newest first
    inferred = {(i["a"], i["b"], i["label"]) for i in _labels(api, pid, "inferred")
                if i["caused_by"] == second["id"]}
    assert inferred, "the README's order: the second answer decides more pairs"
    # the first inferred pairs are listed at once, without a click (the rest behind one)
    if page.locator("#outcome summary").count():
        page.click("#outcome summary")
    shown = page.locator("#decided-list li, #decided-rest li").all_inner_texts()
    assert shown and page.locator("#decided-list li").first.is_visible()
    assert {t.replace(" → ", "|positive|").replace(" ↛ ", "|negative|") for t in shown} == {
        f"{a}|{label}|{b}" for a, b, label in inferred}
    assert page.inner_text("#decided-count") == f"+{len(inferred)} decided"

    page.locator("#decided-list button").first.click()  # why is it decided?
    page.wait_for_selector("#reason-proof li")
    assert f"label #{second['id']}" in page.inner_text("#reason-proof")
    page.screenshot(path=screenshots / "label-decided-and-proof.png", full_page=True)

    while page.get_attribute("#question", "data-pair"):
        _answer_truly(page)
    assert "Nothing left to ask" in page.inner_text("#question-note")
    positives = {(i["a"], i["b"]) for i in _labels(api, pid, "all") if i["label"] == "positive"}
    assert positives == CALCULUS_TRUTH

    last = _labels(api, pid, "asserted")[0]
    page.keyboard.press("u")
    page.wait_for_selector("#undone")
    assert shown_pair(page) == (last["a"], last["b"])
    assert [i["id"] for i in _labels(api, pid, "asserted")][0] != last["id"]


def test_a_refused_answer_offers_to_retract_only_ones_own_answer_and_names_who_can(
        browser: Any, server: Server, api: httpx.Client, screenshots: Path) -> None:
    pid = calculus_project(api)
    page = browser.new_page()
    open_ui(page, server.base_url, pid, "ana")
    a, b = shown_pair(page)
    c = next(x for x in CALCULUS if x not in (a, b))
    # Meanwhile ana (elsewhere) and bo decide b before a, through c: "yes" is a contradiction.
    mine = api.post(f"/projects/{pid}/labels",
                    json={"a": b, "b": c, "label": "positive", "annotator": "ana"}).json()
    other = api.post(f"/projects/{pid}/labels",
                     json={"a": c, "b": a, "label": "positive", "annotator": "bo"}).json()
    page.keyboard.press("y")
    page.wait_for_selector("#refusal:not([hidden]) #proof li")
    _expect(page.locator("#proof li")).to_have_count(2)
    own = page.locator("#proof li", has_text=f"label #{mine['id']}")
    theirs = page.locator("#proof li", has_text=f"label #{other['id']}")
    _expect(own.locator("button")).to_have_text("Retract my answer")
    _expect(theirs.locator("button")).to_have_count(0)  # bo's answer: no Retract for ana
    _expect(theirs).to_contain_text(  # who can: bo, or the lead
        "bo's answer: only bo or the lead (with the project key) can retract it.")
    page.screenshot(path=screenshots / "label-refused.png", full_page=True)

    page.keyboard.press("Enter")  # the focus is on the one Retract button: ana's own answer
    page.wait_for_selector("#refusal >> text=Retracted your answer")
    before = page.get_attribute("#question", "data-pair")
    page.keyboard.press("y")
    wait_for_other_question(page, before)
    answers = {x["id"]: x for x in api.get(f"/projects/{pid}/answers").json()["items"]}
    assert answers[mine["answer_id"]]["retracted_at"] is not None
    assert answers[other["answer_id"]]["retracted_at"] is None  # bo's answer stands
    live = {(i["a"], i["b"], i["label"], i["annotator"]) for i in _labels(api, pid, "asserted")}
    assert live == {(c, a, "positive", "bo"), (a, b, "positive", "ana")}
    counts = {i["annotator"]: i for i in api.get(f"/projects/{pid}/annotators").json()["items"]}
    assert (counts["ana"]["refused"], counts["ana"]["retracted"]) == (1, 1)
    assert counts["bo"]["retracted"] == 0

    page.click(".tab[data-view=progress]")
    page.wait_for_selector("#annotators tr >> text=bo")
    assert page.inner_text("#asked") == "2"
    shown = page.locator("#annotators tr", has_text="ana").locator("td").all_inner_texts()
    ana = counts["ana"]
    assert shown == [str(ana[k]) for k in
                     ("answered", "accepted", "retracted", "refused", "contested", "excluded")]
    page.screenshot(path=screenshots / "progress.png", full_page=True)


def test_two_annotators_in_two_browsers_get_different_questions(
        browser: Any, server: Server, api: httpx.Client) -> None:
    pid = calculus_project(api)
    ana, bo = browser.new_context().new_page(), browser.new_context().new_page()
    open_ui(ana, server.base_url, pid, "ana")
    open_ui(bo, server.base_url, pid, "bo")
    assert shown_pair(ana) != shown_pair(bo)


def test_the_map_draws_every_concept_and_a_click_shows_its_prerequisites(
        browser: Any, server: Server, api: httpx.Client, screenshots: Path, al_cpl: Path) -> None:
    domain = load_domain(al_cpl, "data_mining")
    pid = api.post("/projects", json={"name": "data mining"}).json()["id"]
    api.post(f"/projects/{pid}/concepts",
             json={"concepts": [{"name": c} for c in domain.concepts]}).raise_for_status()
    positives = [pair for pair, value in zip(domain.pairs, domain.labels, strict=True) if value]
    api.post(f"/projects/{pid}/labels/bulk", json={"labels": [
        {"a": a, "b": b, "label": "positive"} for a, b in positives]}).raise_for_status()
    reduction = nx.transitive_reduction(nx.DiGraph(positives))
    concept = max(reduction.nodes, key=reduction.in_degree)

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    open_ui(page, server.base_url, pid, "ana", question=False)  # no pool: nothing to ask
    page.click(".tab[data-view=map]")
    page.wait_for_selector("#map-status >> text=concepts,")
    names = page.eval_on_selector_all("#nodes .node", "gs => gs.map(g => g.dataset.name)")
    assert sorted(names) == sorted(domain.concepts)
    assert page.locator("#edges path:not(.predicted)").count() == reduction.number_of_edges()

    page.focus(f'#nodes .node[data-name="{concept}"]')
    page.keyboard.press("Enter")
    assert page.inner_text("#concept-name") == concept
    shown = page.locator("#prerequisites li").all_inner_texts()
    assert sorted(shown) == sorted(reduction.predecessors(concept))
    page.screenshot(path=screenshots / "map.png", full_page=True)


def test_the_page_and_everything_it_loads_come_from_the_service(
        browser: Any, server: Server, api: httpx.Client) -> None:
    pid = calculus_project(api)
    page = browser.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    open_ui(page, server.base_url, pid, "ana")
    _answer_truly(page)
    for view in ("progress", "map"):
        page.click(f".tab[data-view={view}]")
    page.wait_for_selector("#map-status >> text=concepts,")
    assert {"/ui/", "/ui/app.js", "/ui/style.css"} <= {u.removeprefix(server.base_url)
                                                      for u in requested}
    assert [u for u in requested if not u.startswith(f"{server.base_url}/")] == []
    policy = httpx.get(f"{server.base_url}/ui/").headers["content-security-policy"]
    assert "default-src 'self'" in policy


def test_first_minutes_no_empty_boxes_singulars_and_the_key_explained(
        browser: Any, server: Server, api: httpx.Client) -> None:
    pid = api.post("/projects", json={"name": "two"}).json()["id"]
    api.post(f"/projects/{pid}/concepts",
             json={"concepts": [{"name": "x"}, {"name": "y"}]}).raise_for_status()
    api.post(f"/projects/{pid}/pairs", json={"pairs": [
        {"a": "x", "b": "y", "features": [0.5]}]}).raise_for_status()
    page = browser.new_page()
    page.goto(f"{server.base_url}/ui/")
    hint = page.inner_text("#connect .hint")
    assert "api_key" in hint and "keys on" in hint  # where the key comes from
    open_ui(page, server.base_url, pid, "ana")
    assert page.inner_text("#undecided") == "— 1 pool pair undecided"
    assert page.locator("#outcome").is_hidden()  # nothing to say before the first answer
    assert page.locator("#qa-desc").is_hidden() and page.locator("#qb-desc").is_hidden()
    assert "(no description)" not in page.inner_text("#question")
    page.keyboard.press("y")
    page.wait_for_selector("#outcome >> text=Recorded")
    assert page.locator("#outcome").is_visible()
