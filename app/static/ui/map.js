// sporal's map view: the prerequisite graph laid out in layers by dagre (vendored, see
// /ui/vendor/dagre/), drawn as SVG. Uses app.js's helpers ($, el, api, every, concepts);
// app.js calls installMapControls() and drawMap().
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const FONT_PX = 12, LINE_PX = 14, PAD_X = 6, PAD_Y = 3;
const WRAP_AT = 20;        // names longer than this may break onto a second line
const GRID_GAP = 8, GRID_TOP = 48, NODE_GAP = 5, EDGE_GAP = 4;
const MIN_K = 0.05, MAX_K = 4, FIT_MAX_K = 1.6;

let view = { x: 0, y: 0, k: 1 };
let graph = null;          // {succ, pred, edges, predicted, pos, connected, all, fitted}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

// ------------------------------------------------------------------------------ the graph
// The positive relation is transitively closed, so its reduction keeps (a, b) unless some c
// has a → c → b. A predicted edge is kept unless the decided and predicted edges already
// imply it by a longer path.
function reduce(names, positives, predicted) {
  const succ = new Map(names.map((n) => [n, new Set()]));
  for (const [a, b] of positives) succ.get(a).add(b);
  const pred = new Map(names.map((n) => [n, []]));
  const edges = [];
  for (const [a, b] of positives) {
    let implied = false;
    for (const c of succ.get(a)) if (c !== b && succ.get(c).has(b)) { implied = true; break; }
    if (!implied) { edges.push([a, b]); pred.get(b).push(a); }
  }
  const guess = new Map(names.map((n) => [n, new Set()]));
  for (const [a, b] of predicted) if (succ.has(a) && succ.has(b) && !succ.get(a).has(b)) guess.get(a).add(b);
  const reaches = (c, b) => succ.get(c).has(b) || guess.get(c).has(b);
  const kept = [];
  for (const [a, b] of predicted) {
    if (!guess.has(a) || !guess.get(a).has(b)) continue;
    const via = [...succ.get(a), ...guess.get(a)];
    if (!via.some((c) => c !== b && reaches(c, b))) kept.push([a, b]);
  }
  return { succ, pred, edges, predicted: kept };
}

// Long names break once, at the space, '_' or '-' nearest their middle (kept on line one),
// so that the full name is shown in a narrower box.
function splitName(name, wrap) {
  if (name.length <= wrap) return [name];
  let best = -1;
  for (let i = 1; i < name.length; i++) {
    if (" _-/".includes(name[i - 1]) && (best < 0 || Math.abs(i - name.length / 2) < Math.abs(best - name.length / 2))) best = i;
  }
  return best < 0 ? [name] : [name.slice(0, best), name.slice(best)];
}

let measureContext = null;
function textWidth(text) {
  if (!measureContext) {
    measureContext = document.createElement("canvas").getContext("2d");
    measureContext.font = `${FONT_PX}px ${getComputedStyle($("map")).fontFamily}`;
  }
  return measureContext.measureText(text).width;
}

function box(name, wrap) {
  const lines = splitName(name, wrap);
  const width = Math.ceil(Math.max(...lines.map(textWidth))) + 2 * PAD_X + 2;
  return { lines, width, height: lines.length * LINE_PX + 2 * PAD_Y + 2 };
}

// Ranks by longest path from the concepts with no prerequisite; a concept that nothing
// depends on may sit further right (spread over `spread` more ranks, to the emptiest one),
// which dagre honours through the minimum length of its incoming edges.
function minLengths(nodes, edges, pred, spread) {
  const rank = new Map();
  const depth = (n) => {
    if (!rank.has(n)) { rank.set(n, 0); rank.set(n, pred.get(n).reduce((m, p) => Math.max(m, depth(p) + 1), 0)); }
    return rank.get(n);
  };
  nodes.forEach(depth);
  const out = new Set(edges.map(([a]) => a));
  const count = new Map();
  for (const n of nodes) if (out.has(n)) count.set(rank.get(n), (count.get(rank.get(n)) || 0) + 1);
  const target = new Map();
  for (const n of [...nodes].filter((m) => !out.has(m)).sort((m, n) => rank.get(m) - rank.get(n))) {
    let best = rank.get(n);
    for (let r = best; r <= rank.get(n) + spread; r++) if ((count.get(r) || 0) < (count.get(best) || 0)) best = r;
    count.set(best, (count.get(best) || 0) + 1);
    target.set(n, best);
  }
  return ([a, b]) => (target.has(b) ? Math.max(1, target.get(b) - rank.get(a)) : 1);
}

