"""The map of /ui/ in a real headless Chromium: readability at Fit, layout time, panning frame rate.

Starts a real `sporal serve` on a temporary SQLite file and builds two projects through the
REST API:

- data_mining after 160 answers: the first 160 questions of ``next`` (default strategy; each
  asked with ``fresh=true``, so that the strategy's model has seen every answer) answered with
  the true labels;
- precalculus with every pool pair decided (224 concepts): every row's true label, one bulk.

For each it opens the map at 1280×800, presses nothing but the Map tab (the map fits its
connected part) and measures from the rendered page (``getBoundingClientRect``): the smallest
label height, overlapping labels, labels cut short, concepts with an edge out of view, the
layout time the page took (``data-layout-ms``: layout and drawing, not the download), and the
frames per second while the map is dragged for two seconds. Prints one line per project.
``tests/browser/test_map.py`` asserts the readability and the layout time on the same projects.

Run::

    python -m benchmarks.map_render --data ../shared/datasets/al-cpl
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

import httpx

from benchmarks.serving import Server, create_pool_project
from reasoning.data import load_domain

__all__ = ["MEASURE", "VIEWPORT", "answered_project", "decided_project", "main", "measure",
           "open_map", "pan_fps"]

ROOT = Path(__file__).resolve().parents[1]
VIEWPORT: Any = {"width": 1280, "height": 800}
TARGET_FPS = 30.0

# Runs in the page: every concept's label box, text and font, the map's box, and which
# concepts have a drawn edge.
MEASURE = """() => {
  const box = (r) => ({x: r.left, y: r.top, w: r.width, h: r.height});
  const labels = [...document.querySelectorAll('#nodes .node')].map((g) => {
    const t = g.querySelector('text');
    return {name: g.dataset.name, text: t.textContent, ...box(t.getBoundingClientRect()),
            font: parseFloat(getComputedStyle(t).fontSize) *
                  t.getScreenCTM().a};  // the font's size on screen, in px
  });
  const linked = new Set();
  for (const p of document.querySelectorAll('#edges path')) {
    linked.add(p.dataset.a); linked.add(p.dataset.b);
  }
  return {map: box(document.getElementById('map').getBoundingClientRect()), labels,
          linked: [...linked], layoutMs: Number(document.getElementById('map').dataset.layoutMs)};
}"""

# Runs in the page: counts animation frames until told to stop.
FRAMES = """() => {
  window.__frames = {count: 0, start: performance.now(), on: true};
  const tick = () => { if (!window.__frames.on) return; window.__frames.count++;
                       requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
}"""


def answered_project(client: httpx.Client, data: Path, domain_name: str, answers: int) -> int:
    """A pool project of ``domain_name`` whose first ``answers`` questions got the true label."""
    domain = load_domain(data, domain_name)
    truth = dict(zip(domain.pairs, domain.labels, strict=True))
    pid = create_pool_project(client, f"{domain_name}, {answers} answers", domain.concepts,
                              domain.pairs, domain.features)
    for _ in range(answers):
        page = client.get(f"/projects/{pid}/next", params={"fresh": "true"}, timeout=600)
        page.raise_for_status()
        queries = page.json()["queries"]
        if not queries:
            break
        a, b = queries[0]["a"], queries[0]["b"]
        label = "positive" if truth[(a, b)] else "negative"
        client.post(f"/projects/{pid}/labels",
                    json={"a": a, "b": b, "label": label}).raise_for_status()
    # the map's predicted edges: from a model trained on every answer
    client.get(f"/projects/{pid}/predictions", params={"fresh": "true", "limit": 1},
               timeout=600).raise_for_status()
    return pid


def decided_project(client: httpx.Client, data: Path, domain_name: str) -> int:
    """A pool project of ``domain_name`` with every pool pair labeled truly (one bulk)."""
    domain = load_domain(data, domain_name)
    pid = create_pool_project(client, f"{domain_name}, all decided", domain.concepts,
                              domain.pairs, domain.features)
    labels = [{"a": a, "b": b, "label": "positive" if value else "negative"}
              for (a, b), value in zip(domain.pairs, domain.labels, strict=True)]
    client.post(f"/projects/{pid}/labels/bulk", json={"labels": labels},
                timeout=600).raise_for_status()
    return pid


def open_map(page: Any, base_url: str, pid: int) -> None:
    """Open /ui/ on project ``pid`` by keyboard, then the Map tab; wait for the layout."""
    page.goto(f"{base_url}/ui/")
    page.keyboard.type(str(pid))
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.type("reader")
    page.keyboard.press("Enter")
    page.wait_for_selector("#connect-status >> text=labeling as")
    page.click(".tab[data-view=map]")
    page.wait_for_selector("#map-status >> text=laid out in", timeout=60_000)
    page.wait_for_timeout(100)  # the view's transform is applied at the next frame


def _overlap(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"])


def measure(page: Any) -> dict[str, Any]:
    """Readability of the map as rendered now (see the module's docstring)."""
    m = page.evaluate(MEASURE)
    box = m["map"]
    labels = {item["name"]: item for item in m["labels"]}
    linked = [labels[name] for name in m["linked"]]

    def inside(item: dict) -> bool:
        return (item["x"] >= box["x"] and item["y"] >= box["y"]
                and item["x"] + item["w"] <= box["x"] + box["w"]
                and item["y"] + item["h"] <= box["y"] + box["h"])

    shown = [item for item in m["labels"] if inside(item)]
    overlaps = [(a["name"], b["name"]) for i, a in enumerate(shown) for b in shown[i + 1:]
                if _overlap(a, b)]
    return {
        "linked": len(linked),
        "out_of_view": sorted(item["name"] for item in linked if not inside(item)),
        "cut": sorted(item["name"] for item in m["labels"] if item["text"] != item["name"]),
        "min_label_px": min((item["h"] for item in linked), default=0.0),
        "min_font_px": min((item["font"] for item in linked), default=0.0),
        "overlaps": overlaps,
        "layout_ms": m["layoutMs"],
    }


def pan_fps(page: Any, seconds: float = 2.0) -> float:
    """Frames per second while the map is dragged back and forth for ``seconds``."""
    box = page.locator("#map").bounding_box()
    x, y = box["x"] + 5, box["y"] + box["height"] - 5  # a corner: never on a concept
    page.evaluate(FRAMES)
    page.mouse.move(x, y)
    page.mouse.down()
    started = page.evaluate("performance.now()")
    step = 0
    while page.evaluate("performance.now()") - started < seconds * 1000:
        step += 1
        swing = abs(step % 40 - 20) / 20  # 0 → 1 → 0: back and forth
        page.mouse.move(x + 300 * swing, y - 100 * swing)
    page.mouse.up()
    frames = page.evaluate("(() => { const f = window.__frames; f.on = false; "
                           "return [f.count, performance.now() - f.start]; })()")
    return float(frames[0]) / (float(frames[1]) / 1000)


def run(base_url: str, data: Path) -> list[tuple[str, dict[str, Any]]]:
    """Build the two projects, open each map and measure it."""
    from playwright.sync_api import sync_playwright

    with httpx.Client(base_url=base_url, timeout=600) as client:
        mining = answered_project(client, data, "data_mining", 160)
        precalculus = decided_project(client, data, "precalculus")
    projects = [("data_mining, 160 answers", mining), ("precalculus, all decided", precalculus)]
    executable = shutil.which("chromium")
    if executable is None:
        raise SystemExit("Debian's chromium is not on PATH (apt-get install chromium)")
    results = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable)
        for name, pid in projects:
            page = browser.new_page(viewport=VIEWPORT)
            open_map(page, base_url, pid)
            figures = measure(page)
            figures["fps"] = pan_fps(page)
            results.append((name, figures))
            page.close()
        browser.close()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/datasets/al-cpl",
                        help="the AL-CPL folder (data_mining and precalculus)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        with Server(f"sqlite:///{Path(tmp) / 'bench.db'}", Path(tmp)) as server:
            results = run(server.base_url, args.data)
    for name, f in results:
        print(f"map of {name} at 1280x800 after Fit: {f['linked']} concepts with edges, "
              f"{len(f['out_of_view'])} out of view, {len(f['cut'])} names cut, smallest label "
              f"{f['min_label_px']:.1f} px high (font {f['min_font_px']:.1f} px), "
              f"{len(f['overlaps'])} overlaps; layout {f['layout_ms']:.0f} ms; panning "
              f"{f['fps']:.0f} frames/s (target >= {TARGET_FPS:.0f})")


if __name__ == "__main__":
    main()
