// featurestream's web page: the streams of the caller's tenant and, for one stream, its
// selection (scores as bars), the selection over time, the live decisions (WebSocket),
// stability and evaluation. Plain JavaScript and SVG; every request goes to this server.
"use strict";

const KEY_STORAGE = "featurestream.key";
const SVG_NS = "http://www.w3.org/2000/svg";
const STREAMS_REFRESH_MS = 5000;
const EVENTS_REFRESH_MS = 5000;
const FEED_MAX = 200;
const TIMELINE_MAX_COLUMNS = 120;
const TIMELINE_MAX_ROWS = 80;
const SELECTION_MAX_ROWS = 200;
const HISTORY_MAX_PAGES = 50;

// The API lives next to /ui/ (relative URLs keep a path prefix of a reverse proxy).
const API = new URL("../", document.baseURI);

const state = {
  key: sessionStorage.getItem(KEY_STORAGE),
  algorithms: new Map(),
  streams: [],
  current: null, // {id, resource, algorithm, changes, lastEvent, socket, ...}
  authWaiters: [],
};

// ------------------------------------------------------------------ small helpers

function $(id) {
  return document.getElementById(id);
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function fmt(x, digits = 4) {
  if (x === null || x === undefined) return "–";
  if (typeof x !== "number") return String(x);
  if (Number.isInteger(x)) return x.toLocaleString("en");
  const a = Math.abs(x);
  return a !== 0 && (a < 1e-3 || a >= 1e6) ? x.toExponential(2) : x.toFixed(digits);
}

// A score or a proportion: always this many decimals (1 shows as 1.0000).
function fixed(x, digits = 4) {
  return typeof x === "number" ? x.toFixed(digits) : "–";
}

function humanize(name) {
  return name.replaceAll("_", " ");
}

function truncate(text, n) {
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

// ------------------------------------------------------------------ API calls

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
  // A 404 from a route the server does not have (as opposed to "no such stream").
  get missingEndpoint() {
    return this.status === 404 && !String(this.problem.type || "").endsWith("stream-not-found");
  }
}

async function api(path, params) {
  const url = new URL(path, API);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null) url.searchParams.set(k, v);
  }
  for (;;) {
    const headers = { Accept: "application/json" };
    if (state.key) headers.Authorization = `Bearer ${state.key}`;
    const response = await fetch(url, { headers, cache: "no-store" });
    if (response.status === 401) {
      // Ask for a key (once for all the requests waiting), then try again.
      await askForKey(state.key ? "The key was refused; enter a valid one." : "");
      continue;
    }
    let body = null;
    if ((response.headers.get("content-type") || "").includes("json")) body = await response.json();
    if (!response.ok) throw new ApiError(response.status, body);
    return body;
  }
}

function askForKey(message) {
  if (state.key) {
    state.key = null;
    sessionStorage.removeItem(KEY_STORAGE);
  }
  return new Promise((resolve) => {
    state.authWaiters.push(resolve);
    const dialog = $("auth");
    $("auth-error").textContent = message;
    if (!dialog.open) dialog.showModal();
    $("auth-key").focus();
  });
}

function onKeyEntered(event) {
  event.preventDefault();
  const key = $("auth-key").value.trim();
  if (!key) return;
  state.key = key;
  sessionStorage.setItem(KEY_STORAGE, key);
  $("auth-key").value = "";
  $("auth").close();
  $("forget-key").hidden = false;
  const waiters = state.authWaiters.splice(0);
  for (const resolve of waiters) resolve();
  // The WebSocket, refused without a key, starts again with it.
  if (state.current && !state.current.socket) connectSocket(state.current);
}

function forgetKey() {
  state.key = null;
  sessionStorage.removeItem(KEY_STORAGE);
  location.reload();
}

// ------------------------------------------------------------------ streams list

