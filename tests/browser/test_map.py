"""The map of /ui/ in a real headless Chromium (marker ``browser``): readable at Fit, quick to
lay out, and its controls (search, highlight, zoom, Fit, export, keyboard); and /redoc, which
asks nothing of any other host.

Readability is measured from the rendered page at 1280×800 (``benchmarks.map_render``, whose
``python -m benchmarks.map_render`` also prints the panning frame rate); screenshots of both
maps are saved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from benchmarks.map_render import (
    VIEWPORT,
    answered_project,
    decided_project,
    measure,
    open_map,
)
from benchmarks.serving import Server

pytestmark = pytest.mark.browser

MIN_LABEL_PX = 10.0
MAX_LAYOUT_MS = 2000.0


def _report(name: str, figures: dict[str, Any]) -> None:
    print(f"\nmap of {name}: {figures['linked']} concepts with edges, smallest label "
          f"{figures['min_label_px']:.1f} px (font {figures['min_font_px']:.1f} px), "
          f"{len(figures['overlaps'])} overlaps, layout {figures['layout_ms']:.0f} ms")


def test_data_mining_after_160_answers_is_readable_at_fit(
        browser: Any, server: Server, api: httpx.Client, screenshots: Path, al_cpl: Path) -> None:
    pid = answered_project(api, al_cpl, "data_mining", 160)
    page = browser.new_page(viewport=VIEWPORT)
    open_map(page, server.base_url, pid)
    page.screenshot(path=screenshots / "map-data_mining-160-answers.png")
    figures = measure(page)
    _report("data_mining, 160 answers", figures)
    assert figures["linked"] > 40  # a real graph, not a handful of concepts
    assert figures["out_of_view"] == []
    assert figures["cut"] == []  # full names, no ellipsis
    assert figures["min_label_px"] >= MIN_LABEL_PX
    assert figures["overlaps"] == []
    # the concepts without edges: all drawn, in the grid below the connected part
    assert page.locator("#nodes .node").count() == api.get(
        f"/projects/{pid}").json()["counts"]["concepts"]


def test_precalculus_all_decided_is_laid_out_in_two_seconds(
        browser: Any, server: Server, api: httpx.Client, screenshots: Path, al_cpl: Path) -> None:
    pid = decided_project(api, al_cpl, "precalculus")
    page = browser.new_page(viewport=VIEWPORT)
    open_map(page, server.base_url, pid)
    page.screenshot(path=screenshots / "map-precalculus-all-decided.png")
    figures = measure(page)
    _report("precalculus, all decided", figures)
    assert page.locator("#nodes .node").count() == 224
    assert figures["layout_ms"] <= MAX_LAYOUT_MS
    assert figures["out_of_view"] == [] and figures["cut"] == [] and figures["overlaps"] == []


def _chain_project(api: httpx.Client) -> int:
    """a → b → c → d, e → c, and two concepts with no edge."""
    pid = int(api.post("/projects", json={"name": "chain"}).json()["id"])
    names = ["a", "b", "c", "d", "e", "lonely one", "lonely two"]
    api.post(f"/projects/{pid}/concepts",
             json={"concepts": [{"name": n} for n in names]}).raise_for_status()
    api.post(f"/projects/{pid}/labels/bulk", json={"labels": [
        {"a": a, "b": b, "label": "positive"}
        for a, b in [("a", "b"), ("b", "c"), ("c", "d"), ("e", "c")]]}).raise_for_status()
    return pid


def _transform(page: Any) -> tuple[float, float, float]:
    text = page.get_attribute("#viewport", "transform")  # translate(x,y) scale(k)
    x, y, k = (float(v) for v in text.replace("translate(", "").replace(") scale(", ",")
               .rstrip(")").split(","))
    return x, y, k


def _centre(page: Any, name: str) -> tuple[float, float]:
    box = page.locator(f'#nodes .node[data-name="{name}"] rect').bounding_box()
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def test_the_map_controls_search_highlight_zoom_fit_and_keyboard(
        browser: Any, server: Server, api: httpx.Client) -> None:
    pid = _chain_project(api)
    page = browser.new_page(viewport=VIEWPORT)
    open_map(page, server.base_url, pid)
    assert page.locator("#edges path[marker-end]").count() == 4  # arrowheads
    # Fit shows the connected part: the concepts without edges lie below it, apart
    lonely = page.locator('#nodes .node[data-name="lonely one"]').bounding_box()
    connected = [page.locator(f'#nodes .node[data-name="{n}"]').bounding_box() for n in "abcde"]
    assert lonely["y"] > max(b["y"] + b["height"] for b in connected)
    page.click("#zoom-fit")  # pressed again: everything, the grid too
    page.wait_for_timeout(100)
    map_box = page.locator("#map").bounding_box()
    lonely = page.locator('#nodes .node[data-name="lonely two"]').bounding_box()
    assert lonely["y"] + lonely["height"] <= map_box["y"] + map_box["height"]
    page.click("#zoom-fit")
    page.wait_for_timeout(100)

    # + and - zoom about the content's centre: the content stays where it was
    before = _centre(page, "c")
    page.click("#zoom-in")
    page.wait_for_timeout(100)
    after = _centre(page, "c")
    assert abs(after[0] - before[0]) < 400 and abs(after[1] - before[1]) < 400
    assert map_box["x"] <= after[0] <= map_box["x"] + map_box["width"]
    # the wheel zooms about the pointer: the concept under it stays under it
    x, y = _centre(page, "b")
    page.mouse.move(x, y)
    page.mouse.wheel(0, -300)
    page.wait_for_timeout(150)
    moved = _centre(page, "b")
    assert abs(moved[0] - x) < 3 and abs(moved[1] - y) < 3

    # search: centres and highlights the concept, with its prerequisites and dependants
    page.fill("#map-search", "c")
    page.press("#map-search", "Enter")
    page.wait_for_selector("#concept-name >> text=c")
    cx, cy = _centre(page, "c")
    assert abs(cx - (map_box["x"] + map_box["width"] / 2)) < 5
    assert abs(cy - (map_box["y"] + map_box["height"] / 2)) < 5
    classes = {n: page.get_attribute(f'#nodes .node[data-name="{n}"]', "class") for n in "abcde"}
    assert "selected" in classes["c"]
    assert all("prereq" in classes[n] for n in "abe") and "dependant" in classes["d"]
    assert sorted(page.locator("#prerequisites li").all_inner_texts()) == ["b", "e"]
    assert page.locator("#edges path.lit").count() == 4

    # keyboard: Tab reaches a concept, Enter selects it
    page.focus('#nodes .node[data-name="a"]')
    page.keyboard.press("Enter")
    page.wait_for_selector("#concept-name >> text=a")
    assert page.locator("#dependants li").all_inner_texts() == ["b"]


def test_an_empty_project_has_an_empty_map(browser: Any, server: Server,
                                           api: httpx.Client) -> None:
    pid = api.post("/projects", json={"name": "empty"}).json()["id"]
    page = browser.new_page(viewport=VIEWPORT)
    open_map(page, server.base_url, pid)
    assert page.inner_text("#map-status").startswith("0 concepts, 0 edges")
    page.click("#zoom-fit")
    page.click("#zoom-in")
    assert page.locator("#nodes .node").count() == 0


def test_the_map_exports_svg_and_png(browser: Any, server: Server, api: httpx.Client,
                                     tmp_path: Path) -> None:
    pid = _chain_project(api)
    page = browser.new_page(viewport=VIEWPORT, accept_downloads=True)
    open_map(page, server.base_url, pid)
    with page.expect_download() as svg_download:
        page.click("#export-svg")
    svg_path = tmp_path / "map.svg"
    svg_download.value.save_as(svg_path)
    text = svg_path.read_text()
    assert text.startswith("<svg") and "lonely two" in text and "marker" in text
    with page.expect_download() as png_download:
        page.click("#export-png")
    png_path = tmp_path / "map.png"
    png_download.value.save_as(png_path)
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_redoc_makes_no_request_to_another_host(browser: Any, server: Server) -> None:
    page = browser.new_page()
    requested: list[str] = []
    blocked: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.on("requestfailed", lambda request: blocked.append(request.url)
            if request.failure == "csp" else None)
    page.goto(f"{server.base_url}/redoc")
    page.wait_for_selector("text=API docs by Redocly", timeout=60_000)
    page.wait_for_timeout(1000)  # the side menu's logo is asked for after it is drawn
    origin = urlsplit(server.base_url).netloc
    elsewhere = [u for u in requested
                 if urlsplit(u.removeprefix("blob:")).netloc != origin]
    # ReDoc 2 asks for Redocly's logo (no option turns it off); the page's CSP stops the
    # browser before anything is sent. Nothing else goes anywhere.
    assert elsewhere == blocked
    assert all(urlsplit(u).netloc == "cdn.redoc.ly" for u in blocked)
    assert f"{server.base_url}/openapi.json" in requested


def test_a_contested_edge_is_marked_on_the_map(browser: Any, server: Server,
                                                 api: httpx.Client) -> None:
    pid = api.post("/projects", json={"name": "team", "policy": "consensus"}).json()["id"]
    api.post(f"/projects/{pid}/concepts",
             json={"concepts": [{"name": n} for n in ("a", "b", "c", "d", "e", "f")]})

    def answer(a: str, b: str, value: str, who: str) -> None:
        response = api.post(f"/projects/{pid}/labels",
                            json={"a": a, "b": b, "label": value, "annotator": who})
        assert response.status_code in (200, 201), response.text

    for a, b in (("a", "b"), ("c", "d"), ("e", "f")):  # bob is wrong where two others agree
        for who, value in (("ann", "positive"), ("cy", "positive"), ("bob", "negative")):
            answer(a, b, value, who)
    answer("b", "c", "positive", "ann")  # one against one: decided for ann, still in dispute
    answer("b", "c", "negative", "bob")
    disputed = api.get(f"/projects/{pid}/disagreements").json()["items"]
    assert [(d["a"], d["b"]) for d in disputed] == [("b", "c")]
    page = browser.new_page(viewport=VIEWPORT)
    open_map(page, server.base_url, pid)
    contested = page.locator("#edges path.contested")
    assert contested.count() == 1
    assert (contested.get_attribute("data-a"), contested.get_attribute("data-b")) == ("b", "c")
    assert "contested" in contested.locator("title").text_content()
    assert page.locator("#edges path.edge:not(.contested):not(.predicted)").count() == 3
    assert "1 contested edge" in page.inner_text("#map-status")
