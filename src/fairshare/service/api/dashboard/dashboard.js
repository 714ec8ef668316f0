// fairshare dashboard: reads the API with a bearer token, redraws every few seconds. No libraries.
"use strict";

const REFRESH_MS = 2000;
const COLORS = ["#3b6fd8", "#d9822b", "#2f9e6e", "#b54aa8", "#c9423f", "#6b7fa3", "#8c6d1f", "#1f8c8c", "#7a5cc7"];
const HOLD_SHORT = {
  no_capacity: "no free GPUs of its type",
  fragmented: "GPUs free, but scattered",
  reserved: "GPUs reserved for a bigger job",
  no_victims: "no GPUs free; nothing preemptible for it",
  queued: "jobs ahead take the free GPUs",
};
const state = { token: null, selected: null, usageNode: "", group: "", tree: null, status: null, timer: null,
  gen: 0 };

// ------------------------------------------------------------------ helpers
const $ = (id) => document.getElementById(id);
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "title") e.title = v;
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}
function fmt(x, digits = 1) {
  if (x === null || x === undefined || !isFinite(x)) return "–";
  return Number(x).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
function signed(x, digits = 1) {
  if (x === null || x === undefined || !isFinite(x)) return "–";
  return (x > 0 ? "+" : "") + fmt(x, digits);
}
function dur(s) {
  if (s === null || s === undefined || !isFinite(s)) return "–";
  s = Math.max(0, Math.round(s));
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m`;
  return `${s}s`;
}
function when(t) {
  if (t === null || t === undefined) return "–";
  const d = new Date(t * 1000);
  return d.toLocaleString("en-GB", { timeZone: "UTC", month: "short", day: "numeric", hour: "2-digit",
    minute: "2-digit" }) + " UTC";
}
function pct(x) { return x === null || x === undefined || !isFinite(x) ? "–" : `${Math.round(x * 100)}%`; }
// a balance's colour class: its sign, and its size against what the group was owed (so a group a few
// percent off its share stays neutral, and only the ones far from it stand out)
function balanceClass(debt, owed, delivered) {
  const scale = Math.max(Math.abs(owed || 0), Math.abs(delivered || 0), 1);
  const r = Math.abs(debt) / scale;
  if (!isFinite(r) || r < 0.05 || Math.abs(debt) < 0.05) return "even";
  const level = r < 0.2 ? 1 : r < 0.5 ? 2 : 3;
  return `${debt > 0 ? "owed" : "borrowed"} l${level}`;
}
function got(priority) { return priority === null || priority === undefined ? "–" : pct(1 - priority); }

async function api(path) {
  const r = await fetch(path, { headers: { Authorization: `Bearer ${state.token}` } });
  if (r.status === 401) { logout("That token was refused (unknown, revoked or expired)."); throw new Error("401"); }
  if (!r.ok) {
    let msg = `${r.status}`;
    try { msg = (await r.json()).message || msg; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return r.json();
}

// ------------------------------------------------------------------ token
function takeToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    localStorage.setItem("fairshare-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname);
  }
  return localStorage.getItem("fairshare-token");
}
function logout(message) {
  localStorage.removeItem("fairshare-token");
  state.token = null;
  clearTimeout(state.timer);
  $("main").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
}

// ------------------------------------------------------------------ header and tree
function renderStatus(s) {
  state.status = s;
  const role = s.role === "writer" ? "scheduling" : s.role === "reader" ? "read-only replica" : s.role;
  // red with the reason while the loop fails (an error now, or no cycle completed lately)
  const loop = s.loop || {};
  const failing = loop.error || (loop.healthy === false ? loop.last_error || "no scheduling pass completed lately" : null);
  $("clock").replaceChildren(
    el("span", {}, "clock ", el("b", { id: "now" }, when(s.now_t)), s.speed && s.speed !== 1 ? ` (×${s.speed})` : ""),
    el("span", {}, "cluster ", el("b", {}, s.backend || "–")),
    el("span", {}, "GPUs busy ", el("b", { id: "busy" }, `${s.gpus_busy} / ${s.gpus}`)),
    el("span", {}, "queue ", el("b", {}, s.pending_jobs), " waiting, ", el("b", {}, s.running_jobs), " running"),
    failing
      ? el("span", { class: "badge failing", id: "loop-badge", title: failing }, `failing: ${failing}`)
      : el("span", { class: `badge ${s.role}`, id: "loop-badge" }, role),
  );
  const note = s.loop && s.loop.policy_not_applied;
  const banner = $("banner");
  if (note) {
    banner.hidden = false;
    banner.textContent = `Policy version ${note.version} is stored but not in force: ${note.why.join("; ")}.`;
  } else if (s.loop && s.loop.error) {
    banner.hidden = false;
    banner.textContent = `The scheduler loop reported: ${s.loop.error}`;
  } else if (notResuming(s.recovery).length) {
    banner.hidden = false;
    banner.textContent = notResuming(s.recovery).join(" ");
  } else banner.hidden = true;
}

// classes declared resumable whose requeued runs did not resume (docs/progress.md)
function notResuming(recovery) {
  return Object.entries(recovery || {}).filter(([, r]) => r.not_borne_out).map(([cls, r]) =>
    `Class ${cls} is declared resumable, but only ${r.resumed} of its ${r.restarts} requeued runs resumed from a checkpoint.`);
}

function progressNote(r) {
  const p = r.progress;
  if (!p || p.step === null) return "";
  const ckpt = p.checkpoint_step !== null ? `, checkpoint ${p.checkpoint_step} ${dur(p.checkpoint_age_s)} ago` : "";
  return ` · step ${p.step} ${dur(p.progress_age_s)} ago${ckpt}`;
}

function renderTree(t) {
  state.tree = t;
  $("window-h").textContent = fmt(t.window_h, 0);
  $("tree-when").textContent = `as of ${when(t.as_of_t)}`;
  const body = $("tree").tBodies[0];
  body.replaceChildren(...t.nodes.map((n) => {
    const sd = n.share_delivery;
    const owedMax = Math.max(n.owed_gpu_h, n.delivered_gpu_h, 1e-9);
    const bar = el("span", { class: "bar", title: "bar: delivered; mark: owed" },
      el("span", { class: "d", style: "" }), el("span", { class: "o" }));
    bar.children[0].style.width = `${Math.min(100, (100 * n.delivered_gpu_h) / owedMax)}%`;
    bar.children[1].style.left = `${Math.min(100, (100 * n.owed_gpu_h) / owedMax)}%`;
    const share = Math.abs(n.effective_share - n.static_fraction) > 0.0005
      ? `${pct(n.static_fraction)} → ${pct(n.effective_share)}` : pct(n.static_fraction);
    const name = el("span", { class: "indent" }, n.name);
    name.style.paddingLeft = `${n.depth * 16}px`;
    if (n.depth === 0) name.style.fontWeight = "600";
    return el("tr", { "data-path": n.path },
      el("td", { title: n.owner ? `owner ${n.owner}` : "" }, name),
      el("td", { class: "num" }, share),
      el("td", { class: "num", "data-value": n.owed_gpu_h }, fmt(n.owed_gpu_h)),
      el("td", { class: "num", "data-value": n.delivered_gpu_h }, fmt(n.delivered_gpu_h)),
      el("td", {}, bar, el("span", { class: "pct" }, sd === null ? "–" : pct(sd))),
      el("td", { class: `num debt ${balanceClass(n.debt_gpu_h, n.owed_gpu_h, n.delivered_gpu_h)}`,
        "data-value": n.debt_gpu_h }, signed(n.debt_gpu_h)),
      el("td", { class: "num", "data-value": n.unallocated_gpu_h }, fmt(n.unallocated_gpu_h)),
      el("td", { class: "num" }, `${fmt(n.used_rate)} / ${fmt(n.owed_rate)}`),
      el("td", { class: "num" }, n.pending_jobs),
      el("td", { class: "num" }, n.running_jobs),
    );
  }));
  const filter = $("group-filter");
  const groups = [["", "all groups"]].concat(
    t.nodes.map((n) => [n.path, `${"\u00a0\u00a0".repeat(n.depth)}${n.path}${n.leaf ? "" : " (and below)"}`]));
  if (filter.options.length !== groups.length || groups.some(([v], i) => filter.options[i].value !== v)) {
    filter.replaceChildren(...groups.map(([v, label]) => el("option", { value: v }, label)));
    filter.value = groups.some(([v]) => v === state.group) ? state.group : "";
  }
  const sel = $("usage-node");
  const options = [["", "top-level groups"]].concat(
    t.nodes.filter((n) => !n.leaf).map((n) => [n.path, `inside ${n.path}`]));
  if (sel.options.length !== options.length) {
    sel.replaceChildren(...options.map(([v, label]) => el("option", { value: v }, label)));
    sel.value = state.usageNode;
  }
}

// ------------------------------------------------------------------ usage chart
function renderUsage(u) {
  const box = $("usage-chart");
  if (!u.starts || !state.tree) { box.textContent = "no usage yet"; return; }
  const parent = state.usageNode || null;
  const shown = state.tree.nodes.filter((n) => n.parent === parent).map((n) => n.path);
  const W = 1000, Hh = 260, L = 52, R = 10, T = 10, B = 26;
  // from the first bucket with usage (at least a day shown), so a young service is not a flat line
  let first = u.starts.length - 1;
  for (const p of shown) for (const k of ["owed", "delivered"]) {
    const i = u.nodes[p][k].findIndex((v) => v > 0);
    if (i >= 0) first = Math.min(first, i);
  }
  first = Math.max(0, Math.min(first - 1, u.starts.length - 24));
  // the current bucket is partial: shown once a tenth of it has passed
  const last = u.as_of_t - u.starts[u.starts.length - 1] < 0.1 * u.bucket_s ? u.starts.length - 1 : u.starts.length;
  const starts = u.starts.slice(first, last);
  const series = (p, k) => u.nodes[p][k].slice(first, last);
  const n = starts.length;
  let ymax = 1;
  for (const p of shown) for (const k of ["owed", "delivered"]) for (const v of series(p, k)) ymax = Math.max(ymax, v);
  ymax *= 1.08;
  const x = (i) => L + ((W - L - R) * i) / Math.max(1, n - 1);
  const y = (v) => T + (Hh - T - B) * (1 - v / ymax);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${Hh}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  for (let k = 0; k <= 4; k++) {
    const v = (ymax * k) / 4;
    add("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "axis", "stroke-dasharray": k ? "2,3" : "" });
    add("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, fmt(v, 0));
  }
  for (let i = 0; i < n; i += Math.max(1, Math.floor(n / 7))) {
    add("text", { x: x(i), y: Hh - 8, "text-anchor": "middle" }, when(starts[i]).replace(" UTC", ""));
  }
  const legend = [];
  shown.forEach((p, k) => {
    const c = COLORS[k % COLORS.length];
    for (const [key, dash] of [["owed", "6,4"], ["delivered", ""]]) {
      const pts = series(p, key).map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
      add("polyline", { points: pts, fill: "none", stroke: c, "stroke-width": key === "delivered" ? 2 : 1.5,
        "stroke-dasharray": dash, "data-node": p, "data-kind": key });
    }
    const sw = el("i");
    sw.style.background = c;
    legend.push(el("span", {}, sw, p));
  });
  box.replaceChildren(svg);
  $("usage-legend").replaceChildren(...legend, el("span", {}, "GPU-equivalents, per hour"));
}

// ------------------------------------------------------------------ queue and running
// a row a keyboard can reach: Tab to it, Enter (or Space) opens its job's explanation, arrows move
function jobRow(r, ...cells) {
  const tr = el("tr", { "data-job": r.id, tabIndex: 0 }, ...cells);
  if (r.id === state.selected) tr.classList.add("selected");
  tr.setAttribute("aria-label", `job ${r.id} of ${r.group}: press Enter for why`);
  tr.addEventListener("click", () => openExplain(r.id));
  tr.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); openExplain(r.id); }
    else if (ev.key === "ArrowDown" && tr.nextElementSibling) { ev.preventDefault(); tr.nextElementSibling.focus(); }
    else if (ev.key === "ArrowUp" && tr.previousElementSibling) { ev.preventDefault(); tr.previousElementSibling.focus(); }
  });
  return tr;
}
// redraw a table's rows, keeping the keyboard's focus on the same job across the refresh
function replaceRows(table, rows) {
  const focused = document.activeElement;
  const job = focused && table.contains(focused) ? focused.dataset.job : null;
  table.tBodies[0].replaceChildren(...rows);
  if (job) {
    const again = table.querySelector(`tr[data-job="${CSS.escape(job)}"]`);
    if (again) again.focus({ preventScroll: true });
  }
}
function jobsPath() {
  return "/api/jobs?limit=400" + (state.group ? `&group=${encodeURIComponent(state.group)}` : "");
}
// the jobs, of the group filtered on; a group a new policy removed clears the filter
async function readJobs() {
  try {
    return await api(jobsPath());
  } catch (e) {
    if (!state.group || e.message === "401") throw e;
    state.group = "";
    $("group-filter").value = "";
    return api(jobsPath());
  }
}

function renderQueue(j) {
  const pending = j.jobs.filter((r) => r.state === "pending");
  const running = j.jobs.filter((r) => r.state === "running");
  const of = state.group ? ` in ${state.group}` : "";
  $("queue-count").textContent = `${pending.length} waiting${of}`;
  $("running-count").textContent = `${running.length} jobs${of}`;
  replaceRows($("queue"), pending.slice(0, 200).map((r) => {
    const tr = jobRow(r,
      el("td", { class: "num" }, r.position ?? "new"),
      el("td", {}, r.id),
      el("td", {}, r.group),
      el("td", { class: "cls" }, r.class ?? "–"),
      el("td", { class: "user" }, r.user ?? "–"),
      el("td", { class: "num" }, r.gpus),
      el("td", { class: "num est", "data-value": r.estimate_s }, dur(r.estimate_s)),
      el("td", { class: "num" }, dur(r.waited_s)),
      el("td", { title: r.why_pending_text || "" }, HOLD_SHORT[r.why_pending || "queued"] || r.why_pending),
      el("td", { "data-value": r.next_opportunity_t ?? "" },
        r.next_opportunity_t ? `in ${dur(r.next_opportunity_in_s)}` : "–"),
    );
    return tr;
  }));
  replaceRows($("running"), running.slice(0, 100).map((r) =>
    jobRow(r,
      el("td", {}, r.id + (r.hung ? " (no progress)" : "") + progressNote(r)), el("td", {}, r.group), el("td", {}, r.class),
      el("td", { class: "user" }, r.user ?? "–"),
      el("td", { class: "num est", "data-value": r.estimate_s }, dur(r.estimate_s)),
      el("td", { class: "num" }, r.gpus), el("td", {}, r.on_nodes.join(", ")),
      el("td", { class: "num" }, dur(state.status ? state.status.now_t - r.last_start_t : null)),
      el("td", {}, when(r.last_start_t + r.protected_s)))));
}

// ------------------------------------------------------------------ explanation
async function openExplain(jobId) {
  state.selected = jobId;
  document.querySelectorAll("tr.selected").forEach((tr) => tr.classList.remove("selected"));
  document.querySelectorAll(`tr[data-job="${CSS.escape(jobId)}"]`).forEach((tr) => tr.classList.add("selected"));
  $("explain").hidden = false;
  await renderExplain();
  $("explain").scrollIntoView({ block: "nearest" });
}

async function renderExplain() {
  const jobId = state.selected;
  if (!jobId) return;
  let x;
  try {
    x = await api(`/api/jobs/${encodeURIComponent(jobId)}/explain`);
  } catch (e) {
    $("x-job").textContent = jobId;
    $("x-summary").textContent = `No explanation: ${e.message} (it may have started or ended).`;
    return;
  }
  $("x-job").textContent = jobId;
  $("x-summary").textContent = x.summary;
  if (x.job.state !== "pending") {
    for (const id of ["x-why", "x-position", "x-group-position", "x-group-debt", "x-forecast"]) $(id).textContent = "–";
    $("x-against").tBodies[0].replaceChildren();
  } else {
    $("x-why").textContent = x.why_pending_text;
    $("x-why").dataset.value = x.why_pending || "";
    $("x-position").textContent = `#${x.position ?? "–"} of ${x.queue_length}`;
    $("x-position").dataset.value = x.position ?? "";
    $("x-group-position").textContent = `#${x.group_position ?? "–"} of ${x.group_queue_length} in ${x.group.path}`;
    $("x-group-position").dataset.value = x.group_position ?? "";
    $("x-group-debt").textContent =
      `${signed(x.group.debt_gpu_h)} GPU-h (owed ${fmt(x.group.owed_gpu_h)}, delivered ${fmt(x.group.delivered_gpu_h)})`;
    $("x-group-debt").dataset.value = x.group.debt_gpu_h;
    $("x-forecast").textContent = x.next_opportunity_t
      ? `${when(x.next_opportunity_t)} (in ${dur(x.next_opportunity_t - x.as_of_t)}; a lower bound if others arrive)`
      : "not forecast within the horizon";
    $("x-forecast").dataset.value = x.next_opportunity_t ?? "";
    $("x-against").tBodies[0].replaceChildren(...x.loses_to.map((a) => el("tr", { title: a.why },
      el("td", {}, a.group), el("td", { class: "num" }, a.jobs_ahead),
      el("td", { class: "num", "data-value": a.their_debt_gpu_h }, signed(a.their_debt_gpu_h)),
      el("td", { class: "num" }, got(a.their_priority)),
      el("td", { class: "num" }, `${got(a.my_side_priority)} (${a.my_side})`))));
  }
  try {
    const d = await api(`/api/decisions?job=${encodeURIComponent(jobId)}&order=desc&limit=20`);
    $("x-decisions").replaceChildren(...d.decisions.map(decisionItem));
  } catch (e) { /* shown elsewhere */ }
}