async function loadStreams() {
  try {
    const body = await api("v1/streams");
    state.streams = body.streams;
    $("streams-error").textContent = "";
  } catch (err) {
    $("streams-error").textContent = `Cannot list the streams: ${err.message}`;
    return;
  }
  const list = $("streams");
  list.replaceChildren();
  const wanted = currentIdFromHash();
  for (const s of [...state.streams].sort((a, b) => a.id.localeCompare(b.id))) {
    const link = el(
      "a",
      { href: `#stream=${encodeURIComponent(s.id)}`, "data-stream": s.id },
      el("span", { class: "stream-id", text: s.id }),
      el("span", { class: "stream-meta", text: `${s.algorithm} · ${s.kind} · v${s.version}` }),
    );
    if (s.id === wanted) link.setAttribute("aria-current", "true");
    list.append(el("li", {}, link));
  }
  $("streams-count").textContent = `(${state.streams.length})`;
}

function currentIdFromHash() {
  const m = /^#stream=(.+)$/.exec(location.hash);
  try {
    return m ? decodeURIComponent(m[1]) : null;
  } catch {
    return null; // a malformed address: no stream
  }
}

// ------------------------------------------------------------------ one stream

function closeStream() {
  const cur = state.current;
  if (!cur) return;
  cur.closed = true;
  clearInterval(cur.eventsTimer);
  clearTimeout(cur.refreshTimer);
  clearTimeout(cur.reconnectTimer);
  if (cur.socket) cur.socket.close(1000);
  state.current = null;
}

async function openStream(id) {
  closeStream();
  for (const a of document.querySelectorAll("#streams a")) {
    a.setAttribute("aria-current", String(a.dataset.stream === id));
  }
  $("empty").hidden = id !== null;
  $("stream").hidden = id === null;
  if (id === null) return;
  const cur = {
    id,
    path: `v1/streams/${encodeURIComponent(id)}/`,
    changes: [],
    historyState: "loading",
    lastEvent: null,
    closed: false,
    socket: null,
    attempts: 0,
  };
  state.current = cur;
  $("stream-title").textContent = id;
  $("stream-error").textContent = "";
  for (const part of ["selection", "status", "timeline", "feed", "stability", "evaluation"]) {
    $(part).replaceChildren();
  }
  $("timeline-note").textContent = "";
  try {
    cur.resource = await api(`v1/streams/${encodeURIComponent(id)}`);
  } catch (err) {
    $("stream-error").textContent = err.message;
    return;
  }
  if (cur.closed) return;
  cur.algorithm = state.algorithms.get(cur.resource.algorithm) || null;
  renderSummary(cur);
  await Promise.all([refreshSelection(cur), refreshStatus(cur), refreshHistory(cur), refreshStability(cur)]);
  await loadRecentEvents(cur);
  if (cur.closed) return;
  connectSocket(cur);
  cur.eventsTimer = setInterval(() => coalesced(cur, refreshEvents), EVENTS_REFRESH_MS);
  if (cur.resource.kind === "features" || (cur.algorithm && cur.algorithm.supervised)) {
    refreshEvaluation(cur);
  } else {
    $("evaluation").replaceChildren(el("p", { class: "unavailable", text: "Not available: the stream is unsupervised." }));
  }
}

function renderSummary(cur) {
  const r = cur.resource;
  const parts = [`${r.algorithm} (${r.kind} stream)`];
  if (r.target_type) parts.push(`target ${r.target_type}`);
  if (r.n_instances !== undefined && r.n_instances !== null) parts.push(`${fmt(r.n_instances)} instances`);
  if (r.n_features !== undefined && r.n_features !== null) parts.push(`${fmt(r.n_features)} features`);
  parts.push(`created ${r.created_at}`);
  $("stream-summary").textContent = parts.join(" · ");
  const kind = scoreKind(cur);
  $("score-kind").textContent = kind
    ? `score: ${humanize(kind.name)} (${kind.higherIsBetter ? "higher" : "lower"} is better${kind.magnitude ? "; bars show |score|" : ""})`
    : "";
}