function dagreLayout(nodes, edges, pred, wrap, spread) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: NODE_GAP, ranksep: 40, edgesep: EDGE_GAP, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) g.setNode(n, box(n, wrap));
  const minlen = minLengths(nodes, edges.filter(([, , p]) => !p), pred, spread);
  for (const [a, b, predicted] of edges) g.setEdge(a, b, { minlen: predicted ? 1 : minlen([a, b]), weight: predicted ? 1 : 2 });
  dagre.layout(g);
  return g;
}

// dagre's coordinates align each concept with its neighbours, which leaves tall, mostly empty
// columns. Keeping its ranks and its order in each column (crossings minimised), the columns
// are pulled together: y' = max(s·y, the item above's bottom + a gap), for the concepts and
// the long edges' passages alike; s = 1 is dagre's drawing, s = 0 stacks each column. A long
// edge crosses a column of concepts straight, in its own slot between two of them; its bends
// between columns (dagre's half ranks) are dropped.
function compacted(g, s) {
  const columns = new Map(), half = new Map();
  const add = (key, item) => (columns.get(key) || columns.set(key, []).get(key)).push(item);
  const pos = new Map(), routes = new Map();
  for (const n of g.nodes()) {
    const v = g.node(n), p = { lines: v.lines, width: v.width, height: v.height, x: v.x - v.width / 2, y: 0 };
    const key = Math.round(v.x);
    pos.set(n, p);
    half.set(key, Math.max(half.get(key) || 0, v.width / 2));
    add(key, { y: v.y - v.height / 2, height: v.height, set: (y) => { p.y = y; } });
  }
  for (const e of g.edges()) {
    const passages = [];
    for (const q of g.edge(e).points.slice(1, -1)) {
      const key = Math.round(q.x);
      if (!half.has(key)) continue;
      const passage = { x: q.x, y: 0, half: half.get(key) };
      passages.push(passage);
      add(key, { y: q.y, height: 0, set: (y) => { passage.y = y; } });
    }
    routes.set(pairKey(e.v, e.w), passages);
  }
  let height = 0;
  for (const items of columns.values()) {
    items.sort((m, n) => m.y - n.y);
    let bottom = -Infinity, above = null;
    for (const item of items) {  // passages bundle (2 units apart); a concept keeps its distance
      const y = Math.max(s * item.y, bottom + (above && !above.height && !item.height ? 2 : NODE_GAP));
      item.set(y);
      bottom = y + item.height;
      above = item;
    }
    height = Math.max(height, bottom);
  }
  return { pos, routes, width: g.graph().width, height };
}

// Several layouts and squeezes, one kept: the most faithful to dagre's drawing among those that
// Fit shows (nearly) as large as the largest in the map's box.
function bestLayout(nodes, edges, pred, area) {
  const tries = nodes.length > 150 ? [[Infinity, 0], [WRAP_AT, 1]] : [[Infinity, 0], [Infinity, 1], [WRAP_AT, 0], [WRAP_AT, 1]];
  const options = [];
  for (const [wrap, spread] of tries) {
    const g = dagreLayout(nodes, edges, pred, wrap, spread);
    for (const s of [1, 0.6, 0.35, 0.15, 0]) {
      const c = compacted(g, s);
      options.push({ c, s, k: Math.min(area.width / Math.max(1, c.width), area.height / Math.max(1, c.height)) });
    }
  }
  const good = Math.min(FIT_MAX_K, 0.95 * Math.max(...options.map((o) => o.k)));
  return options.filter((o) => o.k >= good).sort((m, n) => n.s - m.s || n.k - m.k)[0].c;
}