// ------------------------------------------------------------------ decisions, exceptions, review
function decisionText(d) {
  const e = d.evidence || {};
  switch (d.decision) {
    case "start": return `started ${d.job} on ${(e.nodes || []).join(", ")}` +
      (e.waited_s !== undefined ? ` after waiting ${dur(e.waited_s)}` : "") + (e.phase === "deadline" ? " (deadline)" : "");
    case "preempt": return `preempted ${d.job} (${e.reason})` + (e.by ? ` for ${e.by}` : "") +
      (e.lost_gpu_s ? `, ${fmt(e.lost_gpu_s / 3600)} GPU-h of work lost` : ", no work lost");
    case "hold": return `${d.job} waits: ${HOLD_SHORT[e.reason] || e.reason}`;
    case "reserve": return `reserved ${(e.nodes || []).join(", ")} for ${d.job}`;
    case "submit": return `${d.job} submitted by ${e.by}`;
    case "cancel": return `${d.job} cancelled by ${e.by}`;
    case "policy_version": return `policy version ${e.version} stored by ${e.by}`;
    case "policy_applied": return `policy version ${e.version} in force` +
      ((e.changes || []).length ? `: ${e.changes.join("; ")}` : "");
    case "policy_cancelled": return `${d.job} cancelled by the new policy (${e.reason})`;
    case "policy_recharged": return `${d.job} runs on, charged to ${e.charged_to || "no group"} (its group left the policy)`;
    case "policy_not_applied": return `policy version ${e.version} not applied: ${(e.why || []).join("; ")}`;
    case "exception_created": return `exception: +${e.extra_share} share for ${e.group} until ${e.expires} (${e.approver})`;
    case "exception_applied": return `exception in force: +${e.extra_share} share for ${e.group}`;
    case "exception_expired": return `exception ended: ${e.group}`;
    case "token_created": return `token ${e.name} created (${e.role}${e.node ? " of " + e.node : ""}) by ${e.by}`;
    case "token_revoked": return `token ${e.name} revoked by ${e.by}`;
    case "submit_rejected": return `${d.job} refused: ${e.reason}`;
    case "start_failed": case "preempt_failed": return `${d.decision.replace("_", " ")}: ${d.job}: ${e.reason}`;
    case "node_added": return `node ${e.node} joined (${e.gpus} ${e.gpu_type} GPUs)`;
    case "node_removed": return `node ${e.node} left the cluster` +
      ((e.running || []).length ? `; still running there: ${e.running.join(", ")}` : "");
    case "node_returned": return `node ${e.node} is back`;
    case "node_refused": case "nodes_refused": return `node change not taken: ${e.reason}`;
    case "slurm_hold": return `${d.job} held in Slurm (${e.reason})` + (e.dry_run ? " [dry run: not done]" : "");
    case "slurm_unmanaged_run": return `${d.job} runs outside fairshare (${e.reason}): not charged`;
    case "slurm_unmapped": return `${d.job}: account ${e.account} is not in the policy: ${e.reason}`;
    default: return `${d.decision}${d.job ? " " + d.job : ""}`;
  }
}
function decisionItem(d) {
  return el("li", {},
    el("details", {},
      el("summary", {}, el("span", { class: "t" }, when(d.t)), el("span", { class: `kind ${d.decision}` }, d.decision),
        " ", decisionText(d)),
      el("pre", {}, JSON.stringify(d.evidence, null, 2))));
}
function renderDecisions(d) { $("decisions").replaceChildren(...d.decisions.map(decisionItem)); }
function renderExceptions(list, now) {
  $("exceptions").tBodies[0].replaceChildren(...(list.length ? list.map((e) => el("tr", {},
    el("td", {}, e.group), el("td", { class: "num" }, `+${e.extra_share}`),
    el("td", {}, `${when(e.expires_t)} (in ${dur(e.expires_t - now)})`), el("td", {}, e.approver || "–"),
    el("td", {}, e.reason || ""))) : [el("tr", {}, el("td", { colSpan: 5 }, "none"))]));
}
function renderReview(r) {
  const items = [];
  for (const n of r.nodes_past_review || []) {
    const late = n.days_overdue > 0 ? `${n.days_overdue} day${n.days_overdue > 1 ? "s" : ""} overdue` : "due today";
    items.push(el("li", { "data-path": n.path }, el("b", {}, n.path), ` review ${n.review} (${late})`,
      n.owner ? ` — owner ${n.owner}` : "", n.hypothesis ? ` — hypothesis: “${n.hypothesis}”` : ""));
  }
  for (const e of r.exceptions_expiring || []) {
    items.push(el("li", {}, `exception +${e.extra_share} for ${e.group} ends ${e.expires.replace("T", " ")} ` +
      `(in ${dur(e.seconds_left)})`));
  }
  $("review").replaceChildren(...(items.length ? items : [el("li", {}, "nothing due")]));
}