// What the score of a selected feature means, from /v1/algorithms and the stream's params.
function scoreKind(cur) {
  const a = cur.algorithm;
  if (!a) return null;
  let name = a.score_kind;
  for (const [param, byValue] of Object.entries(a.score_kind_by || {})) {
    const value = (cur.resource.params || {})[param] ?? (a.defaults || {})[param];
    if (value !== undefined && byValue[value]) name = byValue[value];
  }
  return { name, higherIsBetter: a.higher_is_better, magnitude: a.score_by_magnitude };
}

async function refreshSelection(cur) {
  try {
    const sel = await api(cur.path + "selected");
    if (!cur.closed) renderSelection(cur, sel.version, sel.features);
  } catch (err) {
    $("selection").replaceChildren(el("p", { class: "error", text: err.message }));
  }
}

function renderSelection(cur, version, features) {
  cur.version = Math.max(cur.version || 0, version);
  staleEvaluation(cur);
  $("selection-version").textContent = `v${version} · ${features.length} selected`;
  const box = $("selection");
  if (features.length === 0) {
    box.replaceChildren(el("p", { class: "muted", text: "Nothing selected yet." }));
    return;
  }
  const kind = scoreKind(cur);
  const value = (f) => (f.score === null || f.score === undefined ? null : kind && kind.magnitude ? Math.abs(f.score) : f.score);
  const all = features;
  if (all.length > SELECTION_MAX_ROWS) {
    // The largest bars only (ties in selection order), with a count of the rest.
    const order = all.map((f, i) => [Math.abs(value(f) ?? 0), i]);
    order.sort((a, b) => b[0] - a[0] || a[1] - b[1]);
    features = order.slice(0, SELECTION_MAX_ROWS).map(([, i]) => all[i]);
  }
  // Folded, not spread: a spread of 150,000 arguments overflows the call stack.
  const max = features.reduce((m, f) => Math.max(m, Math.abs(value(f) ?? 0)), 1e-12);
  const rowH = 20;
  const longest = features.reduce((m, f) => Math.max(m, Math.min(28, f.name.length)), 0);
  const labelW = Math.max(60, Math.round(longest * 6.6) + 10);
  const barW = 240;
  const chart = svg("svg", {
    class: "fit",
    viewBox: `0 0 ${labelW + barW + 70} ${features.length * rowH + 4}`,
    width: labelW + barW + 70,
    height: features.length * rowH + 4,
    role: "img",
    "aria-label": "scores of the selected features",
    id: "selection-chart",
  });
  features.forEach((f, i) => {
    const y = i * rowH;
    const row = svg("g", { class: "feature", "data-name": f.name });
    row.append(svg("title", {}, `${f.name}${f.group ? ` (group ${f.group})` : ""}: ${fmt(f.score, 6)}`));
    row.append(svg("text", { x: labelW - 6, y: y + 14, "text-anchor": "end" }, truncate(f.name, 28)));
    const v = value(f);
    const w = v === null ? 0 : Math.max(1, (Math.abs(v) / max) * barW);
    row.append(svg("rect", { class: "bar", x: labelW, y: y + 3, width: w, height: rowH - 6 }));
    row.append(svg("text", { x: labelW + w + 4, y: y + 14, class: "axis" }, fmt(f.score)));
    chart.append(row);
  });
  const rest = all.length - features.length;
  const note = el("p", { class: "muted", id: "selection-note", text: `Showing the ${features.length} largest of ${all.length}; ${rest} more not drawn.` });
  box.replaceChildren(...(rest > 0 ? [note, chart] : [chart]));
}

const STATUS_SHOWN_ELSEWHERE = new Set(["id", "algorithm", "kind", "warnings"]);

async function refreshStatus(cur) {
  try {
    const status = await api(cur.path + "status");
    if (cur.closed) return;
    const dl = $("status");
    dl.replaceChildren();
    for (const [k, v] of Object.entries(status)) {
      if (STATUS_SHOWN_ELSEWHERE.has(k) || (v !== null && typeof v === "object")) continue;
      dl.append(el("dt", { text: humanize(k) }), el("dd", { text: fmt(v) }));
    }
    for (const w of status.warnings || []) {
      dl.append(el("dt", { class: "error", text: "warning" }), el("dd", { text: `${w.code}: ${w.message}` }));
    }
  } catch (err) {
    $("status").replaceChildren(el("dd", { class: "error", text: err.message }));
  }
}

