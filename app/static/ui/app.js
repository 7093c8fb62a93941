// sporal's annotator page: labeling, reasons, progress and the map, over the REST API of the
// service that serves it. No build step, no library; the project key lives in sessionStorage.
"use strict";

const $ = (id) => document.getElementById(id);
const SESSION = "sporal.session";
const POLL_MS = 3000;

let session = JSON.parse(sessionStorage.getItem(SESSION) || "null");
let concepts = new Map();          // name -> description
let current = null;                // the question on screen: {a, b}
let skipped = new Set();           // "a\u0000b" of questions skipped in this tab
let undoStack = [];                // labels this tab asserted: {id, a, b}
let busy = false;
let pollTimer = null;

// ------------------------------------------------------------------------------ the API
async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (session.key) headers["X-API-Key"] = session.key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`../projects/${session.pid}${path}`, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = response.status === 204 ? null : await response.json();
  if (!response.ok) {
    const error = new Error((data && (data.detail || data.title)) || response.statusText);
    error.status = response.status;
    error.problem = data;
    throw error;
  }
  return data;
}

async function every(path) {  // all items of a paginated listing
  const items = [];
  const join = path.includes("?") ? "&" : "?";
  for (let offset = 0; ; offset += 10000) {
    const page = await api("GET", `${path}${join}limit=10000&offset=${offset}`);
    items.push(...page.items);
    if (items.length >= page.total || page.items.length === 0) return { ...page, items };
  }
}

const q = encodeURIComponent;
const pairKey = (a, b) => `${a}\u0000${b}`;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

function labelText(item) {
  return `${item.a} ${item.label === "positive" ? "→" : "↛"} ${item.b}`;
}

function showError(target, error) {
  target.replaceChildren(el("p", { class: "error" }, `Error: ${error.message}`));
}

// ------------------------------------------------------------------------------ session
async function connect(event) {
  event.preventDefault();
  session = { pid: Number($("pid").value), key: $("key").value, annotator: $("annotator").value.trim() };
  await open();
}

async function open() {
  const status = $("connect-status");
  try {
    const project = await api("GET", "");
    sessionStorage.setItem(SESSION, JSON.stringify(session));
    status.textContent = `Project ${project.id}: ${project.name} — labeling as ${session.annotator}`;
  } catch (error) {
    status.textContent = `Cannot open project ${session.pid}: ${error.message}`;
    return;
  }
  concepts = new Map((await every("/concepts")).items.map((c) => [c.name, c.description || ""]));
  $("concept-names").replaceChildren(...[...concepts.keys()].map((n) => el("option", { value: n })));
  skipped = new Set();
  undoStack = [];
  show(location.hash.slice(1) || "label");
  if (!$("view-label").hidden) $("question").focus();  // the keys answer from here
}