// The concepts with no edge: a compact grid under the graph, rows packed to its width.
function gridLayout(names, top, width) {
  const pos = new Map();
  let x = 0, y = top, rowHeight = 0, right = 0;
  for (const n of [...names].sort((m, o) => m.localeCompare(o))) {
    const b = box(n, WRAP_AT);
    if (x > 0 && x + b.width > width) { x = 0; y += rowHeight + GRID_GAP; rowHeight = 0; }
    pos.set(n, { ...b, x, y });
    x += b.width + GRID_GAP;
    rowHeight = Math.max(rowHeight, b.height);
    right = Math.max(right, x - GRID_GAP);
  }
  return { pos, bottom: y + rowHeight, right };
}

function layout(names, positives, predicted, area) {
  const reduced = reduce(names, positives, predicted);
  const drawn = [...reduced.edges.map(([a, b]) => [a, b, false]), ...reduced.predicted.map(([a, b]) => [a, b, true])];
  const linked = new Set(drawn.flatMap(([a, b]) => [a, b]));
  const connectedNames = names.filter((n) => linked.has(n));
  const pos = new Map(), routes = new Map();
  let connected = null;
  if (connectedNames.length) {
    const c = bestLayout(connectedNames, drawn, reduced.pred, area);
    for (const [n, p] of c.pos) pos.set(n, p);
    for (const [key, bends] of c.routes) routes.set(key, bends);
    connected = { x: 0, y: 0, width: c.width, height: c.height };
  }
  const alone = names.filter((n) => !linked.has(n));
  const top = connected ? connected.height + GRID_TOP : 0;
  const grid = gridLayout(alone, top, Math.max(connected ? connected.width : 0, 900));
  for (const [n, p] of grid.pos) pos.set(n, p);
  const bottom = alone.length ? grid.bottom : connected ? connected.height : 0;
  const all = { x: 0, y: 0, width: Math.max(connected ? connected.width : 0, grid.right), height: bottom };
  return { ...reduced, pos, routes, connected, all, alone: alone.length, gridTop: top };
}

// ------------------------------------------------------------------------------ drawing
async function drawMap() {
  const status = $("map-status");
  status.textContent = "Loading the map…";
  sizeMap();
  const threshold = Number($("threshold").value) || 0.8;
  try {
    const [positives, predicted] = await Promise.all([
      every("/labels?source=all&label=positive"),
      every(`/predictions?min_probability=${threshold}`),
    ]);
    const started = performance.now();
    // From the consistent map: predicted pairs, and pairs consistency made positive (forced).
    const guessed = predicted.items
      .filter((p) => (p.source === "predicted" || p.source === "forced") && p.label === "positive")
      .map((p) => [p.a, p.b]);
    const area = $("map").getBoundingClientRect();
    graph = layout([...concepts.keys()], positives.items.map((p) => [p.a, p.b]), guessed,
                   { width: Math.max(200, area.width - 24), height: Math.max(200, area.height - 24) });
    // how sure each decided pair is, and whether it is in dispute (an open disagreement)
    graph.about = new Map(positives.items.map((p) => [pairKey(p.a, p.b), p]));
    graph.contested = graph.edges.filter(([a, b]) => graph.about.get(pairKey(a, b))?.contested).length;
    render();
    graph.fitted = null;
    fit();
    const ms = Math.round(performance.now() - started);
    $("map").dataset.layoutMs = String(ms);
    status.textContent = `${plural(concepts.size, "concept")}, ${plural(graph.edges.length, "edge")} of the reduction, ` +
      (graph.contested ? `${plural(graph.contested, "contested edge")} (red), ` : "") +
      `${plural(graph.predicted.length, "predicted edge")} (p ≥ ${threshold})` +
      (graph.alone ? `, ${plural(graph.alone, "concept")} without edges below` : "") +
      (predicted.model ? "" : " — no prediction model yet") + ` — laid out in ${ms} ms`;
  } catch (error) {
    status.textContent = `The map could not be loaded: ${error.message}`;
  }
}

