// sporal's annotator page: labeling, reasons, progress and the map, over the REST API of the
// service that serves it. No build step; the map (map.js) lays out with the vendored dagre.
// The keys live in sessionStorage: the person's annotator key answers, the project key (the
// lead's) reads the lead's views. `GET whoami` names the person and their role; a service
// without it (404) is taken as before: the name typed is the annotator.
// The annotator's screen shows no model prediction and no reason why a pair is asked (a check,
// a second opinion, a disagreement look like any new question): nothing anchors an answer.
// The page's other parts (review.js) listen to the
// events this file announces on `document`: `sporal:open` (detail: the project),
// `sporal:view` (the view shown) and `sporal:answered` (the label POST's response).
"use strict";

const $ = (id) => document.getElementById(id);
const SESSION = "sporal.session";
const POLL_MS = 3000;
const VIEWS = ["label", "progress", "map", "review"];

let session = JSON.parse(sessionStorage.getItem(SESSION) || "null");
let concepts = new Map();          // name -> description
let current = null;                // the question on screen: {a, b}
let skipped = new Set();           // "a\u0000b" of questions skipped in this tab
let undoStack = [];                // this tab's answers: {answerId (null: a repeat), a, b}
let busy = false;
let pollTimer = null;

// ------------------------------------------------------------------------------ the API
// `key` stands in for the person's key (the reviewer key of a resolution, the project key of
// the lead's views). The person's key: their annotator key, else the project key.
async function api(method, path, body, key) {
  const headers = { Accept: "application/json" };
  const apiKey = key || session.annotatorKey || session.key;
  if (apiKey) headers["X-API-Key"] = apiKey;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`../projects/${session.pid}${path}`, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = response.status === 204 ? null : await response.json().catch(() => null);
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
  target.hidden = false;
}

function announce(name, detail) {
  document.dispatchEvent(new CustomEvent(`sporal:${name}`, { detail }));
}

// "1 pair", "2 pairs"
function plural(n, word, words = `${word}s`) {
  return `${n} ${n === 1 ? word : words}`;
}

// The outcome box stays hidden until there is something to say.
function outcome(...children) {
  $("outcome").replaceChildren(...children);
  $("outcome").hidden = children.length === 0;
}

// ------------------------------------------------------------------------------ session
const ROLES = {  // whoami's role, in the words the status line uses
  admin: "admin key", project: "lead, project key", reviewer: "reviewer key", annotator: "annotator",
};

async function connect(event) {
  event.preventDefault();
  session = { pid: Number($("pid").value), key: $("key").value, annotatorKey: $("annotator-key").value,
              annotator: $("annotator").value.trim() };
  await open();
}

// The person behind the key: whoami's answer, or null where the service has no whoami (404).
async function whoami() {
  try {
    return await api("GET", "/whoami");
  } catch (error) {
    const missing = error.status === 404 && !(error.problem && error.problem.type === "/problems/project-not-found");
    if (missing) return null;
    throw error;
  }
}

function refuseOpen(text) {
  $("connect-status").textContent = text;
  $("connect").classList.remove("opened");
}

// Who answers: an annotator key names its person (the name field follows it); any other key,
// or none (keys off), answers as the name typed.
function identify(me) {
  session.role = me ? me.role : null;
  if (me && me.annotator) {
    session.annotator = me.annotator;
    $("annotator").value = me.annotator;
  }
  if (!session.annotator) return "type your name, or paste your annotator key";
  const role = !me ? "" : me.open ? " (keys off)" : ` (${ROLES[me.role] || me.role})`;
  return `labeling as ${session.annotator}${role}`;
}

// The project; an annotator key that may not read it still answers (the default wording).
async function readProject(me) {
  try {
    return await api("GET", "");
  } catch (error) {
    if (error.status === 403 && me && me.role === "annotator") return { id: session.pid, name: "", question: null };
    throw error;
  }
}

