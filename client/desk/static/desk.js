// The research desk's page: plain JavaScript, no build step. Every text from
// a run goes into the page with textContent; only the report, rendered on the
// server without raw HTML, is inserted as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let current = null; // the open run: {id, events, source, status, mayAct}
let me = null; // who is asking (the desk says, /api/health)

async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
  let response;
  try {
    response = await fetch("/api" + path, options);
  } catch (err) {
    throw new Error("the desk cannot be reached: " + err.message);
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

function notice(text, good = false) {
  const box = $("notice");
  box.textContent = text;
  box.classList.toggle("good", good);
  box.hidden = !text;
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

// --- the runs -------------------------------------------------------------------

async function loadRuns() {
  const phase = $("phase-filter").value;
  try {
    const data = await api("/runs" + (phase ? "?phase=" + encodeURIComponent(phase) : ""));
    const list = $("runs");
    list.replaceChildren();
    for (const run of data.runs) {
      const row = el("li");
      row.dataset.testid = "run-row";
      row.setAttribute("data-testid", "run-row");
      row.dataset.runId = run.id;
      row.append(el("span", run.title || run.id, "title"));
      const state = run.status === "running" || run.phase === "cancelled" ? (run.phase || "running") : run.status;
      const whose = run.owner && run.owner !== me ? ` · ${run.owner}'s` : "";
      row.append(el("span", `${state} · ${new Date(run.started).toLocaleString()}${whose}`, "muted"));
      if (current && current.id === run.id) row.classList.add("open");
      row.addEventListener("click", () => openRun(run.id));
      list.append(row);
    }
    if (!data.runs.length) list.append(el("li", phase ? "no runs in this phase" : "no runs yet", "muted"));
  } catch (err) {
    notice(err.message);
  }
}

async function startRun(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) {
    notice("the question is empty: type what you want researched");
    return;
  }
  const body = { question };
  if ($("auto-accept").checked) body.auto_accept_plan = true;
  if ($("clarify").checked) body.enable_clarification = true;
  if ($("max-steps").value) body.max_step_num = Number($("max-steps").value);
  if ($("report-style").value) body.report_style = $("report-style").value;
  if ($("token-budget").value) body.token_budget = Number($("token-budget").value);
  if ($("evidence-pages").value) body.evidence_pages = Number($("evidence-pages").value);
  if ($("evidence-tokens").value) body.evidence_tokens = Number($("evidence-tokens").value);
  const share = $("share").value.split(/[\s,]+/).filter(Boolean);
  if (share.length) body.shared_with = share;
  try {
    const started = await api("/runs", body);
    notice("");
    $("question").value = "";
    history.pushState({}, "", "/runs/" + encodeURIComponent(started.id));
    await openRun(started.id);
    loadRuns();
  } catch (err) {
    notice(err.message);
  }
}

// --- one run ----------------------------------------------------------------------

async function openRun(id) {
  if (current && current.source) current.source.close();
  current = { id, events: 0, source: null, status: null };
  if (location.pathname !== "/runs/" + encodeURIComponent(id)) history.pushState({}, "", "/runs/" + encodeURIComponent(id));
  $("welcome").hidden = true;
  $("run").hidden = false;
  $("run-id").textContent = id;
  $("progress").replaceChildren();
  $("report-box").hidden = true;
  $("changes-box").hidden = true;
  $("plan-box").hidden = true;
  $("question-box").hidden = true;
  $("steer-box").hidden = true;
  $("phase").textContent = "";
  for (const row of document.querySelectorAll("[data-run-id]")) row.classList.toggle("open", row.dataset.runId === id);
  const known = await refresh();
  if (known) follow(id);
}

function follow(id) {
  // Every event since the start, then live; the browser resumes from the
  // last event id when the connection drops.
  const source = new EventSource(`/api/runs/${encodeURIComponent(id)}/events`);
  current.source = source;
  source.addEventListener("progress", (message) => {
    if (!current || current.id !== id) return;
    const event = JSON.parse(message.data);
    const step = event.step === null || event.step === undefined ? "" : `step ${event.step + 1} `;
    $("progress").append(el("li", `${event.kind}: ${step}${event.text}`));
    $("progress").scrollTop = $("progress").scrollHeight;
    current.events += 1;
    refreshSoon();
  });
  source.addEventListener("problem", (message) => notice(JSON.parse(message.data)));
  source.addEventListener("end", () => {
    source.close();
    refresh();
  });
}

let pending = null;
function refreshSoon() {
  if (pending) return;
  pending = setTimeout(() => {
    pending = null;
    refresh();
  }, 150);
}

async function refresh() {
  if (!current) return false;
  const id = current.id;
  let data;
  try {
    data = await api("/runs/" + encodeURIComponent(id));
  } catch (err) {
    notice(err.message);
    $("run").hidden = true;
    $("welcome").hidden = false;
    return false;
  }
  if (!current || current.id !== id) return false;
  current.status = data.status;
  current.mayAct = !!data.may_act;
  const status = data.status;
  const link = $("temporal-link");
  link.hidden = !data.temporal_ui;
  if (data.temporal_ui) link.href = data.temporal_ui;
  $("run-problem").hidden = !(data.status_problem || data.failure);
  $("run-problem").textContent = data.failure ? "the run failed: " + data.failure : data.status_problem || "";
  // A run the asker may only read (shared with them): no review, cancel, answer, ask or making.
  document.body.classList.toggle("read-only", !data.may_act);
  $("owner").textContent = data.owner ? `· ${data.owner}'s run` + (data.shared_with.length ? `, shared with ${data.shared_with.join(", ")}` : "") : "";
  $("read-only").hidden = !!data.may_act;
  $("cancel").hidden = data.workflow_status !== "running" || !data.may_act;
  if (status) {
    $("phase").textContent = status.phase;
    $("run-title").textContent = status.title || status.question;
    showQuestion(status);
    showPlan(status);
    showSteers(data, status);
    showWaiting(id, status);
  } else if (data.workflow_status !== "running") {
    $("phase").textContent = data.workflow_status;
  }
  if (data.result) showReport(id, data);
  else if (data.partial_report_html) showPartial(id, data);
  else if (data.workflow_status === "running" && status && ["completed", "cancelled", "failed"].includes(status.phase)) {
    lookAgain(id, 500); // the run is closing: its result comes in a moment
  }
  return true;
}

let lookingAgain = null;
function lookAgain(id, ms) {
  // Something is still changing that no event will announce: ask again.
  if (lookingAgain) return;
  lookingAgain = setTimeout(() => {
    lookingAgain = null;
    if (current && current.id === id) refresh();
  }, ms);
}

// A model call waiting on the provider's rate limit: since when; looked at
// again until it is served (no event announces that).
function showWaiting(id, status) {
  const since = status.rate_limited_since;
  $("rate-limited").hidden = !since;
  if (!since) return;
  const at = new Date(since);
  const shown = isNaN(at) ? since : at.toLocaleTimeString();
  const spent = (status.usage || {}).rate_limited_seconds || 0;
  $("rate-limited").textContent =
    `waiting on the model provider's rate limit since ${shown} (${Math.round(spent)} s waited in this run so far)`;
  lookAgain(id, 2000);
}

function showQuestion(status) {
  const asking = status.phase === "clarifying" && status.pending_question;
  $("question-box").hidden = !asking;
  if (asking) $("pending-question").textContent = status.pending_question;
}

function showPlan(status) {
  const plan = status.plan;
  $("plan-box").hidden = !plan;
  if (!plan) return;
  $("plan-title").textContent = plan.title;
  $("plan-thought").textContent = plan.thought || "";
  const list = $("plan");
  list.replaceChildren();
  plan.steps.forEach((step, i) => {
    const item = el("li", step.title);
    item.setAttribute("data-testid", "plan-step");
    const state = (status.steps[i] || {}).status || "pending";
    item.className = state;
    item.append(el("span", step.step_type, "type"), el("span", state, "state"));
    if (step.description) item.append(el("div", step.description, "muted"));
    list.append(item);
  });
  const cut = status.steps_cut || [];
  $("steps-cut").hidden = !cut.length;
  $("steps-cut").textContent = cut.length ? `Cut by the step limit: ${cut.join("; ")}` : "";
  $("review").hidden = !status.review_pending || !current.mayAct;
  $("accepted-by").textContent = status.plan_accepted_by ? `plan accepted by ${status.plan_accepted_by}` : "";
}

// Steering a running run: the box while it runs, and every note sent with where it applied.
function showSteers(data, status) {
  const steers = status.steers || [];
  const running = data.workflow_status === "running" && !["completed", "cancelled", "failed"].includes(status.phase);
  const reviewing = status.phase === "awaiting_review";
  $("steer-box").hidden = !running && !steers.length;
  $("steer-form").hidden = !running || reviewing;
  $("steer-review").hidden = !(running && reviewing);
  const list = $("steers");
  list.replaceChildren();
  for (const steer of steers) {
    const item = el("li", steer.note, steer.applied_at ? "applied" : "waiting");
    item.setAttribute("data-testid", "steer");
    const at = steer.applied_at ? new Date(steer.applied_at).toLocaleTimeString() : "";
    const where = steer.applied_at ? `applied ${at}: ${steer.applied_where}` : steer.applied_where;
    item.append(el("div", where || "waiting for the next safe point", "muted"));
    if (steer.urls && steer.urls.length) item.append(el("div", "pages: " + steer.urls.join(" "), "muted"));
    list.append(item);
  }
}

async function steerRun() {
  const note = $("steer-input").value.trim();
  if (!note) return notice("type your note for the research first");
  const url = $("steer-url").value.trim();
  if (await send("/steer", { note, urls: url ? url.split(/\s+/) : [] })) {
    $("steer-input").value = "";
    $("steer-url").value = "";
  }
}

function putReport(id, html, partial) {
  const box = $("report-box");
  if (box.dataset.run !== id) $("ask-answer").replaceChildren();
  box.dataset.run = id;
  $("report").innerHTML = html; // rendered on the server without raw HTML
  for (const a of $("report").querySelectorAll("a")) {
    a.target = "_blank";
    a.rel = "noopener noreferrer";
  }
  $("report-heading").textContent = partial ? "Partial report" : "Report";
  $("report-warnings").hidden = true;
  $("report-actions").hidden = partial; // a failed run has no downloads, and no thread to ask
  $("ask-box").hidden = partial;
}

// A run that re-checked an earlier run's sources: what changed, first, in a card of its own.
function showChanges(html) {
  $("changes").innerHTML = html || ""; // rendered on the server without raw HTML
  for (const a of $("changes").querySelectorAll("a")) {
    a.target = "_blank";
    a.rel = "noopener noreferrer";
  }
  $("changes-box").hidden = !html;
}

// A failed run: what it found before it failed (the reason is in run-problem).
function showPartial(id, data) {
  putReport(id, data.partial_report_html, true);
  $("usage").textContent = "what the run found before it failed";
  $("report-box").hidden = false;
}

// How each statement is supported (SPEC 3d): its paragraph, item or row is
// marked; hovering shows the passage or the arithmetic, a click keeps it below.
const SUPPORT = {
  stated: "Stated by a source",
  derived: "Derived by arithmetic from stated figures",
  absent: "Says what the sources do not give",
  unsupported: "Not found in the sources",
};
const WORST = ["unsupported", "absent", "derived", "stated"];

function explain(s) {
  let text = `${SUPPORT[s.support] || s.support}: “${s.plain}”`;
  if (s.support === "stated" && s.passage) text += `\n  ${s.url || "the findings"}: ${s.passage}`;
  if (s.contradicts) {
    // a near miss, a figure of another year or status, or "not given" for what a page gives
    const instead = s.support === "absent" ? "" : " instead";
    text += `\n  a source gives ${s.contradicts}${instead}: ${s.url || "the findings"}: ${s.passage || ""}`;
  }
  if (s.support === "derived") {
    text += `\n  ${s.arithmetic}`;
    for (const b of s.from || []) text += `\n  ${b.figure}: ${b.url || "the findings"}`;
  }
  return text;
}

function traceStatements(statements) {
  const detail = $("statement-detail");
  detail.hidden = true;
  const blocks = [...$("report").querySelectorAll("p, li, tr")];
  const squash = (t) => t.replace(/\s+/g, " ").trim();
  for (const block of blocks) {
    const text = squash(block.textContent);
    const own = statements.filter((s) => s.plain && text.includes(s.plain.slice(0, 80)));
    if (!own.length || block.querySelector(".traced")) continue;
    const worst = WORST.find((w) => own.some((s) => s.support === w));
    block.classList.add("traced", worst);
    block.dataset.testid = "statement";
    block.dataset.support = worst;
    block.title = own.map(explain).join("\n\n");
    block.addEventListener("click", (event) => {
      if (event.target.closest("a")) return; // a link opens its page
      detail.textContent = block.title;
      detail.hidden = false;
    });
  }
}

function showReport(id, data) {
  const box = $("report-box");
  putReport(id, data.result.report_html, false);
  traceStatements(data.result.statements || []);
  showChanges(data.result.changes_html);
  // What to know before trusting the report (e.g. the reporter failed: the report is the findings).
  const warnings = data.result.warnings || [];
  $("report-warnings").textContent = warnings.map((w) => `Warning: ${w}`).join("\n");
  $("report-warnings").hidden = !warnings.length;
  const base = `/api/runs/${encodeURIComponent(id)}`;
  for (const fmt of ["md", "html", "json", "pdf", "docx"]) $("download-" + fmt).href = base + "/report." + fmt;
  const files = data.files || {};
  const making = { slides: "making slides…", podcast: "making a podcast…" };
  for (const kind of ["slides", "podcast"]) {
    const ready = files[kind] === "completed";
    const running = files[kind] === "running";
    const make = $("make-" + kind);
    $("download-" + kind).hidden = !ready;
    $("download-" + kind).href = base + "/" + kind;
    make.hidden = ready;
    make.disabled = running;
    make.dataset.label = make.dataset.label || make.textContent; // "make slides", from the page
    make.textContent = running ? making[kind] : make.dataset.label;
  }
  // A podcast or deck being made: look again until it is there.
  if (["slides", "podcast"].some((kind) => files[kind] === "running")) lookAgain(id, 2000);
  $("usage").textContent = `${data.result.status} · sources cited: ${data.result.sources} · ${data.result.usage_text}`;
  box.hidden = false;
}

async function send(path, body, done) {
  try {
    const reply = await api(`/runs/${encodeURIComponent(current.id)}${path}`, body);
    notice(done || reply.message, true);
    refresh();
    return true;
  } catch (err) {
    notice(err.message);
    return false;
  }
}

function review(feedback) {
  const version = current.status ? current.status.plan_version : undefined;
  return send("/review", { feedback, plan_version: version });
}

// --- wiring -----------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", async () => {
  $("start-form").addEventListener("submit", startRun);
  $("phase-filter").addEventListener("change", loadRuns);
  $("accept").addEventListener("click", () => review("[ACCEPTED]"));
  $("edit-button").addEventListener("click", async () => {
    const text = $("edit").value.trim();
    if (!text) return notice("type the change you want in the plan first");
    if (await review("[EDIT_PLAN] " + text)) $("edit").value = "";
  });
  $("answer-button").addEventListener("click", async () => {
    const text = $("answer").value.trim();
    if (!text) return notice("the answer is empty");
    if (await send("/answer", { answer: text })) $("answer").value = "";
  });
  $("cancel").addEventListener("click", () => send("/cancel", {}));
  $("steer-button").addEventListener("click", steerRun);
  $("make-slides").addEventListener("click", () => send("/slides", {}));
  $("make-podcast").addEventListener("click", () => send("/podcast", {}));
  $("ask-button").addEventListener("click", askFollowUp);
  window.addEventListener("popstate", route);
  try {
    const health = await api("/health");
    me = health.user;
    $("server").textContent = `Temporal at ${health.temporal} (${health.namespace})`;
    $("whoami").textContent = `${health.user} (${health.role})`;
    $("start-form").hidden = health.role === "reader"; // readers read what is shared with them
    $("demo").hidden = !health.demo;
    $("demo").textContent = health.demo || "";
  } catch (err) {
    notice(err.message);
  }
  loadRuns();
  loadSchedules();
  setInterval(loadRuns, 5000);
  route();
});