function edgePath(a, b) {
  const p = graph.pos.get(a), r = graph.pos.get(b);
  const points = [{ x: p.x + p.width, y: p.y + p.height / 2 }];
  for (const c of graph.routes.get(pairKey(a, b))) points.push({ x: c.x - c.half, y: c.y }, { x: c.x + c.half, y: c.y });
  points.push({ x: r.x - 1, y: r.y + r.height / 2 });
  const f = (v) => v.toFixed(1);
  let d = `M${f(points[0].x)},${f(points[0].y)}`;
  for (let i = 1; i < points.length; i++) {  // across a gap a smooth S, through a column straight
    const from = points[i - 1], to = points[i], dx = (to.x - from.x) / 2;
    d += i % 2 ? ` C${f(from.x + dx)},${f(from.y)} ${f(to.x - dx)},${f(to.y)} ${f(to.x)},${f(to.y)}` : ` L${f(to.x)},${f(to.y)}`;
  }
  return d;
}

function nodeElement(name, p) {
  const g = svg("g", { class: "node", transform: `translate(${p.x},${p.y})`, tabindex: "0",
                       role: "button", "aria-label": name, "data-name": name });
  const title = svg("title");
  title.textContent = name;
  const text = svg("text", { x: PAD_X, y: PAD_Y + FONT_PX });
  p.lines.forEach((line, i) => {
    const span = svg("tspan", { x: PAD_X, dy: i ? LINE_PX : 0 });
    span.textContent = line;
    text.append(span);
  });
  g.append(svg("rect", { width: p.width, height: p.height, rx: 4 }), title, text);
  g.addEventListener("click", () => select(name));
  g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(name); } });
  return g;
}

function edgeElement([a, b], predicted) {
  const about = predicted ? null : graph.about.get(pairKey(a, b));
  const cls = predicted ? "edge predicted" : about?.contested ? "edge contested" : "edge";
  const path = svg("path", { d: edgePath(a, b), class: cls, "data-a": a, "data-b": b,
                             "marker-end": predicted ? "url(#arrow-predicted)" : "url(#arrow)" });
  const title = svg("title");
  title.textContent = predicted ? `${a} → ${b}: predicted` : `${a} → ${b}` +
    (about && about.confidence != null ? `: confidence ${Math.round(about.confidence * 100)} %` : "") +
    (about?.contested ? ", contested (an open disagreement)" : "");
  path.append(title);
  return path;
}

function render() {
  $("edges").replaceChildren(...graph.edges.map((e) => edgeElement(e, false)),
                             ...graph.predicted.map((e) => edgeElement(e, true)));
  const heading = [];
  if (graph.alone) {
    const t = svg("text", { x: 0, y: graph.gridTop - 14, class: "grid-title" });
    t.textContent = `${plural(graph.alone, "concept")} without edges`;
    heading.push(t);
  }
  $("nodes").replaceChildren(...heading, ...[...graph.pos].map(([name, p]) => nodeElement(name, p)));
}

function reach(name, next) {
  const seen = new Set(), stack = [name];
  while (stack.length) for (const n of next(stack.pop())) if (!seen.has(n)) { seen.add(n); stack.push(n); }
  return seen;
}

function select(name) {
  const direct = graph.pred.get(name);
  const dependants = graph.edges.filter(([a]) => a === name).map(([, b]) => b);
  const allPre = reach(name, (n) => graph.pred.get(n));
  const allDep = graph.succ.get(name);
  for (const g of $("nodes").querySelectorAll(".node")) {
    const n = g.dataset.name;
    g.classList.toggle("selected", n === name);
    g.classList.toggle("prereq", allPre.has(n));
    g.classList.toggle("dependant", allDep.has(n));
  }
  const up = new Set([...allPre, name]), down = new Set([...allDep, name]);
  for (const p of $("edges").children) {
    const { a, b } = p.dataset;
    const lit = !p.classList.contains("predicted") && ((up.has(a) && up.has(b)) || (down.has(a) && down.has(b)));
    p.classList.toggle("lit", lit);
    p.setAttribute("marker-end", lit ? "url(#arrow-lit)" : p.classList.contains("predicted") ? "url(#arrow-predicted)" : "url(#arrow)");
  }
  const list = (id, items) => items.length
    ? el("ul", { id }, ...[...items].sort().map((n) => el("li", {},
        el("button", { type: "button", class: "link", onclick: () => { select(n); centre(n); } }, n))))
    : el("p", { id, class: "muted" }, "none");
  const description = concepts.get(name);
  $("concept").replaceChildren(
    el("button", { type: "button", class: "close", "aria-label": "Close", onclick: unselect }, "×"),
    el("h3", { id: "concept-name" }, name),
    ...(description ? [el("p", {}, description)] : []),
    el("h4", {}, `Prerequisites (${direct.length} direct, ${allPre.size} in all)`), list("prerequisites", direct),
    el("h4", {}, `Depends on it (${dependants.length} direct, ${allDep.size} in all)`), list("dependants", dependants));
  $("concept").hidden = false;
}