// ------------------------------------------------------------------------------ views
function show(view) {
  if (!["label", "progress", "map"].includes(view)) view = "label";
  for (const tab of document.querySelectorAll(".tab")) {
    if (tab.dataset.view === view) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${view}`;
  if (history.replaceState) history.replaceState(null, "", `#${view}`);
  clearInterval(pollTimer);
  if (!session) return;
  if (view === "label" && !current) nextQuestion();
  if (view === "progress") { refreshProgress(); pollTimer = setInterval(refreshProgress, POLL_MS); }
  if (view === "map") drawMap();
}

// ------------------------------------------------------------------------------ labeling
async function nextQuestion() {
  const k = Math.min(100, skipped.size + 1);
  let answer;
  try {
    answer = await api("GET", `/next?annotator=${q(session.annotator)}&k=${k}`);
  } catch (error) {
    showError($("outcome"), error);
    return;
  }
  let pick = answer.queries.find((x) => !skipped.has(pairKey(x.a, x.b)));
  if (!pick && answer.queries.length) { skipped.clear(); pick = answer.queries[0]; }
  $("undecided").textContent = `— ${answer.undecided} pool pairs undecided`;
  setQuestion(pick || null);
}

function setQuestion(pair) {
  current = pair ? { a: pair.a, b: pair.b } : null;
  const box = $("question");
  box.classList.toggle("done", !current);
  $("qa").textContent = current ? current.a : "—";
  $("qb").textContent = current ? current.b : "—";
  $("qa-desc").textContent = current ? concepts.get(current.a) || "(no description)" : "";
  $("qb-desc").textContent = current ? concepts.get(current.b) || "(no description)" : "";
  $("prediction").textContent = current ? "prediction: …" : "Nothing left to ask: every pool pair is decided.";
  for (const id of ["yes", "no", "skip"]) $(id).disabled = !current;
  box.dataset.pair = current ? `${current.a} | ${current.b}` : "";
  if (current) showPrediction(current);
}

async function showPrediction(pair) {
  try {
    const status = await api("GET", `/pairs/status?a=${q(pair.a)}&b=${q(pair.b)}`);
    if (current !== pair) return;
    const model = status.model;
    const p = status.prediction == null ? "0.5 (no model yet)" : status.prediction.toFixed(2);
    const behind = model ? ` — ${model.name} on ${model.trained_on} labeled pairs` +
      (model.labels_behind ? `, ${model.labels_behind} labels behind` : "") : "";
    $("prediction").textContent = `prediction: p(prerequisite) = ${p}${behind}`;
  } catch (error) {
    if (current === pair) $("prediction").textContent = `prediction unavailable: ${error.message}`;
  }
}

async function answer(label) {
  if (!current || busy) return;
  busy = true;
  const pair = current;
  try {
    const created = await api("POST", "/labels", { a: pair.a, b: pair.b, label, annotator: session.annotator });
    $("refusal").hidden = true;
    if (created.id) undoStack.push({ id: created.id, a: pair.a, b: pair.b });
    showDecided(created);
    skipped.delete(pairKey(pair.a, pair.b));
    await nextQuestion();
  } catch (error) {
    if (error.problem && error.problem.type === "/problems/contradiction") showRefusal(error.problem);
    else showError($("outcome"), error);
  } finally {
    busy = false;
  }
}

function showDecided(created) {
  const n = created.newly_decided.positive + created.newly_decided.negative;
  const head = el("p", {}, `Recorded ${labelText(created)}. `, el("strong", { id: "decided-count" }, `+${n} decided`));
  const list = el("ul", { id: "decided-list" }, ...created.decided.map((d) =>
    el("li", {}, el("button", { type: "button", class: "link", onclick: () => explain(d.a, d.b) }, labelText(d)))));
  const details = el("details", {}, el("summary", {}, `What this answer decided (${created.decided.length} inferred)`), list);
  $("outcome").replaceChildren(head, ...(created.decided.length ? [details] : []));
}

function showRefusal(problem) {
  const box = $("refusal");
  const items = problem.proof.map((ref) => el("li", {}, `${labelText(ref)} (label #${ref.id}) `,
    el("button", { type: "button", onclick: () => retract(ref) }, `Retract #${ref.id}`)));
  box.replaceChildren(
    el("h3", {}, `Refused: ${problem.a} → ${problem.b} cannot be ${problem.label}`),
    el("p", {}, "These asserted labels force the opposite. Retract one of them to answer again:"),
    el("ul", { id: "proof" }, ...items),
    ...(problem.chains || []).map((c) => el("p", { class: "muted" }, `chain: ${c.join(" → ")}`)));
  box.hidden = false;
  box.querySelector("button").focus();
}

async function retract(ref) {
  try {
    const gone = await api("DELETE", `/labels/${ref.id}`);
    undoStack = undoStack.filter((u) => u.id !== ref.id);
    $("refusal").replaceChildren(el("p", {},
      `Retracted ${labelText(gone)}: ${gone.undecided} pairs undecided. Answer the question again (y / n).`));
    $("yes").focus();
  } catch (error) {
    showError($("refusal"), error);
  }
}

function skip() {
  if (!current || busy) return;
  skipped.add(pairKey(current.a, current.b));
  $("outcome").replaceChildren(el("p", {}, `Skipped ${current.a} / ${current.b}.`));
  nextQuestion();
}

async function undo() {
  const last = undoStack.pop();
  if (!last || busy) { if (last) undoStack.push(last); return; }
  busy = true;
  try {
    const gone = await api("DELETE", `/labels/${last.id}`);
    $("outcome").replaceChildren(el("p", { id: "undone" },
      `Undone: ${labelText(gone)} (${gone.undecided} pairs undecided again).`));
    $("refusal").hidden = true;
    setQuestion({ a: last.a, b: last.b });
  } catch (error) {
    showError($("outcome"), error);
  } finally {
    busy = false;
  }
}

// ------------------------------------------------------------------------------ reasons
async function explain(a, b) {
  $("why-a").value = a;
  $("why-b").value = b;
  const target = $("reason");
  try {
    const status = await api("GET", `/pairs/status?a=${q(a)}&b=${q(b)}`);
    if (status.status === "undecided") {
      target.replaceChildren(el("p", {}, `${a} / ${b} is undecided.`));
      return;
    }
    target.replaceChildren(
      el("p", {}, `${a} ${status.status === "positive" ? "→" : "↛"} ${b}: ${status.status}, ${status.source}, because of`),
      el("ul", { id: "reason-proof" }, ...status.proof.map((ref) =>
        el("li", {}, `${labelText(ref)} (label #${ref.id})`))),
      ...status.chains.map((c) => el("p", { class: "muted" }, `chain: ${c.join(" → ")}`)));
  } catch (error) {
    showError(target, error);
  }
  target.scrollIntoView({ block: "nearest" });
}

// ------------------------------------------------------------------------------ progress
async function refreshProgress() {
  try {
    const [project, people] = await Promise.all([api("GET", ""), api("GET", "/annotators")]);
    const c = project.counts;
    const decided = c.pool_pairs - c.undecided_pool_pairs;
    $("decided-text").textContent = `${decided} of ${c.pool_pairs}` +
      (c.pool_pairs ? ` (${Math.round((100 * decided) / c.pool_pairs)} %)` : "");
    $("decided-bar").max = Math.max(1, c.pool_pairs);
    $("decided-bar").value = decided;
    $("asked").textContent = c.asserted_labels;
    $("inferred").textContent = `${c.inferred_positive} / ${c.inferred_negative}`;
    $("bounds").textContent = `between ${project.query_bounds.lower} and ${project.query_bounds.upper}`;
    $("n-concepts").textContent = c.concepts;
    $("annotators").replaceChildren(...people.items.map((p) => el("tr", {},
      el("th", { scope: "row" }, p.annotator ?? "(none)"),
      ...[p.answered, p.accepted, p.retracted, p.refused].map((v) => el("td", {}, String(v))))));
    $("progress-updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    $("progress-updated").textContent = `update failed: ${error.message}`;
  }
}

// ------------------------------------------------------------------------------ the map
const SVG = "http://www.w3.org/2000/svg";
const NODE_W = 170, NODE_H = 22, COL = 240, ROW = 30;
let view = { x: 0, y: 0, k: 1 };
let graph = null;

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

// The positive relation is transitively closed, so its reduction keeps (a, b) unless some c
// has a → c → b. Layers: longest path from the concepts with no prerequisite.
function layout(names, positives) {
  const succ = new Map(names.map((n) => [n, new Set()]));
  for (const [a, b] of positives) succ.get(a).add(b);
  const pred = new Map(names.map((n) => [n, []]));
  const edges = [];
  for (const [a, b] of positives) {
    let implied = false;
    for (const c of succ.get(a)) if (c !== b && succ.get(c).has(b)) { implied = true; break; }
    if (!implied) { edges.push([a, b]); pred.get(b).push(a); }
  }
  const layer = new Map();
  const depth = (n) => {  // the relation is acyclic: a strict order
    if (!layer.has(n)) layer.set(n, pred.get(n).reduce((m, p) => Math.max(m, depth(p) + 1), 0));
    return layer.get(n);
  };
  names.forEach(depth);
  const columns = [];
  for (const n of names) (columns[layer.get(n)] ||= []).push(n);
  const pos = new Map();
  columns.forEach((column, i) => {  // order each layer by the mean row of its prerequisites
    const key = (n) => { const ps = pred.get(n).map((p) => pos.get(p).row);
      return ps.length ? ps.reduce((s, r) => s + r, 0) / ps.length : -1; };
    column.sort((m, n) => key(m) - key(n) || m.localeCompare(n));
    column.forEach((n, row) => pos.set(n, { row, x: i * COL, y: row * ROW }));
  });
  return { succ, pred, edges, pos };
}

async function drawMap() {
  const status = $("map-status");
  status.textContent = "Loading the map…";
  const threshold = Number($("threshold").value) || 0.8;
  try {
    const [positives, predicted] = await Promise.all([
      every("/labels?source=all&label=positive"),
      every(`/predictions?min_probability=${threshold}`),
    ]);
    const names = [...concepts.keys()];
    graph = layout(names, positives.items.map((p) => [p.a, p.b]));
    // From the consistent map: predicted pairs, and pairs consistency made positive (forced).
    graph.predicted = predicted.items
      .filter((p) => (p.source === "predicted" || p.source === "forced") && p.label === "positive")
      .map((p) => [p.a, p.b]);
    render();
    fit();
    status.textContent = `${names.length} concepts, ${graph.edges.length} edges of the reduction, ` +
      `${graph.predicted.length} predicted edges (p ≥ ${threshold})` +
      (predicted.model ? "" : " — no prediction model yet");
  } catch (error) {
    status.textContent = `The map could not be loaded: ${error.message}`;
  }
}

function edgePath(a, b) {
  const p = graph.pos.get(a), r = graph.pos.get(b);
  const x1 = p.x + NODE_W, y1 = p.y + NODE_H / 2, x2 = r.x, y2 = r.y + NODE_H / 2;
  const dx = Math.max(40, Math.abs(x2 - x1) / 2);
  return `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`;
}

function render() {
  const edges = $("edges"), nodes = $("nodes");
  const drawn = [...graph.edges.map((e) => [e, "edge"]), ...graph.predicted.map((e) => [e, "edge predicted"])];
  edges.replaceChildren(...drawn.map(([[a, b], cls]) =>
    svg("path", { d: edgePath(a, b), class: cls, "data-a": a, "data-b": b })));
  nodes.replaceChildren(...[...graph.pos].map(([name, p]) => {
    const g = svg("g", { class: "node", transform: `translate(${p.x},${p.y})`, tabindex: "0",
                         role: "button", "aria-label": name, "data-name": name });
    const title = svg("title");
    title.textContent = name;
    const text = svg("text", { x: 6, y: 15 });
    text.textContent = name.length > 24 ? `${name.slice(0, 23)}…` : name;
    g.append(svg("rect", { width: NODE_W, height: NODE_H, rx: 4 }), title, text);
    g.addEventListener("click", () => select(name));
    g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(name); } });
    return g;
  }));
}