async function open() {
  let project, line;
  try {
    const me = await whoami();
    project = await readProject(me);
    line = identify(me);
  } catch (error) {
    refuseOpen(`Cannot open project ${session.pid}: ${error.message}` + (error.status === 401
      ? ". This service has keys on: paste your annotator key (the lead makes one per person), " +
        "or the project's key (its api_key, printed once when the project was made), or the admin key."
      : ""));
    return;
  }
  const title = `Project ${project.id}${project.name ? `: ${project.name}` : ""} — ${line}`;
  if (!session.annotator) { refuseOpen(title); return; }
  sessionStorage.setItem(SESSION, JSON.stringify(session));
  $("connect-status").textContent = title;
  $("connect").classList.add("opened");
  concepts = new Map((await every("/concepts")).items.map((c) => [c.name, c.description || ""]));
  $("concept-names").replaceChildren(...[...concepts.keys()].map((n) => el("option", { value: n })));
  skipped = new Set();
  undoStack = [];
  outcome();
  announce("open", project);
  show(location.hash.slice(1) || "label");
  if (!$("view-label").hidden) $("question").focus();  // the keys answer from here
}

// ------------------------------------------------------------------------------ views
function show(view) {
  if (!VIEWS.includes(view)) view = "label";
  for (const tab of document.querySelectorAll(".tab")) {
    if (tab.dataset.view === view) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${view}`;
  document.querySelector("main").classList.toggle("wide", view === "map");
  if (history.replaceState) history.replaceState(null, "", `#${view}`);
  clearInterval(pollTimer);
  if (!session) return;
  announce("view", view);
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
  $("undecided").textContent = `— ${plural(answer.undecided, "pool pair")} undecided`;
  setQuestion(pick || null);
}

// The question alone: no prediction, no reason why it is asked (see the head of this file).
function setQuestion(pair) {
  current = pair ? { a: pair.a, b: pair.b } : null;
  const box = $("question");
  box.classList.toggle("done", !current);
  $("qa").textContent = current ? current.a : "—";
  $("qb").textContent = current ? current.b : "—";
  // descriptions only when the project has some: no "(no description)" lines
  const da = current ? concepts.get(current.a) || "" : "", db = current ? concepts.get(current.b) || "" : "";
  $("qa-desc").textContent = da;
  $("qb-desc").textContent = db;
  $("qa-desc").parentElement.hidden = !da;
  $("qb-desc").parentElement.hidden = !db;
  $("question-note").textContent = current ? "" : "Nothing left to ask: every pool pair is decided.";
  $("question-note").hidden = !!current;
  for (const id of ["yes", "no", "skip"]) $(id).disabled = !current;
  box.dataset.pair = current ? `${current.a} | ${current.b}` : "";
}

async function answer(label) {
  if (!current || busy) return;
  busy = true;
  const pair = current;
  try {
    const created = await api("POST", "/labels", { a: pair.a, b: pair.b, label, annotator: session.annotator });
    $("refusal").hidden = true;
    undoStack.push({ answerId: created.answer_id ?? null, a: pair.a, b: pair.b });
    showDecided(created);
    announce("answered", created);
    skipped.delete(pairKey(pair.a, pair.b));
    await nextQuestion();
  } catch (error) {
    if (error.problem && error.problem.type === "/problems/contradiction") await showRefusal(error.problem);
    else showError($("outcome"), error);
  } finally {
    busy = false;
  }
}

const SHOWN_INFERRED = 5;  // the first inferred pairs are listed at once, the rest on a click

function showDecided(created) {
  const n = created.newly_decided.positive + created.newly_decided.negative;
  const head = el("p", {}, `Recorded your answer ${labelText(created)}. `,
    el("strong", { id: "decided-count" }, `+${n} decided`));
  const item = (d) => el("li", {}, el("button", { type: "button", class: "link", onclick: () => explain(d.a, d.b) }, labelText(d)));
  const first = created.decided.slice(0, SHOWN_INFERRED), rest = created.decided.slice(SHOWN_INFERRED);
  const parts = [head];
  if (first.length) {
    parts.push(el("p", {}, `It decided ${plural(created.decided.length, "more pair")} by inference` +
      " (choose one to see why):"), el("ul", { id: "decided-list" }, ...first.map(item)));
  }
  if (rest.length) {
    parts.push(el("details", {}, el("summary", {}, `${plural(rest.length, "more inferred pair")}`),
      el("ul", { id: "decided-rest" }, ...rest.map(item))));
  }
  outcome(...parts);
}

// ------------------------------------------------------------------------------ refusals
// The live answers behind a proof's label (its pair and value); `who`: only this annotator's.
// Other people's answers are the lead's to read: without the right key, none are known.
async function liveAnswers(ref, who) {
  const only = who ? `annotator=${q(who)}&` : "";
  try {
    const page = await api("GET", `/answers?${only}a=${q(ref.a)}&b=${q(ref.b)}&limit=100`);
    return page.items.filter((x) => x.label === ref.label && !x.retracted_at &&
      (x.outcome === "asserted" || x.outcome === "agreed"));
  } catch (error) {
    return [];
  }
}

// Who gave a proof's label: the proof's `annotator` where the service names it, else the
// live answers behind it where this key may read them.
async function givenBy(ref) {
  if (ref.annotator) return { names: [ref.annotator], reviewed: false };
  const answers = await liveAnswers(ref);
  return { names: [...new Set(answers.map((x) => x.annotator).filter((x) => x))],
           reviewed: answers.some((x) => x.role === "reviewer") };
}

// One line of the proof: Retract where the answer is this person's, else who can retract it.
async function proofLine(ref) {
  const mine = (await liveAnswers(ref, session.annotator)).filter((x) => x.role === "annotator");
  const text = `${labelText(ref)} (label #${ref.id})`;
  if (mine.length) {
    return el("li", { class: "mine" }, `${text}, your answer `,
      el("button", { type: "button", onclick: () => retract(ref, mine) }, "Retract my answer"));
  }
  const { names, reviewed } = await givenBy(ref);
  if (reviewed) {
    return el("li", { class: "theirs" }, `${text}, the reviewer's decision: only the reviewer ` +
      "(with the reviewer key) can retract it.");
  }
  const by = names.length ? `${names.join(" and ")}'s answer` : "not your answer";
  const can = `${names.length ? names.join(" or ") : "the annotator who gave it"} or the lead (with the project key)`;
  return el("li", { class: "theirs" }, `${text}, ${by}: only ${can} can retract it.`);
}

async function showRefusal(problem) {
  const box = $("refusal");
  const items = await Promise.all(problem.proof.map(proofLine));
  const own = items.some((li) => li.classList.contains("mine"));
  box.replaceChildren(
    el("h3", {}, `Refused: ${problem.a} → ${problem.b} cannot be ${problem.label}`),
    el("p", {}, own ? "These answers decide the opposite. Retract yours to answer again, or skip:"
      : "These answers decide the opposite; none is yours. Skip (s), or ask who can retract one:"),
    el("ul", { id: "proof" }, ...items),
    ...(problem.chains || []).map((c) => el("p", { class: "muted" }, `chain: ${c.join(" → ")}`)));
  box.hidden = false;
  const button = box.querySelector("button");
  if (button) button.focus();
}

async function retract(ref, mine) {
  try {
    let undecided = 0;
    for (const x of mine) undecided += (await api("DELETE", `/answers/${x.id}`)).undecided;
    const gone = new Set(mine.map((x) => x.id));
    undoStack = undoStack.filter((u) => !gone.has(u.answerId));
    $("refusal").replaceChildren(el("p", {}, `Retracted your answer ${labelText(ref)}: ` +
      `${plural(undecided, "pair")} undecided. Answer the question again (y / n).`));
    $("yes").focus();
  } catch (error) {
    showError($("refusal"), error);
  }
}

function skip() {
  if (!current || busy) return;
  skipped.add(pairKey(current.a, current.b));
  outcome(el("p", {}, `Skipped ${current.a} / ${current.b}.`));
  nextQuestion();
}

// `u`: retract this person's own last answer (never a colleague's), and say what changed.
async function undo() {
  if (busy) return;
  if (!undoStack.length) { outcome(el("p", { id: "undone" }, "Nothing of yours to undo in this tab.")); return; }
  const last = undoStack.pop();
  if (last.answerId == null) {
    outcome(el("p", { id: "undone" }, `Nothing of yours to undo: your last answer (${last.a} / ${last.b}) ` +
      "repeated one you had given before, so it kept no new answer."));
    return;
  }
  busy = true;
  try {
    const gone = await api("DELETE", `/answers/${last.answerId}`);
    outcome(el("p", { id: "undone" }, `Undone: your answer ${labelText(gone)} is retracted; ` +
      (gone.undecided ? `${plural(gone.undecided, "pair")} undecided again or changed.`
        : "the other answers still decide its pair.")));
    $("refusal").hidden = true;
    setQuestion({ a: last.a, b: last.b });
  } catch (error) {
    undoStack.push(last);
    showError($("outcome"), error);
  } finally {
    busy = false;
  }
}

// ------------------------------------------------------------------------------ reasons
const SOURCES = { asserted: "decided by the team's answers", inferred: "following from other answers" };

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
      el("p", {}, `${a} ${status.status === "positive" ? "→" : "↛"} ${b}: ${status.status === "positive" ? "yes" : "no"}, ` +
        `${SOURCES[status.source] || status.source}, because of these answers`),
      el("ul", { id: "reason-proof" }, ...status.proof.map((ref) =>
        el("li", {}, `${labelText(ref)} (label #${ref.id})`))),
      ...status.chains.map((c) => el("p", { class: "muted" }, `chain: ${c.join(" → ")}`)));
  } catch (error) {
    showError(target, error);
  }
  target.scrollIntoView({ block: "nearest" });
}