function unselect() {
  $("concept").hidden = true;
  for (const g of $("nodes").querySelectorAll(".node")) g.classList.remove("selected", "prereq", "dependant");
  for (const p of $("edges").children) {
    p.classList.remove("lit");
    p.setAttribute("marker-end", p.classList.contains("predicted") ? "url(#arrow-predicted)" : "url(#arrow)");
  }
}

// ------------------------------------------------------------------------------ the view
let pending = false;
function applyView() {  // at most once a frame
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    $("viewport").setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
  });
}

function zoom(factor, cx, cy) {
  const k = Math.min(MAX_K, Math.max(MIN_K, view.k * factor));
  view = { k, x: cx - ((cx - view.x) * k) / view.k, y: cy - ((cy - view.y) * k) / view.k };
  applyView();
}

// + and -: about the centre of the drawn content that is in view (of all of it when none is).
function zoomContent(factor) {
  if (!graph) return;
  const size = $("map").getBoundingClientRect();
  const b = graph.connected || graph.all;
  let x0 = view.x + b.x * view.k, y0 = view.y + b.y * view.k;
  let x1 = x0 + b.width * view.k, y1 = y0 + b.height * view.k;
  if (x1 > 0 && y1 > 0 && x0 < size.width && y0 < size.height) {
    x0 = Math.max(0, x0); y0 = Math.max(0, y0); x1 = Math.min(size.width, x1); y1 = Math.min(size.height, y1);
  }
  zoom(factor, (x0 + x1) / 2, (y0 + y1) / 2);
}

function fitTo(b) {
  const size = $("map").getBoundingClientRect();
  if (!b || !size.width) return;
  const margin = 12;
  const k = Math.min(FIT_MAX_K, (size.width - 2 * margin) / Math.max(1, b.width), (size.height - 2 * margin) / Math.max(1, b.height));
  view = { k, x: (size.width - b.width * k) / 2 - b.x * k, y: margin - b.y * k };
  applyView();
}

// Fit shows the connected part first; pressed again, everything (with the grid).
function fit() {
  if (!graph) return;
  const target = graph.connected && graph.fitted !== "connected" ? "connected" : "all";
  fitTo(target === "connected" ? graph.connected : graph.all);
  graph.fitted = target;
}

function centre(name) {
  const p = graph && graph.pos.get(name);
  if (!p) return;
  const size = $("map").getBoundingClientRect();
  const k = Math.max(view.k, 1);
  view = { k, x: size.width / 2 - (p.x + p.width / 2) * k, y: size.height / 2 - (p.y + p.height / 2) * k };
  applyView();
}

function find(event) {
  event.preventDefault();
  const wanted = $("map-search").value.trim();
  const name = graph && ([...graph.pos.keys()].find((n) => n === wanted) ||
    [...graph.pos.keys()].find((n) => n.toLowerCase().includes(wanted.toLowerCase())));
  if (!wanted || !name) { $("map-status").textContent = `No concept named “${wanted}”.`; return; }
  select(name);
  centre(name);
  document.querySelector(`#nodes .node[data-name="${CSS.escape(name)}"]`).focus({ preventScroll: true });
}

// The map takes the window's height below its toolbar.
function sizeMap() {
  const map = $("map");
  const top = map.getBoundingClientRect().top + window.scrollY;
  map.style.height = `${Math.max(320, window.innerHeight - top - 12)}px`;
}