// ------------------------------------------------------------------ selection over time

async function refreshHistory(cur) {
  if (cur.historyState === "unavailable") return;
  // Page on from the version read last time; "next" is null once a page reaches the
  // stream's version.
  let after = cur.historyVersion;
  try {
    for (let page = 0; page < HISTORY_MAX_PAGES; page++) {
      const body = await api(cur.path + "history", { after_version: after, limit: 1000 });
      if (cur.closed) return;
      for (const c of body.changes) {
        if (!cur.changes.length || c.version > cur.changes[cur.changes.length - 1].version) cur.changes.push(c);
      }
      after = body.next ?? body.version;
      cur.historyVersion = after;
      if (body.next === null || body.next === undefined) break;
    }
    cur.historyState = "ok";
  } catch (err) {
    if (err instanceof ApiError && err.missingEndpoint) {
      cur.historyState = "unavailable";
      $("timeline").replaceChildren(
        el("p", { class: "unavailable", text: "Not available: this server has no selection history (GET /history)." }),
      );
    } else if (err instanceof ApiError && err.status === 410) {
      // Trimmed meanwhile: start again from the oldest change kept.
      cur.changes = [];
      cur.historyVersion = undefined;
    } else {
      $("timeline-note").textContent = `Cannot read the history: ${err.message}`;
    }
    return;
  }
  renderTimeline(cur);
}

function renderTimeline(cur) {
  const box = $("timeline");
  const changes = cur.changes;
  if (changes.length === 0) {
    box.replaceChildren(el("p", { class: "muted", text: "No selection change yet." }));
    return;
  }
  // The set after each change, and the features in the order they first joined.
  const sets = [];
  const order = [];
  const seen = new Set();
  let current = new Set();
  for (const c of changes) {
    current = new Set(current);
    for (const name of c.removed || []) current.delete(name);
    for (const name of c.added || []) {
      current.add(name);
      if (!seen.has(name)) {
        seen.add(name);
        order.push(name);
      }
    }
    sets.push(current);
  }
  const first = Math.max(0, changes.length - TIMELINE_MAX_COLUMNS);
  const cols = changes.slice(first);
  const colSets = sets.slice(first);
  // Rows: the features present in the columns shown, the latest members first kept.
  let rows = order.filter((name) => colSets.some((s) => s.has(name)));
  const notes = [];
  if (first > 0) notes.push(`the last ${cols.length} of ${changes.length} changes`);
  if (rows.length > TIMELINE_MAX_ROWS) {
    const now = colSets[colSets.length - 1];
    rows = [...rows.filter((n) => now.has(n)), ...rows.filter((n) => !now.has(n))].slice(0, TIMELINE_MAX_ROWS);
    notes.push(`${TIMELINE_MAX_ROWS} features (the current ones first)`);
  }
  $("timeline-note").textContent =
    `Each column is a version where the selection changed or a drift was detected (a dashed line); ` +
    `a filled cell: the feature was selected.` +
    (notes.length ? ` Showing ${notes.join(" and ")}.` : "");

  const longest = rows.reduce((m, n) => Math.max(m, Math.min(28, n.length)), 0);
  const labelW = Math.max(60, Math.round(longest * 6.6) + 10);
  const cell = 16;
  // Columns as wide as the card allows, 16 to 40 px.
  const room = Math.max(0, box.clientWidth - labelW - 20);
  const cellW = Math.max(cell, Math.min(40, Math.floor(room / cols.length)));
  const rotate = cellW < 8 * String(cols[cols.length - 1].version).length;
  const top = 8;
  const axisH = rotate ? 44 : 30;
  const width = labelW + cols.length * cellW + 10;
  const height = top + rows.length * cell + axisH;
  const chart = svg("svg", { width, height, role: "img", "aria-label": "selection over time", id: "timeline-chart" });
  rows.forEach((name, r) => {
    const y = top + r * cell;
    chart.append(svg("line", { class: "grid-line", x1: labelW, x2: width - 10, y1: y + cell, y2: y + cell }));
    const label = svg("text", { x: labelW - 6, y: y + cell - 4, "text-anchor": "end", class: "row-label" }, truncate(name, 28));
    label.append(svg("title", {}, name));
    chart.append(label);
  });
  const every = Math.max(1, Math.ceil(cols.length / 16));
  cols.forEach((c, i) => {
    const x = labelW + i * cellW;
    const set = colSets[i];
    rows.forEach((name, r) => {
      if (!set.has(name)) return;
      const rect = svg("rect", {
        class: "cell",
        x: x + 1,
        y: top + r * cell + 1,
        width: cellW - 2,
        height: cell - 2,
        "data-version": c.version,
        "data-name": name,
      });
      rect.append(svg("title", {}, `${name} selected after version ${c.version}`));
      chart.append(rect);
    });
    if ((c.drifts || []).length) {
      // A drift detected in this version: a marker across the column.
      const mark = svg("line", {
        class: "drift-mark",
        x1: x + cellW / 2, x2: x + cellW / 2, y1: top, y2: top + rows.length * cell,
        "data-version": c.version,
      });
      const told = c.drifts.map((d) =>
        `drift (${d.detector}) at instance ${d.instances_seen}, statistic ${Number(d.statistic).toPrecision(4)}` +
        (d.reset ? ": the selector restarted" : ""));
      mark.append(svg("title", {}, told.join("\n")));
      chart.append(mark);
    }
    if (i % every === 0 || i === cols.length - 1) {
      const ty = top + rows.length * cell + 12;
      const cx = x + cellW / 2;
      const t = svg("text", rotate
        ? { class: "axis", x: cx, y: ty, transform: `rotate(-45 ${cx} ${ty})`, "text-anchor": "end" }
        : { class: "axis", x: cx, y: ty, "text-anchor": "middle" }, String(c.version));
      t.append(svg("title", {}, `version ${c.version} at ${c.at}: +${(c.added || []).length} −${(c.removed || []).length}, ${c.size} selected`));
      chart.append(t);
    }
  });
  chart.append(svg("text", { class: "axis", x: labelW, y: height - 2 }, "version"));
  box.replaceChildren(chart);
}

