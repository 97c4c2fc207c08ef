// reasonrl viewer: curves (uPlot, runs overlaid), searchable rollout groups, eval tables.
// Everything comes from the read-only JSON API of reasonrl.viewer.server; no network beyond it.
"use strict";

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f"];
const DEFAULT_METRICS = [
  /^reward\/mean$/, /^reward\/accuracy$/, /^eval\/accuracy$/, /^rollout\/response_length$/,
  /^actor\/entropy$/, /^verifier\//, /^perf\/(step|generate|train)_seconds$/,
];
const NAMESPACE_ORDER = ["reward", "eval", "rollout", "actor", "critic", "verifier", "perf"];
const PAGE = 50;
const state = { runs: [], metrics: [], shown: new Set(), chosen: new Set(), offset: 0, charts: [] };

const $ = (sel) => document.querySelector(sel);
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}
async function api(route, params = {}) {
  const qs = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v != null));
  const r = await fetch(`/api/${route}?${qs}`);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
const fmt = (v) => (v == null ? "" : typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(4)) : String(v));

// ---- curves ----
function renderRunToggles() {
  const box = $("#runs");
  box.replaceChildren();
  state.runs.forEach((run, i) => {
    const cb = el("input", { type: "checkbox" });
    cb.checked = state.shown.has(i);
    cb.addEventListener("change", () => { cb.checked ? state.shown.add(i) : state.shown.delete(i); renderCharts(); });
    const sw = el("span", { class: "swatch" });
    sw.style.background = COLORS[i % COLORS.length];
    box.append(el("label", {}, cb, sw, run.name));
  });
}

function metricKeys() {
  const keys = new Set();
  state.metrics.forEach((m) => Object.keys(m.series).forEach((k) => keys.add(k)));
  return [...keys].sort();
}

function renderMetricList() {
  const filter = $("#metric-filter").value.trim().toLowerCase();
  const list = $("#metric-list");
  list.replaceChildren();
  let ns = null;
  for (const k of metricKeys()) {
    if (filter && !k.toLowerCase().includes(filter)) continue;
    const space = k.includes("/") ? k.split("/")[0] : "other";
    if (space !== ns) { ns = space; list.append(el("h4", { text: ns })); }
    const cb = el("input", { type: "checkbox", "data-key": k });
    cb.checked = state.chosen.has(k);
    cb.addEventListener("change", () => { cb.checked ? state.chosen.add(k) : state.chosen.delete(k); renderCharts(); });
    list.append(el("label", { title: k }, cb, " " + k));
  }
}

function renderCharts() {
  state.charts.forEach((c) => c.destroy());
  state.charts = [];
  const box = $("#curves");
  box.replaceChildren();
  const runs = [...state.shown].sort((a, b) => a - b);
  const rank = (k) => { const i = NAMESPACE_ORDER.indexOf(k.split("/")[0]); return i < 0 ? NAMESPACE_ORDER.length : i; };
  const keys = metricKeys().filter((k) => state.chosen.has(k)).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : 1));
  if (!keys.length || !runs.length) box.append(el("p", { class: "empty", text: "no metrics chosen or no run shown" }));
  const width = Math.max(320, Math.floor(((box.clientWidth || 1000) - 16) / 2) - 30);  // two panels a row (room for a scrollbar)
  for (const key of keys) {
    const parts = [], series = [{}];
    for (const i of runs) {
      const m = state.metrics[i];
      if (!m.series[key]) continue;
      parts.push([m.steps, m.series[key]]);
      series.push({ label: state.runs[i].name, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
                    points: { show: m.steps.length < 30 } });
    }
    if (!parts.length) continue;
    const data = parts.length === 1 ? parts[0] : uPlot.join(parts);
    const panel = el("div", { class: "panel", "data-key": key });
    box.append(panel);
    state.charts.push(new uPlot({ title: key, width, height: 220, series,
      scales: { x: { time: false } }, axes: [{ label: "step" }, {}], legend: { live: true } }, data, panel));
  }
}