// ------------------------------------------------------------------------------ export
const EXPORT_CSS = `text { font: ${FONT_PX}px sans-serif; fill: #1b1f24; }
.node rect { fill: #eef2f7; stroke: #8c959f; } .grid-title { fill: #57606a; }
.edge { fill: none; stroke: #6e7781; stroke-width: 1.2; }
.edge.predicted { stroke: #0a58ca; stroke-dasharray: 5 4; opacity: .7; }
.arrow { fill: #6e7781; } .arrow.predicted { fill: #0a58ca; } .arrow.lit { fill: #ff9f1c; }`;

function exportText() {
  const b = graph.all, m = 10;
  const out = svg("svg", { xmlns: SVG_NS, viewBox: `${b.x - m} ${b.y - m} ${b.width + 2 * m} ${b.height + 2 * m}`,
                           width: Math.ceil(b.width + 2 * m), height: Math.ceil(b.height + 2 * m) });
  const style = svg("style");
  style.textContent = EXPORT_CSS;
  const content = $("viewport").cloneNode(true);
  content.removeAttribute("transform");
  content.removeAttribute("id");
  for (const n of content.querySelectorAll("[tabindex]")) n.removeAttribute("tabindex");
  out.append(style, $("map").querySelector("defs").cloneNode(true), content);
  return new XMLSerializer().serializeToString(out);
}

function download(blob, name) {
  const link = el("a", { href: URL.createObjectURL(blob), download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}

function exportSvg() {
  if (graph) download(new Blob([exportText()], { type: "image/svg+xml" }), "sporal-map.svg");
}

function exportPng() {
  if (!graph) return;
  const image = new Image();
  image.addEventListener("load", () => {
    const scale = Math.min(2, 16000 / Math.max(image.width, image.height));
    const canvas = el("canvas", { width: Math.ceil(image.width * scale), height: Math.ceil(image.height * scale) });
    const context = canvas.getContext("2d");
    context.fillStyle = "#fff";
    context.fillRect(0, 0, canvas.width, canvas.height);
    context.drawImage(image, 0, 0, canvas.width, canvas.height);
    canvas.toBlob((blob) => download(blob, "sporal-map.png"), "image/png");
  });
  // a data: URL: the page's CSP lets images come from the service and from data: only
  image.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(exportText())}`;
}

// ------------------------------------------------------------------------------ controls
function installMapControls() {
  const map = $("map");
  map.addEventListener("wheel", (e) => {
    e.preventDefault();
    const b = map.getBoundingClientRect();
    zoom(Math.pow(1.0015, -e.deltaY), e.clientX - b.left, e.clientY - b.top);
  }, { passive: false });
  let drag = null;
  map.addEventListener("pointerdown", (e) => {
    if (e.target.closest(".node")) return;
    drag = { x: e.clientX - view.x, y: e.clientY - view.y };
    map.setPointerCapture(e.pointerId);
    map.classList.add("dragging");
  });
  map.addEventListener("pointermove", (e) => {
    if (!drag) return;
    view.x = e.clientX - drag.x; view.y = e.clientY - drag.y;
    applyView();
  });
  map.addEventListener("pointerup", () => { drag = null; map.classList.remove("dragging"); });
  map.addEventListener("keydown", (e) => {
    if (e.target !== map && !e.target.closest(".node")) return;  // Enter on a concept selects it
    const step = 60, moves = { ArrowLeft: [step, 0], ArrowRight: [-step, 0], ArrowUp: [0, step], ArrowDown: [0, -step] };
    if (moves[e.key]) { view.x += moves[e.key][0]; view.y += moves[e.key][1]; applyView(); }
    else if (e.key === "+" || e.key === "=") zoomContent(1.25);
    else if (e.key === "-") zoomContent(0.8);
    else if (e.key === "0") fit();
    else return;
    e.preventDefault();
  });
  $("zoom-in").addEventListener("click", () => zoomContent(1.25));
  $("zoom-out").addEventListener("click", () => zoomContent(0.8));
  $("zoom-fit").addEventListener("click", fit);
  $("map-reload").addEventListener("click", drawMap);
  $("threshold").addEventListener("change", drawMap);
  $("map-find").addEventListener("submit", find);
  $("export-svg").addEventListener("click", exportSvg);
  $("export-png").addEventListener("click", exportPng);
  window.addEventListener("resize", () => { if (!$("view-map").hidden) sizeMap(); });
}
