// darrm-opt dashboard: plain JS and SVG, no external assets. Reads /v1 with the key kept in sessionStorage.
"use strict";

const KEY_STORE = "darrm-api-key";
const SVG_NS = "http://www.w3.org/2000/svg";
const COLORS = { opt: "#1f5fbf", sub: "#d9731a", dsub: "#2e8b57", const: "#8e44ad", epsilon: "#1f5fbf", };
const DASHES = { opt: "", sub: "6 3", dsub: "2 3", const: "9 3 2 3", epsilon: "" };
const MARKERS = { opt: "circle", sub: "square", dsub: "triangle", const: "diamond", epsilon: "circle" };
const LABELS = { opt: "γ_opt", sub: "γ_Sub", dsub: "γ_DSub", const: "γ_const", epsilon: `ε spent / ε budget (at the fixed δ)` };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

function status(text, isError) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

function fmt(x, digits) {
  if (x === null || x === undefined) return "—";
  if (x !== 0 && (Math.abs(x) < 1e-3 || Math.abs(x) >= 1e5)) return x.toExponential(digits - 1);
  return Number(x.toPrecision(digits)).toString();
}

function marker(kind, x, y, color) {
  const r = 3.2;
  if (kind === "circle") return svg("circle", { cx: x, cy: y, r: r, fill: color });
  if (kind === "square") return svg("rect", { x: x - r, y: y - r, width: 2 * r, height: 2 * r, fill: "#fff", stroke: color, "stroke-width": 1.5 });
  const pts = kind === "triangle"
    ? [[x, y - r - 1], [x - r - 1, y + r], [x + r + 1, y + r]]
    : [[x, y - r - 1], [x + r + 1, y], [x, y + r + 1], [x - r - 1, y]];
  return svg("polygon", { points: pts.map((p) => p.join(",")).join(" "), fill: kind === "triangle" ? color : "#fff", stroke: color, "stroke-width": 1.5 });
}