// ------------------------------------------------------------------ refresh
async function refresh() {
  // one refresh chain: a redraw asked for now (a filter changed) replaces the one scheduled, and an
  // answer to an older request (another filter) is dropped
  clearTimeout(state.timer);
  const gen = ++state.gen;
  try {
    const [status, tree, jobs] = await Promise.all([api("/api/status"), api("/api/tree"), readJobs()]);
    if (gen !== state.gen) return;
    renderStatus(status);
    renderTree(tree);
    renderQueue(jobs);
    renderExceptions(status.exceptions_in_force, status.now_t);
    const [usage, decisions, review] = await Promise.all([
      api("/api/usage"), api("/api/decisions?order=desc&limit=40"), api("/api/review?days=14")]);
    renderUsage(usage);
    renderDecisions(decisions);
    renderReview(review);
    if (state.selected) await renderExplain();
    document.body.dataset.view = tree.view;
    document.body.dataset.group = state.group;
  } catch (e) {
    if (e.message !== "401") {
      $("banner").hidden = false;
      $("banner").textContent = `Cannot read the API: ${e.message}`;
    }
  }
  if (state.token && gen === state.gen) state.timer = setTimeout(refresh, REFRESH_MS);
}

function init() {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    localStorage.setItem("fairshare-token", $("token-input").value.trim());
    start();
  });
  $("logout").addEventListener("click", (ev) => { ev.preventDefault(); logout(); });
  $("x-close").addEventListener("click", closeExplain);
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !$("explain").hidden) closeExplain();
  });
  $("group-filter").addEventListener("change", (ev) => { state.group = ev.target.value; refresh(); });
  $("usage-node").addEventListener("change", (ev) => { state.usageNode = ev.target.value; refresh(); });
  start();
}

function closeExplain() {
  const back = state.selected && document.querySelector(`#queue tr[data-job="${CSS.escape(state.selected)}"],` +
    `#running tr[data-job="${CSS.escape(state.selected)}"]`);
  state.selected = null;
  $("explain").hidden = true;
  document.querySelectorAll("tr.selected").forEach((tr) => tr.classList.remove("selected"));
  if (back) back.focus();
}

function start() {
  state.token = takeToken();
  if (!state.token) { logout(); return; }
  $("login").hidden = true;
  $("main").hidden = false;
  clearTimeout(state.timer);
  refresh();
}
document.addEventListener("DOMContentLoaded", init);