// ------------------------------------------------------------------------------ progress
// The project's figures (any key); the answers per annotator, the lead's view (project,
// reviewer or admin key): an annotator key is told so in plain words, not shown an error.
async function refreshProgress() {
  try {
    const project = await api("GET", "");
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
    await Promise.all([refreshQuality(), refreshPeople()]);
    $("progress-updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    $("progress-updated").textContent = `update failed: ${error.message}`;
  }
}

// How right the map is: the wrong pairs expected among the decided and the predicted rest.
async function refreshQuality() {
  const q = await api("GET", "/quality");
  const count = (x, of) => `about ${x.estimate.toFixed(1)} of ${of} (${x.low}–${x.high})`;
  $("quality-decided").textContent = count(q.decided_wrong, q.decided);
  $("quality-predicted").textContent = q.predicted_wrong
    ? count(q.predicted_wrong, q.undecided) : "no model yet";
}

async function refreshPeople() {
  let people;
  try {
    people = await api("GET", "/annotators", undefined, session.key);
  } catch (error) {
    if (error.status !== 403) throw error;
    $("annotators").replaceChildren(el("tr", {}, el("td", { colspan: "7", class: "muted", id: "annotators-refused" },
      "The answers of each person are the lead's view: they need the project key, the reviewer key or the admin key.")));
    return;
  }
  $("annotators").replaceChildren(...people.items.map((p) => el("tr", {},
    el("th", { scope: "row" }, p.annotator ?? "(none)"),
    ...[p.answered, p.accepted, p.retracted, p.refused, p.contested, p.excluded ?? 0].map((v) => el("td", {}, String(v))))));
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
  $("connect-change").addEventListener("click", () => { $("connect").classList.remove("opened"); $("pid").focus(); });
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
    $("annotator-key").value = session.annotatorKey || "";
    open();
  } else {
    show("label");
    $("pid").focus();
  }
}

init();