// A line chart with labelled axes: series [{key, points: [[x, y]], step, legend}], optional horizontal lines.
// Returns a block: the SVG, then its legend as an HTML list (wraps, never clipped).
function chart(opts) {
  const W = 440, H = 210, L = 58, R = 12, T = 10, B = 40;
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": opts.title });
  const [x0, x1] = opts.x, [y0, y1] = opts.y;
  const sx = (x) => L + ((x - x0) / (x1 - x0 || 1)) * (W - L - R);
  const sy = (y) => H - B - ((y - y0) / (y1 - y0 || 1)) * (H - T - B);
  for (const t of opts.yTicks) {
    root.append(svg("line", { x1: L, x2: W - R, y1: sy(t), y2: sy(t), class: "grid" }));
    const label = svg("text", { x: L - 4, y: sy(t) + 4, "text-anchor": "end" });
    label.textContent = fmt(t, 3);
    root.append(label);
  }
  for (const [t, text] of opts.xTicks) {
    root.append(svg("line", { x1: sx(t), x2: sx(t), y1: H - B, y2: H - B + 4, class: "axis" }));
    const label = svg("text", { x: sx(t), y: H - B + 15, "text-anchor": "middle" });
    label.textContent = text;
    root.append(label);
  }
  root.append(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  root.append(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
  const xl = svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", class: "x-label" });
  xl.textContent = opts.xLabel;
  root.append(xl);
  const cy = (T + H - B) / 2;
  const yl = svg("text", { x: 12, y: cy, "text-anchor": "middle", transform: `rotate(-90 12 ${cy})`, class: "y-label" });
  yl.textContent = opts.yLabel;
  root.append(yl);
  for (const h of opts.hlines || []) {
    root.append(svg("line", { x1: L, x2: W - R, y1: sy(h.y), y2: sy(h.y), class: h.cls }));
    const t = svg("text", { x: W - R - 2, y: sy(h.y) - 3, "text-anchor": "end" });
    t.textContent = h.label;
    root.append(t);
  }
  const legend = el("ul", { class: "legend" });
  for (const s of opts.series) {
    const color = COLORS[s.key];
    let d = "";
    s.points.forEach(([x, y], i) => {
      if (i === 0) d += `M${sx(x)},${sy(y)}`;
      else if (s.step) d += `H${sx(x)}V${sy(y)}`;
      else d += `L${sx(x)},${sy(y)}`;
    });
    const g = svg("g", { "data-series": s.key, "data-points": s.points.length });
    g.append(svg("path", { d: d, fill: "none", stroke: color, "stroke-width": 1.8, "stroke-dasharray": DASHES[s.key] }));
    for (const [x, y] of s.points) g.append(marker(MARKERS[s.key], sx(x), sy(y), color));
    root.append(g);
    const swatch = svg("svg", { width: 26, height: 10, "aria-hidden": "true" });
    swatch.append(svg("line", { x1: 0, x2: 26, y1: 5, y2: 5, stroke: color, "stroke-width": 1.8, "stroke-dasharray": DASHES[s.key] }));
    swatch.append(marker(MARKERS[s.key], 13, 5, color));
    legend.append(el("li", { "data-legend": s.key }, swatch, s.legend || LABELS[s.key]));
  }
  for (const h of opts.hlines || []) {
    const swatch = svg("svg", { width: 26, height: 10, "aria-hidden": "true" });
    swatch.append(svg("line", { x1: 0, x2: 26, y1: 5, y2: 5, class: h.cls }));
    legend.append(el("li", { "data-legend": h.cls }, swatch, h.legend || h.label));
  }
  return el("div", { class: "chart" }, root, legend);
}

// Integer ticks 0..n (at most about 6 of them).
function countTicks(n) {
  const step = Math.max(1, Math.ceil(n / 5));
  const ticks = [];
  for (let t = 0; t <= n; t += step) ticks.push([t, String(t)]);
  if (ticks[ticks.length - 1][0] !== n) ticks.push([n, String(n)]);
  return ticks;
}

async function api(path, body) {
  const key = sessionStorage.getItem(KEY_STORE);
  const init = { headers: { Authorization: `Bearer ${key}` }, cache: "no-store" };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (r.status === 401) throw new Error("the API key was refused (401): enter a key from DARRM_API_KEYS");
  if (!r.ok) {
    let detail = `HTTP ${r.status}`;
    try {
      const j = await r.json();
      detail = Array.isArray(j.detail) ? j.detail.map((d) => `${(d.loc || []).slice(1).join(".")}: ${d.msg}`).join("; ") : String(j.detail || detail);
    } catch (e) { /* not JSON */ }
    throw new Error(`${path}: ${detail}`);
  }
  return r.json();
}

// The fields of a creation form that were filled in, numbers as numbers (the API takes no "1" for 1).
function formBody(form, text) {
  const body = {};
  for (const [k, v] of new FormData(form).entries()) {
    const value = String(v).trim();
    if (value === "") continue;
    body[k] = text.includes(k) ? value : Number(value);
  }
  return body;
}

function createStatus(text, isError) {
  const s = document.getElementById("create-status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

async function createLedger(ev) {
  ev.preventDefault();
  try {
    const made = await api("/v1/ledgers", formBody(ev.target, ["name"]));
    createStatus(`created ledger ${made.name} (${made.id})`, false);
    ev.target.reset();
    await load();
  } catch (e) {
    createStatus(String(e.message || e), true);
  }
}

async function createTable(ev) {
  ev.preventDefault();
  const body = formBody(ev.target, ["teachers"]);
  if (body.teachers === "shared") delete body.teachers;
  try {
    createStatus("solving and certifying…", false);
    let made = await api("/v1/tables", body);
    while (made.job_id && !made.table) {  // a long solve runs as a job: follow it
      createStatus(`solving in the background (job ${made.job_id}: ${made.stage || made.status || "queued"})…`, false);
      if (made.status === "failed" || made.status === "stale") throw new Error(made.error || `job ${made.status}`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      made = await api(`/v1/jobs/${made.job_id}`);
    }
    const table = made.table || made;
    createStatus(`table ${table.id}: ${table.certificate && table.certificate.certified ? "CERTIFIED" : "made"}`, false);
    await load();
  } catch (e) {
    createStatus(String(e.message || e), true);
  }
}

function facts(pairs) {
  const dl = el("dl");
  for (const [k, v] of pairs) dl.append(el("dt", {}, k), el("dd", {}, v));
  return dl;
}

async function ledgerCard(l) {
  const card = el("div", { class: "card ledger", "data-ledger-id": l.id });
  const share = l.epsilon_budget > 0 ? l.epsilon_spent / l.epsilon_budget : 0;
  const fill = el("div", { "data-share": share.toFixed(4) });
  fill.style.width = `${Math.min(100, 100 * share).toFixed(1)}%`;  // CSSOM: the CSP allows no inline style attribute
  const bar = el("div", { class: share > 1 ? "spendbar over" : "spendbar", title: "ε spent / ε budget" }, fill);
  card.append(el("h3", {}, `${l.name}: ${fmt(100 * share, 3)} % of the ε budget spent`), bar, facts([
    ["id", l.id],
    ["answers", String(l.answers)],
    ["ε spent", `${fmt(l.epsilon_spent, 4)} of ${fmt(l.epsilon_budget, 4)} (remaining ${fmt(l.epsilon_remaining, 4)})`],
    ["δ", `${fmt(l.delta_target, 3)} (fixed: every statement is (ε, δ)-DP at this δ)`],
    ["composition", l.composition],
  ]));
  const h = await api(`/v1/ledgers/${l.id}/spends`);
  // x: answers paid so far (the history may hold only the most recent requests: count back from the total)
  const listed = h.items.reduce((n, s) => n + s.rows, 0);
  let answers = h.truncated ? l.answers - listed : 0;
  const eps = [[answers, h.truncated && h.items.length ? null : 0]];
  for (const s of h.items) {
    answers += s.rows;
    eps.push([answers, s.epsilon_spent]);
  }
  if (eps[0][1] === null) eps.shift();
  const x0 = eps.length ? eps[0][0] : 0;
  const x1 = Math.max(x0 + 1, answers);
  const top = Math.max(h.epsilon_budget, ...eps.map((p) => p[1])) * 1.1;
  const yTicks = [0, 0.25, 0.5, 0.75, 1].map((f) => f * h.epsilon_budget);
  card.append(chart({
    title: `ε spent by ledger ${l.name} against the answers it paid`, x: [x0, x1], y: [0, top],
    yTicks: yTicks, xTicks: countTicks(x1).filter(([t]) => t >= x0),
    xLabel: `answers paid${h.truncated ? " (most recent requests only)" : ""}`, yLabel: `ε spent (at δ = ${fmt(h.delta_budget, 3)})`,
    hlines: [{ y: h.epsilon_budget, label: "budget", cls: "budget", legend: `ε budget ${fmt(h.epsilon_budget, 4)}` }],
    series: [{ key: "epsilon", points: eps, step: true, legend: "ε spent after each paid request" }],
  }));
  if (!h.items.length) card.append(el("p", { class: "empty" }, "no answers paid yet"));
  return card;
}

async function tableCard(t) {
  const card = el("div", { class: "card table", "data-table-id": t.id });
  const pate = t.teachers === "disjoint-nonprivate";  // PATE setting: no m, no teacher (ε, Δ)
  const mc = t.classes != null;  // multi-class (PATE setting): target_epsilon, certificate by histogram types
  const title = mc ? `K=${t.K}, C=${t.classes} classes, PATE setting: (ε=${fmt(t.target_epsilon, 4)}, δ=${fmt(t.delta, 3)})-DP per answer`
    : pate ? `K=${t.K}, PATE setting: (ε=${fmt(t.epsilon, 4)}, δ=${fmt(t.delta, 3)})-DP per answer`
    : `K=${t.K}, m=${fmt(t.m, 4)}: (mε=${fmt(t.m * t.epsilon, 4)}, δ=${fmt(t.delta, 3)})-DP`;
  const verdict = t.certificate.certified ? "CERTIFIED" : "NOT CERTIFIED";
  card.append(el("h3", {}, title), facts([
    ["id", t.id],
    ["teachers", pate ? "non-private, on disjoint shards (one record moves one vote)"
      : `${t.teachers || "shared"}: each (ε=${fmt(t.epsilon, 4)}, Δ=${fmt(t.teacher_delta, 3)})-DP`],
    ["prior, solver", `${t.prior}, ${t.solver}`],
    ["certificate", mc ? `${verdict}: max divergence ${fmt(t.certificate.max_hockey_stick, 8)} ≤ δ = ${fmt(t.delta, 8)}`
      : `${verdict}: max cost ${fmt(t.certificate.max_privacy_cost, 8)} ≤ ${pate ? "e^ε" : "e^(mε)"} − 1 + 2δ = ${fmt(t.certificate.bound, 8)}`],
  ]));
  const b = await api(`/v1/tables/${t.id}/baselines`);
  const series = [];
  for (const key of ["opt", "sub", "dsub", "const"]) {
    const g = b.gamma[key];
    if (!g) continue;
    const err = b.expected_error[key];
    series.push({ key: key, points: g.map((y, l) => [l, y]), legend: `${LABELS[key]} (E[err] ${fmt(err, 3)})` });
  }
  card.append(chart({ title: `γ of table ${t.id}`, x: [0, t.K], y: [0, 1.05], yTicks: [0, 0.25, 0.5, 0.75, 1],
    xTicks: countTicks(t.K), xLabel: mc ? "gap between the top two class counts" : "l = number of teachers voting 1",
    yLabel: "γ(l) = P(majority)", series: series }));
  return card;
}

async function fill(containerId, items, make, emptyText) {
  const box = document.getElementById(containerId);
  box.replaceChildren();
  if (!items.length) box.append(el("p", { class: "empty" }, emptyText));
  for (const item of items) box.append(await make(item));
}

async function load() {
  if (!sessionStorage.getItem(KEY_STORE)) {
    status("Enter an API key (a key from the server's DARRM_API_KEYS) in the form above, or open this page as "
      + "/ui#key=YOUR-KEY. The key is kept in this tab only (sessionStorage; the #key= part of a link is never "
      + "sent to the server) and sent as a Bearer header.", false);
    return;
  }
  status("loading…", false);
  try {
    const [ledgers, tables] = await Promise.all([api("/v1/ledgers?limit=100"), api("/v1/tables?limit=50")]);
    await fill("ledgers", ledgers.items, ledgerCard, "no ledgers yet");
    await fill("tables", tables.items, tableCard, "no tables yet");
    status(`${ledgers.total} ledger(s), ${tables.total} table(s); loaded ${new Date().toISOString().slice(0, 19)}Z`, false);
    document.body.dataset.loaded = "true";
  } catch (e) {
    status(String(e.message || e), true);
    document.body.dataset.loaded = "error";
  }
}

function init() {
  if (location.hash.startsWith("#key=")) {  // a key handed over in the fragment (never sent to the server)
    sessionStorage.setItem(KEY_STORE, decodeURIComponent(location.hash.slice(5)));
    history.replaceState(null, "", location.pathname);
  }
  document.getElementById("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = document.getElementById("key");
    sessionStorage.setItem(KEY_STORE, input.value.trim());
    input.value = "";
    load();
  });
  document.getElementById("new-ledger").addEventListener("submit", createLedger);
  document.getElementById("new-table").addEventListener("submit", createTable);
  document.getElementById("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORE);
    document.getElementById("ledgers").replaceChildren();
    document.getElementById("tables").replaceChildren();
    load();
  });
  load();
}

document.addEventListener("DOMContentLoaded", init);