// ------------------------------------------------------------------ stability, evaluation

async function refreshStability(cur) {
  const box = $("stability");
  let body;
  try {
    body = await api(cur.path + "stability", { last: 20 });
  } catch (err) {
    const text =
      err instanceof ApiError && err.missingEndpoint
        ? "Not available: this server does not measure stability (GET /stability)."
        : err.message;
    box.replaceChildren(el("p", { class: "unavailable", text }));
    return;
  }
  if (cur.closed) return;
  const versions = body.versions || [];
  const jaccard = body.jaccard || [];
  const parts = [
    el("p", {}, el("span", { class: "figure", id: "nogueira", text: fixed(body.nogueira, 3) }), " Nogueira stability"),
    el("p", {
      class: "muted",
      text: versions.length
        ? `over the last ${versions.length} selections (versions ${versions[0]}–${versions[versions.length - 1]})` +
          (body.features !== undefined ? ` and the ${body.features} features seen` : "") +
          "; 1 is perfectly stable"
        : "no selections yet",
    }),
  ];
  if (jaccard.length) {
    const w = 300;
    const h = 70;
    const pad = 5;
    const step = jaccard.length > 1 ? (w - 2 * pad) / (jaccard.length - 1) : 0;
    const y = (v) => 6 + (1 - (v ?? 0)) * (h - 12);
    const chart = svg("svg", { width: w + 90, height: h + 6, role: "img", "aria-label": "Jaccard of consecutive selections" });
    chart.append(svg("line", { class: "grid-line", x1: 0, x2: w, y1: y(1), y2: y(1) }));
    chart.append(svg("line", { class: "grid-line", x1: 0, x2: w, y1: y(0), y2: y(0) }));
    chart.append(svg("text", { class: "axis", x: w + 6, y: y(1) + 4 }, "1"));
    chart.append(svg("text", { class: "axis", x: w + 6, y: y(0) + 4 }, "0  Jaccard"));
    const points = jaccard.map((v, i) => `${pad + i * step},${y(v)}`).join(" ");
    chart.append(svg("polyline", { class: "spark", points }));
    jaccard.forEach((v, i) => {
      const dot = svg("circle", { class: "dot", cx: pad + i * step, cy: y(v), r: 2.5 });
      dot.append(svg("title", {}, `versions ${versions[i]}→${versions[i + 1]}: ${fmt(v, 3)}`));
      chart.append(dot);
    });
    parts.push(chart);
  }
  box.replaceChildren(...parts);
}