function ancestors(name, next) {
  const seen = new Set(), stack = [name];
  while (stack.length) for (const n of next(stack.pop())) if (!seen.has(n)) { seen.add(n); stack.push(n); }
  return seen;
}

function select(name) {
  const direct = graph.pred.get(name);
  const dependants = graph.edges.filter(([a]) => a === name).map(([, b]) => b);
  const allPre = ancestors(name, (n) => graph.pred.get(n));
  const allDep = graph.succ.get(name);
  for (const g of $("nodes").children) {
    const n = g.dataset.name;
    g.classList.toggle("selected", n === name);
    g.classList.toggle("prereq", allPre.has(n));
    g.classList.toggle("dependant", allDep.has(n));
  }
  for (const p of $("edges").children) p.classList.toggle("lit", p.dataset.a === name || p.dataset.b === name);
  const list = (id, items) => items.length
    ? el("ul", { id }, ...[...items].sort().map((n) => el("li", {},
        el("button", { type: "button", class: "link", onclick: () => select(n) }, n))))
    : el("p", { id, class: "muted" }, "none");
  $("concept").replaceChildren(
    el("h3", { id: "concept-name" }, name),
    el("p", {}, concepts.get(name) || ""),
    el("h4", {}, `Prerequisites (${direct.length} direct, ${allPre.size} in all)`), list("prerequisites", direct),
    el("h4", {}, `Depends on it (${dependants.length} direct, ${allDep.size} in all)`), list("dependants", dependants));
}