// ---- rollouts ----
function highlight(text, term) {
  const frag = document.createDocumentFragment();
  if (!term) { frag.append(text); return frag; }
  const lower = text.toLowerCase(), t = term.toLowerCase();
  let at = 0;
  for (let i = lower.indexOf(t); i >= 0; i = lower.indexOf(t, at)) {
    frag.append(text.slice(at, i), el("mark", { text: text.slice(i, i + t.length) }));
    at = i + t.length;
  }
  frag.append(text.slice(at));
  return frag;
}

function completionCard(c, j, term) {
  const good = typeof c.reward === "number" && c.reward >= 1;
  const dl = el("dl");
  for (const [k, v] of [["reward", fmt(c.reward)], ["extracted", c.extracted == null ? "(none)" : String(c.extracted)],
                        ["reason", c.reason || ""], ["finish", c.finish_reason || ""], ["tokens", fmt(c.tokens)]]) {
    dl.append(el("dt", { text: k }), el("dd", { class: k, text: v }));
  }
  return el("div", { class: "completion " + (good ? "good" : "bad") }, el("div", { text: `#${j}` }), dl,
            el("div", { class: "text" }, highlight(String(c.text || ""), term)));
}

function groupCard(g, term) {
  const mean = g.mean_reward == null ? "" : g.mean_reward.toFixed(3);
  const head = el("div", { class: "head" }, el("span", { class: "badge", text: `step ${g.step}` }),
    el("span", { class: "meta", text: g.data_source }), el("span", { text: `mean reward ${mean}` }),
    el("span", { class: "meta", text: `${g.completions.length} completions` }),
    el("span", { class: "meta", text: String(g.prompt).slice(0, 90) }));
  const body = el("div", { class: "body" },
    el("div", { class: "prompt" }, highlight(String(g.prompt), term)),
    el("p", { text: "ground truth: " + (typeof g.ground_truth === "string" ? g.ground_truth : JSON.stringify(g.ground_truth)) }),
    ...("pseudo_label" in g ? [el("p", { text: "voted label: " + (g.pseudo_label == null ? "none (nobody answered)" : g.pseudo_label) })] : []),
    el("div", { class: "completions" }, ...g.completions.map((c, j) => completionCard(c, j, term))));
  const card = el("div", { class: "group", "data-step": g.step }, head, body);
  head.addEventListener("click", () => card.classList.toggle("open"));
  return card;
}

function fillSelect(sel, values) {
  const keep = sel.value;
  sel.replaceChildren(el("option", { value: "", text: "all" }), ...values.map((v) => el("option", { value: v, text: v })));
  sel.value = values.map(String).includes(keep) ? keep : "";
}

async function loadRollouts() {
  const term = $("#rollout-search").value.trim();
  const params = { run: $("#r-run").value, step: $("#r-step").value, data_source: $("#r-source").value,
                   min_reward: $("#r-min").value, max_reward: $("#r-max").value, q: term, offset: state.offset, limit: PAGE };
  try {
    const res = await api("rollouts", params);
    fillSelect($("#r-step"), res.steps);
    fillSelect($("#r-source"), res.data_sources);
    const last = Math.min(res.offset + res.groups.length, res.total);
    $("#rollout-count").textContent = `${res.total} groups match` + (res.total ? ` (showing ${res.offset + 1}-${last})` : "");
    $("#rollout-list").replaceChildren(...res.groups.map((g) => groupCard(g, term)));
    if (res.groups.length === 1) $("#rollout-list .group").classList.add("open");
    $("#r-prev").disabled = res.offset === 0;
    $("#r-next").disabled = last >= res.total;
  } catch (e) {
    $("#rollout-count").replaceChildren(el("span", { class: "error", text: String(e.message) }));
  }
}

