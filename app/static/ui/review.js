// sporal's page for teams (the lead's screens; the lead's views read with the project key when
// one was given): the Review view (open disagreements, both sides' answers, the proof,
// resolve buttons; the closed ones with why and when; every resolution, undo and reopen), the
// agreement tables of Progress with each annotator's actions (exclude, include, re-ask), the
// project's own question wording, and
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
  // Review lists the open disagreements, then the closed ones, each saying why and when it
  // closed and every resolution (who, when, value; undone and when). Resolving, undoing and
  // reopening need the reviewer key or the admin key: without one, no buttons, and a line
  // says which key would show them.
  const REASONS = {  // closed_reason in plain words
    answers: "settled by later answers", reviewer: "resolved by the reviewer",
    retraction: "an answer was retracted", policy: "the project switched to strict",
    merge: "concepts merged", exclusion: "an annotator was excluded or included again",
  };
  const VALUES = { positive: "yes", negative: "no" };
  const LEADS_ONLY = "Review is the lead's view: open the page with the project key, the " +
    "reviewer key or the admin key (in the Project key field) to see it.";
  const NEEDS_KEY = "Resolving, undoing and reopening need the project's reviewer key (or the " +
    "admin key): paste it above to see the buttons.";
  let rights = { key: null, may: false };  // whether the review key may resolve (whoami)

  // The key that resolves: the Reviewer key field, else the key the page was opened with.
  const reviewKey = () => $("reviewer-key").value || session.key || session.annotatorKey || "";

  async function mayReview() {
    const key = reviewKey();
    if (rights.key === key) return rights.may;
    let may;
    try {
      const me = await api("GET", "/whoami", undefined, key);
      may = me.role === "admin" || me.role === "reviewer";
    } catch (error) {  // a service without whoami: the buttons show, the service decides
      may = error.status === 404 && !(error.problem && error.problem.type === "/problems/project-not-found");
    }
    rights = { key, may };
    return may;
  }

  function side(title, answers) {
    return el("div", { class: "side" },
      el("h4", {}, `${title} (${answers.length})`),
      answers.length
        ? el("ul", {}, ...answers.map((a) => el("li", {},
            `${who(a)}${a.role === "reviewer" ? " (reviewer)" : ""} — ${a.source || "api"}, ${when(a.created_at)}`)))
        : el("p", { class: "muted" }, "none"));
  }

  // "open since …" or "closed …: why", and when a reviewer reopened it.
  function stateLine(item) {
    const consensus = item.consensus ? VALUES[item.consensus] : "undecided";
    const reopened = item.reopened_at ? `, reopened ${when(item.reopened_at)}` : "";
    if (item.state === "open") {
      return el("p", { class: "muted" }, `open since ${when(item.opened_at)}${reopened} — consensus now: ${consensus}`);
    }
    const why = REASONS[item.closed_reason] || item.closed_reason || "closed";
    return el("p", {}, `closed ${when(item.closed_at)}: `, el("strong", { class: "closed-reason" }, why),
      el("span", { class: "muted" }, ` (opened ${when(item.opened_at)}${reopened}) — consensus now: ${consensus}`));
  }

  // Every resolution, oldest first; Undo on the latest one that stands.
  function resolutions(item, may) {
    const list = item.resolutions || [];
    if (!list.length) return [];
    const standing = list.map((r) => !r.undone_at).lastIndexOf(true);
    return [el("h4", {}, "Resolutions"), el("ul", { class: "resolutions" }, ...list.map((r, i) => el("li",
      { class: r.undone_at ? "undone" : "stands" },
      `${r.annotator ?? "(the reviewer)"} resolved it: ${VALUES[r.label]} (${arrow({ ...item, label: r.label })}), ` +
      `${when(r.resolved_at)} — ${r.undone_at ? `undone ${when(r.undone_at)}` : "stands"}`,
      ...(may && i === standing ? [" ", el("button", { type: "button", class: "undo",
        onclick: () => review(item, "undo") }, "Undo this resolution")] : []))))];
  }

  function actions(item, may) {
    if (!may) return [];
    if (item.state !== "open") {
      return [el("div", { class: "answers" }, el("button", { type: "button", class: "reopen",
        onclick: () => review(item, "reopen") }, "Reopen for review"))];
    }
    return [el("div", { class: "answers" }, ...["positive", "negative"].map((value) => el("button", {
      type: "button", class: `resolve ${value}`, "data-label": value,
      onclick: () => review(item, "resolve", value),
    }, value === "positive" ? `Resolve: yes, ${item.a} before ${item.b}` : "Resolve: no")))];
  }

  function disagreement(item, may) {
    const proof = item.proof || [];
    return el("article", { class: `panel disagreement ${item.state}`, "data-id": String(item.id) },
      el("h3", {}, `${item.a} / ${item.b}`),
      stateLine(item),
      el("div", { class: "sides" }, side("Yes", item.positive || []), side("No", item.negative || [])),
      ...(proof.length ? [
        el("p", {}, item.state === "open" ? "The answers that decide it the other way:" : "The answers that decide it:"),
        el("ul", { class: "proof" }, ...proof.map((ref) => el("li", {}, `${arrow(ref)} (label #${ref.id})`))),
      ] : []),
      ...(item.chains || []).map((c) => el("p", { class: "muted" }, `chain: ${c.join(" → ")}`)),
      ...resolutions(item, may),
      ...actions(item, may));
  }

  // Every disagreement (state=all), page after page (`next_cursor` → `cursor`); a service
  // without disagreements has none to review.
  async function listDisagreements() {
    try {
      const items = [];
      let cursor = null;
      do {
        const after = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
        const page = await api("GET", `/disagreements?state=all&limit=1000${after}`, undefined, session.key);
        items.push(...page.items);
        cursor = page.next_cursor || null;
      } while (cursor !== null);
      return items;
    } catch (error) {
      if (error.status === 404 && !(error.problem && error.problem.type === "/problems/project-not-found")) return [];
      throw error;
    }
  }

  function drawReview(items, may) {
    const open = items.filter((x) => x.state === "open"), closed = items.filter((x) => x.state !== "open");
    $("review-count").textContent = open.length ? `— ${open.length} open` : "";
    $("review-rights").textContent = may ? "" : NEEDS_KEY;
    $("review-rights").hidden = may;
    $("disagreements").replaceChildren(...(open.length ? open.map((x) => disagreement(x, may))
      : [el("p", { id: "no-disagreements", class: "muted" }, "No open disagreements: nothing to review.")]));
    $("closed-count").textContent = closed.length ? `(${closed.length})` : "";
    $("closed-disagreements").replaceChildren(...(closed.length ? closed.map((x) => disagreement(x, may))
      : [el("p", { class: "muted" }, "None closed yet.")]));
  }

  async function refreshReview(force = false) {
    if (!session) return;
    let items, may;
    try {
      [items, may] = await Promise.all([listDisagreements(), mayReview()]);
    } catch (error) {
      const text = error.status === 403 ? LEADS_ONLY : `Error: ${error.message}`;
      $("disagreements").replaceChildren(el("p", { class: error.status === 403 ? "muted" : "error", id: "review-refused" }, text));
      $("closed-disagreements").replaceChildren();
      shownReview = "";
      return;
    }
    const seen = JSON.stringify([items, may]);
    if (!force && seen === shownReview) return;
    shownReview = seen;
    drawReview(items, may);
  }

  // What the refit did to the other disagreements, in one sentence.
  function others(done) {
    if (done.closed_others == null && done.opened_others == null) return "";
    const closed = done.closed_others || 0, opened = done.opened_others || 0;
    return ` The refit closed ${plural(closed, "other disagreement")} and opened ${opened}.`;
  }

  const SAID = {  // what each action says it did
    resolve: (item, done, label) => `Resolved ${item.a} / ${item.b} as ${label}.`,
    undo: (item, done) => `Undid the latest resolution of ${item.a} / ${item.b}: ` + (done.state === "open"
      ? "it is open again." : `it stays closed (${REASONS[done.closed_reason] || done.closed_reason}).`),
    reopen: (item) => `Reopened ${item.a} / ${item.b} for review.`,
  };

  async function review(item, action, label) {
    const status = $("review-status");
    const body = action === "resolve" ? { label, annotator: session.annotator } : undefined;
    let done;
    try {
      done = await api("POST", `/disagreements/${item.id}/${action}`, body, reviewKey());
    } catch (error) {
      status.textContent = error.status === 401 || error.status === 403
        ? `This needs the project's reviewer key or the admin key: ${error.message}`
        : `Could not ${action}: ${error.message}`;
      return;
    }
    status.textContent = SAID[action](item, done || {}, label) + others(done || {});
    await refreshReview(true);
  }

  // ---------------------------------------------------------------------------- agreement
  // One row per annotator (data-annotator; the last cell, class "actions", is left empty for
  // per-row actions): answers, agreement, false no / false yes, the minority count as a button
  // that lists those answers under the table, the accuracy with the note that says when it
  // rests on the prior or cannot tell them apart, the checks, and the trend (a small line over
  // windows of 20 answers, with an arrow from the window before the last to the last).
  const LEADS_VIEW = "— the lead's view: it needs the project key, the reviewer key or the admin key.";
  const SVG = "http://www.w3.org/2000/svg";
  const MINORITY_SHOWN = 500;  // the most minority answers listed under the table
  let minorityOf = null;       // the annotator row whose minority answers are listed

  function accuracyCell(row) {  // the note folded under a few words that say what it is about
    const a = row.accuracy;
    const cell = el("td", {}, a ? `${share(a.estimate)} (${share(a.low)}–${share(a.high)})` : "—");
    if (!row.note) return cell;
    const said = [row.rests_on_prior ? "mostly the prior" : "", row.identifiable ? "" : "not told apart"];
    cell.append(el("details", { class: "note" },
      el("summary", {}, said.filter(Boolean).join("; ") || "note"), row.note));
    return cell;
  }

  function trendArrow(trend) {
    if (trend.length < 2) return "";
    const change = trend[trend.length - 1].agreement - trend[trend.length - 2].agreement;
    return change > 0.05 ? " ↗" : change < -0.05 ? " ↘" : " →";
  }

  function sparkline(trend) {  // the windows' agreement, 0 at the bottom, 1 at the top
    const width = 60, height = 16;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    svg.setAttribute("aria-hidden", "true");
    const line = document.createElementNS(SVG, "polyline");
    const step = trend.length > 1 ? width / (trend.length - 1) : 0;
    line.setAttribute("points", trend.map((w, k) =>
      `${(k * step).toFixed(1)},${(height - 1 - w.agreement * (height - 2)).toFixed(1)}`).join(" "));
    svg.append(line);
    return svg;
  }

  function trendCell(row) {
    const trend = row.trend;
    if (!trend.length) return el("td", { class: "trend" }, "—");
    const words = trend.map((w) => `${share(w.agreement)} of ${w.answers}`).join(", ");
    const last = `${share(trend[trend.length - 1].agreement)}${trendArrow(trend)}`;
    return el("td", { class: "trend", title: `agreement per window of 20 answers, oldest first: ${words}` },
      ...(trend.length > 1 ? [sparkline(trend), " "] : []), last);
  }

  function minorityCell(row) {
    if (!row.minority) return el("td", {}, "0");
    const name = row.annotator ?? "(none)";
    return el("td", {}, el("button", {
      type: "button", class: "link minority-link", "aria-controls": "minority",
      title: `list ${name}'s answers against the consensus`,
      onclick: () => { minorityOf = row; showMinority(); },
    }, String(row.minority)));
  }

  function agreementRow(row) {
    return el("tr", { "data-annotator": row.annotator ?? "", class: row.excluded ? "excluded" : "" },
      el("th", { scope: "row" }, `${row.annotator ?? "(none)"}${row.excluded ? " (excluded)" : ""}`),
      el("td", {}, String(row.answers)), el("td", {}, share(row.agreement)),
      el("td", { class: "false-no" }, String(row.false_no)),
      el("td", { class: "false-yes" }, String(row.false_yes)),
      minorityCell(row), accuracyCell(row),
      el("td", {}, `${row.checks.failed} of ${row.checks.asked}`), trendCell(row),
      el("td", { class: "actions" }));
  }

  function reviewersLine(reviewers) {
    $("reviewers-line").textContent = reviewers.length
      ? "Reviewers (apart from the annotators): " + reviewers.map((r) =>
        `${r.annotator ?? "(unnamed)"}, ${r.resolutions} resolution${r.resolutions === 1 ? "" : "s"}` +
        ` (${r.final} standing)`).join("; ")
      : "";
  }

  // The answers of one annotator that disagree with the consensus (GET answers?minority=true,
  // the row's minority_url), every page, listed under the table.
  async function showMinority() {
    const row = minorityOf;
    if (!row) return;
    const box = $("minority");
    const path = row.minority_url.replace(/^\/projects\/[^/]+/, "");
    const items = [];
    try {
      for (let cursor = null; items.length < MINORITY_SHOWN;) {
        const page = await api("GET", path + (cursor ? `&cursor=${q(cursor)}` : ""),
          undefined, session.key);
        items.push(...page.items);
        cursor = page.next_cursor;
        if (!cursor) break;
      }
    } catch (error) {
      $("minority-title").textContent = `${row.annotator ?? "(none)"}: answers against the consensus`;
      showError($("minority-answers"), error);
      box.hidden = false;
      return;
    }
    $("minority-title").textContent = `${row.annotator ?? "(none)"}: ${items.length} answer` +
      `${items.length === 1 ? "" : "s"} against the consensus`;
    $("minority-answers").replaceChildren(...items.map((item) => el("li", { "data-id": String(item.id) },
      `${arrow(item)}: they said ${VALUES[item.label]}, the team ${item.label === "positive" ? "no" : "yes"}`,
      el("span", { class: "muted" }, ` (answer ${item.id}, ${when(item.created_at)})`))));
    box.hidden = false;
  }

  async function refreshAgreement() {
    if (!session) return;
    let view;
    try {
      view = await api("GET", "/agreement", undefined, session.key);
    } catch (error) {
      shownAgreement = "";
      $("agreement-summary").textContent = error.status === 403 ? LEADS_VIEW
        : `agreement unavailable: ${error.message}`;
      $("agreement-rows").replaceChildren();
      $("kappa-rows").replaceChildren();
      reviewersLine([]);
      return;
    }
    const seen = JSON.stringify(view);
    if (seen === shownAgreement) return;
    shownAgreement = seen;
    const asOf = view.as_of && !view.as_of.current
      ? ` (as of ${new Date(view.as_of.computed_at).toLocaleTimeString()}; the newest answers are being counted)` : "";
    $("agreement-summary").textContent = `${view.answers} answers, policy ${view.policy}; ` +
      `Krippendorff's α ${fixed(view.alpha)}${asOf}`;
    $("agreement-rows").replaceChildren(...view.annotators.map(agreementRow));
    reviewersLine(view.reviewers || []);
    fillActions(view);
    $("kappa-rows").replaceChildren(...(view.pairs.length ? view.pairs.map((p) => el("tr", {},
      el("th", { scope: "row" }, `${p.a ?? "(none)"} / ${p.b ?? "(none)"}`),
      el("td", {}, String(p.shared)), el("td", {}, fixed(p.kappa))))
      : [el("tr", {}, el("td", { colspan: "3", class: "muted" }, "no two annotators share 20 pairs yet"))]));
    if (minorityOf && !$("minority").hidden) {  // the listed answers follow the new consensus
      minorityOf = view.annotators.find((r) => r.annotator === minorityOf.annotator) || null;
      if (minorityOf) showMinority(); else $("minority").hidden = true;
    }
  }

  // ---------------------------------------------------------------------------- actions
  // Per annotator row of the agreement table: Exclude (Include, once excluded) and Re-ask.
  // The view was read with the key the actions need (the project, reviewer or admin key: an
  // annotator key reads no agreement), so the buttons show wherever it loaded, in consensus.
  async function act(name, method, action) {
    const status = $("agreement-status");
    let done;
    try {
      done = await api(method, `/annotators/${encodeURIComponent(name)}/${action}`, undefined,
        session.key);
    } catch (error) {
      status.textContent = `Could not ${action === "reask" ? "re-ask" : method === "DELETE"
        ? "include" : "exclude"} ${name}: ${error.message}`;
      return;
    }
    status.textContent = done.summary;
    shownAgreement = "";
    await Promise.all([refreshAgreement(), refreshPeople().catch(() => {})]);  // app.js's counts
  }

  function fillActions(view) {
    const byName = new Map(view.annotators.map((row) => [row.annotator, row]));
    for (const tr of $("agreement-rows").querySelectorAll("tr[data-annotator]")) {
      const name = tr.getAttribute("data-annotator");
      const row = byName.get(name), cell = tr.querySelector("td.actions");
      if (!cell || !row || !name || view.policy !== "consensus") continue;
      cell.replaceChildren(
        row.excluded
          ? el("button", { type: "button", class: "include", onclick: () => act(name, "DELETE", "exclude") }, "Include")
          : el("button", { type: "button", class: "exclude", onclick: () => act(name, "POST", "exclude") }, "Exclude"),
        " ",
        el("button", { type: "button", class: "reask", onclick: () => act(name, "POST", "reask") }, "Re-ask"));
    }
  }

  // ---------------------------------------------------------------------------- app.js's events
  function follow() {
    document.addEventListener("sporal:open", (event) => {
      shownReview = shownAgreement = "";
      minorityOf = null;
      $("minority").hidden = true;
      rights = { key: null, may: false };
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
    $("reviewer-key").addEventListener("change", () => {
      sessionStorage.setItem(REVIEWER, $("reviewer-key").value);
      refreshReview(true);
    });
    renderQuestion(DEFAULT_QUESTION);
    mirrorCopies();
    follow();
    setInterval(poll, POLL_MS);
  }

  init();
})();