function applyView() {
  $("viewport").setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
}

function zoom(factor, cx, cy) {
  const box = $("map").getBoundingClientRect();
  cx ??= box.width / 2; cy ??= box.height / 2;
  const k = Math.min(4, Math.max(0.05, view.k * factor));
  view = { k, x: cx - ((cx - view.x) * k) / view.k, y: cy - ((cy - view.y) * k) / view.k };
  applyView();
}

function fit() {
  const box = $("map").getBoundingClientRect();
  const bounds = $("viewport").getBBox();
  if (!bounds.width || !box.width) return;
  const k = Math.min(2, (box.width - 20) / bounds.width, (box.height - 20) / bounds.height);
  view = { k, x: 10 - bounds.x * k, y: 10 - bounds.y * k };
  applyView();
}

function installMapControls() {
  const map = $("map");
  map.addEventListener("wheel", (e) => {
    e.preventDefault();
    const box = map.getBoundingClientRect();
    zoom(e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX - box.left, e.clientY - box.top);
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
    const step = 60, moves = { ArrowLeft: [step, 0], ArrowRight: [-step, 0], ArrowUp: [0, step], ArrowDown: [0, -step] };
    if (moves[e.key]) { view.x += moves[e.key][0]; view.y += moves[e.key][1]; applyView(); }
    else if (e.key === "+" || e.key === "=") zoom(1.25);
    else if (e.key === "-") zoom(0.8);
    else if (e.key === "0") fit();
    else return;
    e.preventDefault();
  });
  $("zoom-in").addEventListener("click", () => zoom(1.25));
  $("zoom-out").addEventListener("click", () => zoom(0.8));
  $("zoom-fit").addEventListener("click", fit);
  $("map-reload").addEventListener("click", drawMap);
  $("threshold").addEventListener("change", drawMap);
}

// ------------------------------------------------------------------------------ keys
function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || $("view-label").hidden) return;
  if (event.target.closest("input, textarea, select")) return;
  const action = { y: () => answer("positive"), n: () => answer("negative"), s: skip, u: undo }[event.key];
  if (action) { event.preventDefault(); action(); }
}

function init() {
  $("connect").addEventListener("submit", connect);
  $("why").addEventListener("submit", (e) => { e.preventDefault(); explain($("why-a").value, $("why-b").value); });
  $("yes").addEventListener("click", () => answer("positive"));
  $("no").addEventListener("click", () => answer("negative"));
  $("skip").addEventListener("click", skip);
  $("undo").addEventListener("click", undo);
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => show(tab.dataset.view));
  document.addEventListener("keydown", onKey);
  installMapControls();
  if (session) {
    $("pid").value = session.pid;
    $("key").value = session.key;
    $("annotator").value = session.annotator;
    open();
  } else {
    show("label");
    $("pid").focus();
  }
}

init();