// --- follow-up questions and schedules ---------------------------------------------

async function askFollowUp() {
  const question = $("ask-input").value.trim();
  if (!question) return notice("type a question about the report first");
  const answer = $("ask-answer");
  const button = $("ask-button");
  button.disabled = true;
  answer.textContent = "asking… (researching more can take a few minutes)";
  try {
    const data = await api(`/runs/${encodeURIComponent(current.id)}/ask`, { question });
    answer.innerHTML = data.answer_html; // rendered on the server without raw HTML
    for (const a of answer.querySelectorAll("a")) {
      a.target = "_blank";
      a.rel = "noopener noreferrer";
    }
    if (data.researched) answer.append(el("p", `researched more in run ${data.research_run}`, "muted"));
    $("ask-input").value = "";
  } catch (err) {
    answer.textContent = "";
    notice(err.message);
  } finally {
    button.disabled = false;
  }
}

async function loadSchedules() {
  try {
    const data = await api("/schedules");
    const list = $("schedules");
    list.replaceChildren();
    for (const s of data.schedules) {
      const row = el("li");
      row.append(el("span", s.name, "title"), el("span", `every ${s.every} · ${s.state} · ${s.runs} run(s)`, "muted"));
      if (s.last !== "-") row.append(el("div", `last run: ${s.changes}`, "muted"));
      list.append(row);
    }
    if (!data.schedules.length) list.append(el("li", "none (deepresearch schedule create …)", "muted"));
  } catch (err) {
    $("schedules").replaceChildren(el("li", err.message, "muted"));
  }
}

function route() {
  const match = location.pathname.match(/^\/runs\/([^/]+)$/);
  if (match) openRun(decodeURIComponent(match[1]));
}