// ---- evals ----
function table(columns, rows) {
  const t = el("table", {}, el("tr", {}, ...columns.map((c) => el("th", { text: c }))));
  for (const r of rows) t.append(el("tr", {}, ...r.map((v) => el("td", { text: fmt(v) }))));
  return t;
}

async function loadEvals() {
  const box = $("#evals");
  box.replaceChildren();
  for (const [i, run] of state.runs.entries()) {
    const res = await api("evals", { run: i });
    for (const t of res.tables) {
      box.append(el("h3", { text: `${run.name}: ${t.file}` }));
      if (t.kind === "results") {
        const cols = [...new Set(Object.values(t.benchmarks).flatMap(Object.keys))].filter((c) => c !== "se");
        box.append(table(["benchmark", ...cols], Object.entries(t.benchmarks).map(([b, r]) => [b, ...cols.map((c) => r[c])])));
        const macro = Object.entries(t.macro || {});
        if (macro.length) box.append(table(["macro average", "mean@n"], macro));
      } else {
        const cols = [...new Set(t.rows.flatMap((r) => Object.keys(r)))];
        box.append(table(cols, t.rows.map((r) => cols.map((c) => (typeof r[c] === "object" && r[c] ? JSON.stringify(r[c]) : r[c])))));
      }
    }
  }
  if (!box.children.length) box.append(el("p", { class: "empty", text: "no eval results (results.json) under these runs" }));
}

// ---- live: poll the runs' files while a run trains ----
let liveTimer = null;
async function refresh() {
  const fresh = await Promise.all(state.runs.map((_, i) => api("metrics", { run: i })));
  const size = (ms) => ms.map((m) => m.steps.length).join(",");
  if (size(fresh) === size(state.metrics)) return;
  const known = new Set(metricKeys());
  state.metrics = fresh;
  metricKeys().forEach((k) => { if (!known.has(k) && DEFAULT_METRICS.some((re) => re.test(k))) state.chosen.add(k); });
  renderMetricList();
  renderCharts();
  if ($("#tab-rollouts").classList.contains("active")) loadRollouts();
}

// ---- wiring ----
function showTab(name) {
  document.querySelectorAll(".tab").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
  document.querySelectorAll(".pane").forEach((p) => p.classList.toggle("active", p.id === `tab-${name}`));
  if (name === "curves") renderCharts();
}

async function main() {
  document.querySelectorAll(".tab").forEach((b) => b.addEventListener("click", () => showTab(b.dataset.tab)));
  state.runs = await api("runs");
  state.runs.forEach((_, i) => state.shown.add(i));
  state.metrics = await Promise.all(state.runs.map((_, i) => api("metrics", { run: i })));
  metricKeys().forEach((k) => { if (DEFAULT_METRICS.some((re) => re.test(k))) state.chosen.add(k); });
  renderRunToggles();
  renderMetricList();
  renderCharts();
  $("#metric-filter").addEventListener("input", renderMetricList);
  $("#live").addEventListener("change", (e) => {
    clearInterval(liveTimer);
    liveTimer = e.target.checked ? setInterval(() => refresh().catch(() => {}), 5000) : null;
  });
  fillSelect($("#r-run"), []);
  $("#r-run").replaceChildren(...state.runs.map((r, i) => el("option", { value: i, text: r.name })));
  $("#rollout-form").addEventListener("submit", (e) => { e.preventDefault(); state.offset = 0; loadRollouts(); });
  for (const id of ["#r-run", "#r-step", "#r-source"]) $(id).addEventListener("change", () => { state.offset = 0; loadRollouts(); });
  $("#r-prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); loadRollouts(); });
  $("#r-next").addEventListener("click", () => { state.offset += PAGE; loadRollouts(); });
  await Promise.all([loadRollouts(), loadEvals()]);
  window.__readyAt = performance.now();
  document.body.dataset.ready = "1";
}

main().catch((e) => {
  document.body.prepend(el("p", { class: "error", id: "fatal", text: "viewer error: " + e.message }));
  document.body.dataset.ready = "error";
});