async function refreshEvaluation(cur) {
  const box = $("evaluation");
  box.replaceChildren(el("p", { class: "muted", text: "Evaluating…" }));
  let body;
  try {
    body = await api(cur.path + "evaluation", {
      model: cur.resource.kind === "features" ? $("evaluation-model").value : undefined,
      folds: cur.resource.kind === "features" ? $("evaluation-folds").value : undefined,
    });
  } catch (err) {
    const text =
      err instanceof ApiError && err.missingEndpoint
        ? "Not available: this server does not evaluate selections (GET /evaluation)."
        : err.message;
    box.replaceChildren(el("p", { class: "unavailable", text }));
    return;
  }
  if (cur.closed) return;
  cur.evaluated = body.version;
  if (body.kind === "cross_validation") box.replaceChildren(...crossValidation(body));
  else if (body.kind === "prequential") box.replaceChildren(...prequentialAccuracy(body));
  else box.replaceChildren(renderDocument(body));
  staleEvaluation(cur);
}

// Say so when the selection has moved on since the evaluation shown.
function staleEvaluation(cur) {
  const note = $("evaluation-stale");
  if (note) note.hidden = !(cur.evaluated !== undefined && cur.version > cur.evaluated);
}

function crossValidation(e) {
  const what = `${humanize(e.score_kind)}, mean of ${e.folds} folds` +
    (e.repeats > 1 ? ` × ${e.repeats} repeats` : "") + `, model ${humanize(e.model)}`;
  const rows = [{ label: `selection (${e.features} features)`, score: e.score, folds: e.fold_scores }];
  if (e.best_single) {
    rows.push({ label: `best single: ${e.best_single.name}`, score: e.best_single.score, folds: e.best_single.fold_scores });
  }
  const all = rows.flatMap((r) => r.folds);
  const table = el("table", { class: "evaluation" });
  table.append(el("tr", {}, el("th", { text: "" }), el("th", { text: "score" }), el("th", { text: "folds" })));
  for (const r of rows) {
    table.append(el("tr", {}, el("td", { text: r.label }), el("td", { class: "num", text: fixed(r.score) }), el("td", {}, dotPlot(r.folds, Math.min(...all), Math.max(...all)))));
  }
  return [
    el("p", {}, el("span", { class: "figure", id: "evaluation-score", text: fixed(e.score) }), ` ${what}`),
    table,
    el("p", { class: "muted", text: `The selection of version ${e.version}; the same folds (seed ${e.seed}) for every row.` }),
    el("p", { class: "muted", id: "evaluation-stale", text: "The selection has changed since: Evaluate again.", hidden: "" }),
  ];
}

function prequentialAccuracy(e) {
  const recent = e.recent || {};
  return [
    el("p", {}, el("span", { class: "figure", id: "evaluation-score", text: fixed(e.accuracy) }),
      ` prequential (test-then-train) ${humanize(e.score_kind)} over ${fmt(e.instances)} instances`),
    el("p", { text: `${fixed(recent.accuracy)} over the last ${fmt(recent.instances)} (window ${fmt(recent.window)})` }),
    el("p", { class: "muted", text: `At version ${e.version}.` }),
    el("p", { class: "muted", id: "evaluation-stale", text: "The stream has moved on since: Evaluate again.", hidden: "" }),
  ];
}

