// sporal's page for teams (the lead's screens; the lead's views read with the project key when
// one was given): the Review view (open disagreements, both sides' answers, the proof,
// resolve buttons), the agreement tables of Progress, the project's own question wording, and
// the definition shown again when an answer failed a check question. Loaded after app.js, whose
// session, `api`, `el` and `$` it uses; it follows the events app.js announces (`sporal:open`,
// `sporal:view`, `sporal:answered`).
"use strict";

(() => {
  const REVIEWER = "sporal.reviewer";
  const POLL_MS = 3000;
  const DEFAULT_QUESTION = "Is {a} needed before {b}, directly or through other concepts?";
  let question = DEFAULT_QUESTION;
  let shownReview = "";                // the disagreements on screen, to redraw only on change
  let shownAgreement = "";

  const arrow = (ref) => `${ref.a} ${ref.label === "positive" ? "→" : "↛"} ${ref.b}`;
  const who = (answer) => answer.annotator ?? "(anonymous)";
  const when = (stamp) => (stamp ? new Date(stamp).toLocaleString() : "");
  const share = (x) => (x == null ? "—" : `${Math.round(100 * x)} %`);
  const fixed = (x) => (x == null ? "—" : x.toFixed(2));

  // ---------------------------------------------------------------------------- the question
  // The question's words come from the project (`question`, with {a} and {b}); app.js keeps
  // filling #qa and #qb, which stand where the template names them.
  function renderQuestion(template) {
    question = template || DEFAULT_QUESTION;
    const ask = document.querySelector("#question .ask");
    const slots = { "{a}": $("qa"), "{b}": $("qb") };
    const used = new Set();
    const nodes = question.split(/(\{a\}|\{b\})/).filter((part) => part !== "").map((part) => {
      const slot = slots[part];
      if (!slot) return document.createTextNode(part);
      if (!used.has(part)) { used.add(part); return slot; }
      const copy = el("strong", { class: "q-copy", "data-of": slot.id }, slot.textContent);
      return copy;
    });
    for (const [part, slot] of Object.entries(slots)) if (!used.has(part)) nodes.push(" ", slot);
    ask.replaceChildren(...nodes);
    $("definition-question").textContent = question.replaceAll("{a}", "A").replaceAll("{b}", "B");
  }

  function mirrorCopies() {  // a template naming a concept twice shows it twice
    const observer = new MutationObserver(() => {
      for (const copy of document.querySelectorAll(".q-copy")) {
        copy.textContent = $(copy.dataset.of).textContent;
      }
    });
    for (const id of ["qa", "qb"]) observer.observe($(id), { childList: true, characterData: true, subtree: true });
  }

  // ---------------------------------------------------------------------------- check questions
  function showDefinition() {
    const box = $("definition");
    box.hidden = false;
    box.querySelector("button").focus();
  }

  // ---------------------------------------------------------------------------- review
  function side(title, answers) {
    return el("div", { class: "side" },
      el("h4", {}, `${title} (${answers.length})`),
      answers.length
        ? el("ul", {}, ...answers.map((a) => el("li", {},
            `${who(a)}${a.role === "reviewer" ? " (reviewer)" : ""} — ${a.source || "api"}, ${when(a.created_at)}`)))
        : el("p", { class: "muted" }, "none"));
  }

  function disagreement(item) {
    const consensus = item.consensus ?? "undecided";
    const proof = item.proof || [];
    const buttons = ["positive", "negative"].map((value) => el("button", {
      type: "button", class: `resolve ${value}`, "data-label": value,
      onclick: () => resolve(item, value),
    }, value === "positive" ? `Resolve: yes, ${item.a} before ${item.b}` : "Resolve: no"));
    return el("article", { class: "panel disagreement", "data-id": String(item.id) },
      el("h3", {}, `${item.a} / ${item.b}`),
      el("p", { class: "muted" }, `open since ${when(item.opened_at)} — consensus now: ${consensus}`),
      el("div", { class: "sides" }, side("Yes", item.positive || []), side("No", item.negative || [])),
      ...(proof.length ? [
        el("p", {}, "The answers that decide it the other way:"),
        el("ul", { class: "proof" }, ...proof.map((ref) => el("li", {}, `${arrow(ref)} (label #${ref.id})`))),
      ] : []),
      ...(item.chains || []).map((c) => el("p", { class: "muted" }, `chain: ${c.join(" → ")}`)),
      el("div", { class: "answers" }, ...buttons));
  }

  async function refreshReview(force = false) {
    if (!session) return;
    const list = $("disagreements");
    let items;
    try {
      items = (await api("GET", "/disagreements?state=open", undefined, session.key)).items;
    } catch (error) {
      if (error.status !== 404 || (error.problem && error.problem.type === "/problems/project-not-found")) {
        list.replaceChildren(el("p", { class: "error" }, `Error: ${error.message}`));
        return;
      }
      items = [];  // a service without disagreements has none to review
    }
    const seen = JSON.stringify(items);
    if (!force && seen === shownReview) return;
    shownReview = seen;
    $("review-count").textContent = items.length ? `— ${items.length} open` : "";
    list.replaceChildren(...(items.length ? items.map(disagreement)
      : [el("p", { id: "no-disagreements", class: "muted" }, "No open disagreements: nothing to review.")]));
  }

  async function resolve(item, label) {
    const status = $("review-status");
    const key = $("reviewer-key").value;
    sessionStorage.setItem(REVIEWER, key);
    try {
      await api("POST", `/disagreements/${item.id}/resolve`, { label, annotator: session.annotator }, key);
      status.textContent = `Resolved ${item.a} / ${item.b} as ${label}.`;
    } catch (error) {
      status.textContent = error.status === 401 || error.status === 403
        ? `Resolving needs the project's reviewer key or the admin key: ${error.message}`
        : `Could not resolve: ${error.message}`;
      return;
    }
    await refreshReview(true);
  }

  // ---------------------------------------------------------------------------- agreement
  function accuracy(row) {
    const a = row.accuracy;
    return a ? `${share(a.estimate)} (${share(a.low)}–${share(a.high)})` : "—";
  }

  async function refreshAgreement() {
    if (!session) return;
    let view;
    try {
      view = await api("GET", "/agreement", undefined, session.key);
    } catch (error) {
      $("agreement-summary").textContent = `agreement unavailable: ${error.message}`;
      return;
    }
    const seen = JSON.stringify(view);
    if (seen === shownAgreement) return;
    shownAgreement = seen;
    $("agreement-summary").textContent = `${view.answers} answers, policy ${view.policy}; ` +
      `Krippendorff's α ${fixed(view.alpha)}`;
    $("agreement-rows").replaceChildren(...view.annotators.map((row) => el("tr", {},
      el("th", { scope: "row" }, row.annotator ?? "(none)"),
      el("td", {}, String(row.answers)), el("td", {}, share(row.agreement)),
      el("td", {}, accuracy(row)), el("td", {}, `${row.checks.failed} of ${row.checks.asked}`))));
    $("kappa-rows").replaceChildren(...(view.pairs.length ? view.pairs.map((p) => el("tr", {},
      el("th", { scope: "row" }, `${p.a ?? "(none)"} / ${p.b ?? "(none)"}`),
      el("td", {}, String(p.shared)), el("td", {}, fixed(p.kappa))))
      : [el("tr", {}, el("td", { colspan: "3", class: "muted" }, "no two annotators share 20 pairs yet"))]));
  }

  // ---------------------------------------------------------------------------- app.js's events
  function follow() {
    document.addEventListener("sporal:open", (event) => {
      shownReview = shownAgreement = "";
      renderQuestion(event.detail.question);
    });
    document.addEventListener("sporal:view", (event) => {
      if (event.detail === "review") refreshReview(true);
      if (event.detail === "progress") { shownAgreement = ""; refreshAgreement(); }
    });
    // an answer to a check question that says "no" shows the definition again
    document.addEventListener("sporal:answered", (event) => {
      if (event.detail.check_failed) showDefinition();
    });
  }

  function poll() {
    if (!session) return;
    if (!$("view-review").hidden) refreshReview();
    if (!$("view-progress").hidden) refreshAgreement();
  }

  function init() {
    $("reviewer-key").value = sessionStorage.getItem(REVIEWER) || "";
    $("definition-close").addEventListener("click", () => { $("definition").hidden = true; $("question").focus(); });
    $("review-reload").addEventListener("click", () => refreshReview(true));
    renderQuestion(DEFAULT_QUESTION);
    mirrorCopies();
    follow();
    setInterval(poll, POLL_MS);
  }

  init();
})();
