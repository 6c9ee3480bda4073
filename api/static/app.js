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

// A line chart: series [{key, points: [[x, y]], step}], axes from the domains, optional horizontal lines.
function chart(opts) {
  const W = 440, H = 230, L = 46, R = 12, T = 10, B = 58;
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
  opts.xTicks.forEach(([t, text], i) => {
    const anchor = i === 0 ? "start" : i === opts.xTicks.length - 1 ? "end" : "middle";
    const label = svg("text", { x: sx(t), y: H - B + 14, "text-anchor": anchor });
    label.textContent = text;
    root.append(label);
  });
  root.append(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  root.append(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
  const xl = svg("text", { x: (L + W - R) / 2, y: H - B + 28, "text-anchor": "middle" });
  xl.textContent = opts.xLabel;
  root.append(xl);
  for (const h of opts.hlines || []) {
    root.append(svg("line", { x1: L, x2: W - R, y1: sy(h.y), y2: sy(h.y), class: h.cls }));
    const t = svg("text", { x: W - R - 2, y: sy(h.y) - 3, "text-anchor": "end" });
    t.textContent = h.label;
    root.append(t);
  }
  let legendX = L;
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
    // legend entry: line sample, marker, name
    const ly = H - 12;
    root.append(svg("line", { x1: legendX, x2: legendX + 22, y1: ly, y2: ly, stroke: color, "stroke-width": 1.8, "stroke-dasharray": DASHES[s.key] }));
    root.append(marker(MARKERS[s.key], legendX + 11, ly, color));
    const name = svg("text", { x: legendX + 26, y: ly + 4 });
    name.textContent = s.legend || LABELS[s.key];
    root.append(name);
    legendX += 30 + 6.2 * name.textContent.length;
  }
  return root;
}

async function api(path) {
  const key = sessionStorage.getItem(KEY_STORE);
  const r = await fetch(path, { headers: { Authorization: `Bearer ${key}` }, cache: "no-store" });
  if (r.status === 401) throw new Error("the API key was refused (401): enter a key from DARRM_API_KEYS");
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

function facts(pairs) {
  const dl = el("dl");
  for (const [k, v] of pairs) dl.append(el("dt", {}, k), el("dd", {}, v));
  return dl;
}

function timeLabel(ms) {
  return new Date(ms).toISOString().slice(11, 19);
}

async function ledgerCard(l) {
  const card = el("div", { class: "card ledger", "data-ledger-id": l.id });
  card.append(el("h3", {}, `${l.name}`), facts([
    ["id", l.id],
    ["answers", String(l.answers)],
    ["ε spent", `${fmt(l.epsilon_spent, 4)} of ${fmt(l.epsilon_budget, 4)} (remaining ${fmt(l.epsilon_remaining, 4)})`],
    ["δ", `${fmt(l.delta_target, 3)} (fixed: every statement is (ε, δ)-DP at this δ)`],
    ["composition", l.composition],
  ]));
  const h = await api(`/v1/ledgers/${l.id}/spends`);
  const start = Date.parse(h.created_at);
  const eps = [[start, 0]];
  for (const s of h.items) {
    eps.push([Date.parse(s.at), s.epsilon_spent / h.epsilon_budget]);
  }
  const last = eps[eps.length - 1][0];
  const end = last > start ? last + 0.04 * (last - start) : start + 1000;
  const top = Math.max(1, ...eps.map((p) => p[1])) * 1.08;
  const series = [{ key: "epsilon", points: eps, step: true }];
  card.append(chart({
    title: `spend of ledger ${l.name} over time`, x: [start, end], y: [0, top],
    yTicks: [0, 0.25, 0.5, 0.75, 1], xTicks: [[start, timeLabel(start)], [end, timeLabel(end)]],
    xLabel: `time (UTC)${h.truncated ? ", most recent spends only" : ""}`,
    hlines: [{ y: 1, label: "budget", cls: "budget" }], series: series,
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
  const ticks = [0, Math.floor(t.K / 2), t.K].map((l) => [l, String(l)]);
  card.append(chart({ title: `γ of table ${t.id}`, x: [0, t.K], y: [0, 1.05], yTicks: [0, 0.25, 0.5, 0.75, 1],
    xTicks: ticks, xLabel: "l = number of teachers voting 1", series: series }));
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
    status("Enter an API key. It is kept in this tab only (sessionStorage) and sent as a Bearer header.", false);
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
  document.getElementById("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORE);
    document.getElementById("ledgers").replaceChildren();
    document.getElementById("tables").replaceChildren();
    load();
  });
  load();
}

document.addEventListener("DOMContentLoaded", init);