// The evaluation document as nested definition lists; lists of numbers as dots on a line.
function renderDocument(doc) {
  const dl = el("dl", { class: "doc" });
  for (const [k, v] of Object.entries(doc)) {
    let value;
    if (Array.isArray(v) && v.every((x) => typeof x === "number")) value = dotPlot(v);
    else if (Array.isArray(v)) value = el("span", { text: v.map((x) => (typeof x === "object" ? JSON.stringify(x) : String(x))).join(", ") || "–" });
    else if (v !== null && typeof v === "object") value = renderDocument(v);
    else value = el("span", { text: fmt(v) });
    dl.append(el("dt", { text: humanize(k) }), el("dd", {}, value));
  }
  return dl;
}

function dotPlot(values, min = Math.min(...values), max = Math.max(...values)) {
  const w = 240;
  const span = max - min || 1;
  const chart = svg("svg", { width: w + 120, height: 22, role: "img" });
  chart.append(svg("line", { class: "grid-line", x1: 4, x2: w + 4, y1: 11, y2: 11 }));
  for (const v of values) {
    const dot = svg("circle", { class: "dot", cx: 4 + ((v - min) / span) * w, cy: 11, r: 3.5 });
    dot.append(svg("title", {}, fmt(v, 4)));
    chart.append(dot);
  }
  const label = values.length ? `${fmt(Math.min(...values), 3)} … ${fmt(Math.max(...values), 3)}` : "–";
  chart.append(svg("text", { class: "axis", x: w + 18, y: 15 }, label));
  return chart;
}

// ------------------------------------------------------------------ live decisions

function feedEntry(version, parts) {
  const feed = $("feed");
  feed.prepend(el("li", {}, el("span", { class: "v", text: `v${version}` }), ...parts));
  while (feed.children.length > FEED_MAX) feed.lastChild.remove();
}

function eventEntry(e) {
  const names = (e.names || []).join(", ");
  const parts = [el("span", { class: e.type, text: `${e.type} ` }), el("span", { text: names })];
  const details = [];
  if (e.reason) details.push(e.reason);
  if (e.score !== undefined && e.score !== null) details.push(`score ${fmt(e.score)}`);
  if (e.by) details.push(`by ${Array.isArray(e.by) ? e.by.join(", ") : e.by}`);
  if (details.length) parts.push(el("span", { class: "muted", text: ` (${details.join("; ")})` }));
  return parts;
}

const DECISION_TYPES = new Set(["accepted", "rejected", "evicted"]);

async function loadRecentEvents(cur) {
  // Start with the decisions of the last few versions (event ids are <version>-<index>).
  const from = Math.max(0, (cur.version || 0) - 10);
  try {
    await readEvents(cur, from > 0 ? `${from}-999999999` : undefined);
  } catch (err) {
    if (err instanceof ApiError && err.status === 410) await readEvents(cur, undefined).catch(() => {});
  }
}

async function readEvents(cur, after) {
  for (let page = 0; page < 20; page++) {
    const body = await api(cur.path + "events", { after, limit: 500 });
    if (cur.closed) return;
    for (const e of body.events) {
      if (DECISION_TYPES.has(e.type)) feedEntry(e.version, eventEntry(e));
      cur.lastEvent = e.id;
    }
    if (!body.next || body.events.length === 0) return;
    after = body.next;
  }
}

async function refreshEvents(cur) {
  if (cur.closed) return;
  try {
    await readEvents(cur, cur.lastEvent || undefined);
  } catch (err) {
    if (err instanceof ApiError && err.status === 410) cur.lastEvent = null;
  }
}

// One read of a kind at a time per stream; a call meanwhile makes one more read after it
// (so the last change is always read, and a burst of changes makes at most two reads).
async function coalesced(cur, read) {
  const running = (cur.running ??= new Map());
  if (running.has(read)) {
    running.set(read, true);
    return;
  }
  running.set(read, false);
  try {
    do {
      running.set(read, false);
      await read(cur);
    } while (running.get(read) && !cur.closed);
  } finally {
    running.delete(read);
  }
}

function connectSocket(cur) {
  if (cur.closed) return;
  const url = new URL(cur.path + "ws", API);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  // The key goes in the first message, never in the URL.
  if (state.key) url.searchParams.set("auth", "message");
  const socket = new WebSocket(url);
  cur.socket = socket;
  let selections = 0;
  socket.addEventListener("open", () => {
    if (state.key) socket.send(JSON.stringify({ type: "auth", key: state.key }));
  });
  socket.addEventListener("message", (event) => {
    const msg = JSON.parse(event.data);
    if (msg.type === "error") {
      $("stream-error").textContent = `Live updates: ${msg.error.detail || msg.error.title}`;
      if (msg.error.status === 401) cur.unauthorized = true;
      return;
    }
    if (msg.type !== "selection") return;
    cur.attempts = 0;
    setLive(true);
    if (msg.truncated) {
      // Too large a selection for a message: its version and size only; read it.
      cur.selected = null;
      coalesced(cur, refreshSelection);
      if (selections++ > 0) {
        feedEntry(msg.version, [el("span", { text: "selection: " }), el("span", { class: "muted", text: `(${msg.size} selected)` })]);
      }
      scheduleRefresh(cur);
      return;
    }
    const known = cur.selected; // null after a notice: nothing to compare with
    const before = new Set(known || []);
    const after = new Set(msg.selected);
    cur.selected = msg.selected;
    renderSelection(cur, msg.version, msg.features);
    if (selections++ > 0) {
      const parts = [el("span", { text: "selection: " })];
      if (known !== null) {
        const added = msg.selected.filter((n) => !before.has(n));
        const removed = [...before].filter((n) => !after.has(n));
        if (added.length) parts.push(el("span", { class: "added", text: `+${added.join(", +")} ` }));
        if (removed.length) parts.push(el("span", { class: "removed", text: `−${removed.join(", −")} ` }));
      }
      parts.push(el("span", { class: "muted", text: `(${msg.selected.length} selected)` }));
      feedEntry(msg.version, parts);
    }
    scheduleRefresh(cur);
  });
  socket.addEventListener("close", (event) => {
    if (cur.socket === socket) cur.socket = null;
    setLive(false);
    if (cur.closed) return;
    if (cur.unauthorized || event.reason === "API key revoked") {
      // The WebSocket starts again once a key is entered (onKeyEntered).
      cur.unauthorized = false;
      askForKey("The key was refused; enter a valid one.");
      return;
    }
    if (event.code === 1008) return; // unknown stream or a refused query: do not retry
    // Back off: 0.5 s, 1 s, 2 s ... at most 10 s.
    const delay = Math.min(10000, 500 * 2 ** cur.attempts++);
    cur.reconnectTimer = setTimeout(() => connectSocket(cur), delay);
  });
}

function setLive(live) {
  const badge = $("live");
  badge.textContent = live ? "live" : "offline";
  badge.classList.toggle("live", live);
}

// Several selection messages in a burst make one round of reads.
function scheduleRefresh(cur) {
  clearTimeout(cur.refreshTimer);
  cur.refreshTimer = setTimeout(() => {
    for (const read of [refreshHistory, refreshStatus, refreshStability, refreshEvents]) coalesced(cur, read);
    loadStreams();
  }, 100);
}

// ------------------------------------------------------------------ start

async function loadAlgorithms() {
  try {
    const body = await api("v1/algorithms");
    for (const a of body.algorithms) state.algorithms.set(a.name, a);
  } catch (err) {
    $("streams-error").textContent = `Cannot read the algorithms: ${err.message}`;
  }
}

async function start() {
  $("auth-form").addEventListener("submit", onKeyEntered);
  $("forget-key").addEventListener("click", forgetKey);
  $("forget-key").hidden = !state.key;
  $("evaluation-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (state.current) refreshEvaluation(state.current);
  });
  window.addEventListener("hashchange", () => openStream(currentIdFromHash()));
  await loadAlgorithms();
  await loadStreams();
  setInterval(loadStreams, STREAMS_REFRESH_MS);
  await openStream(currentIdFromHash());
}

start();
