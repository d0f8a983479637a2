"use strict";
// The live dashboard: uPlot (vendored in static/vendor/, MIT; no CDN) over llmload/history.json,
// polled every 2 s. Data comes from relative URLs, so the page works offline and behind
// --web-base-path. Every panel shares one time span (the first sample to the newest, client or
// server) and one hover cursor. Tick labels are page text placed over the canvas (the canvas
// draws none), so they are selectable and the screenshot test can read and measure them.
// Scenario names and every other string from the run are set with textContent, never as markup.

const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"];
// Series that can coincide (p95 = p99, in flight = users) stay apart: the first is solid, the
// next dashed with markers, the third dotted and wider, so one drawn over another still shows.
const LOOKS = [{width: 2}, {width: 2, dash: [7, 4], marker: 4}, {width: 2.5, dash: [2, 4]}, {width: 2, dash: [10, 3, 2, 3]}];
const TIME_STEPS = [1, 2, 5, 10, 15, 20, 30, 60, 120, 180, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200];
const COUNT_INCRS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
const CHART_HEIGHT = 118;
const MIN_SPAN_S = 10;  // an axis covers at least 10 s: a first sample still gets ticks to read
const LABEL_PX = 50;  // room for one time label ("12:30") and its gap

let rows = [];  // client rows, one per scenario and sample (history.json)
let lastTime = 0;
let server = [];  // the server's own metrics, one sample per scrape
let lastServerTime = 0;
let chosen = null;  // a scenario the user picked
let latency = [];  // the latency charts: [{name, title, description, series: [{name, key}]}] (metrics.json)
let metricsUrls = [];
let state = "";
let verdict = null;  // the client's verdict over the run so far (history.json's client)
let X0 = 0, X1 = MIN_SPAN_S;  // the shared time span (Unix seconds)
const charts = new Map();  // element id → {u, key}
window.llmload = {charts};  // for tests: the uPlot instances and their data

function threeDigits(v) {
  // 3 significant digits, never e-notation (the LLM tab's rule): 0.9805 → 0.981, 12345 → 12300
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (v === 0) return "0";
  const d = 2 - Math.floor(Math.log10(Math.abs(v)));
  return d > 0 ? v.toFixed(d) : String(Math.round(v / 10 ** -d) * 10 ** -d);
}

function elapsed(s) {
  // m:ss (h:mm:ss past an hour)
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), ss = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`;
}

function clock(t) {
  return new Date(t * 1000).toLocaleTimeString([], {hour12: false});
}

function tickText(v, incr) {
  // as many decimals as the step needs, so ticks read apart: 0.25 → 2, 0.5 → 1, 20 → 0
  let d = 0;
  while (d < 6 && Math.abs(incr * 10 ** d - Math.round(incr * 10 ** d)) > 1e-9) d++;
  return v.toFixed(d);
}

function timeSplits(u, axisIdx, min, max) {
  // Round steps counted from the first sample, as many as fit the width, and never fewer than 4.
  const span = max - min, room = Math.max(4, Math.floor(u.over.clientWidth / LABEL_PX));
  let i = TIME_STEPS.findIndex(s => Math.floor(span / s) + 1 <= room);
  if (i < 0) i = TIME_STEPS.length - 1;
  while (i > 0 && Math.floor(span / TIME_STEPS[i]) + 1 < 4) i--;
  const out = [];
  for (let t = 0; t <= span + 1e-6; t += TIME_STEPS[i]) out.push(min + t);
  return out;
}

function keepTicks(axisIdx, text) {
  // uPlot asks an axis for its labels: keep them for the page-text labels, give the canvas none
  return (u, splits, _i, _space, incr) => {
    (u._ticks = u._ticks || [])[axisIdx] = splits.map(v => [v, text(v, incr)]);
    return splits.map(() => "");
  };
}

function pageTicks() {
  // Tick labels as spans over the canvas, at uPlot's own positions.
  return {hooks: {draw: u => {
    let box = u._tickBox;
    if (!box) {
      box = u._tickBox = document.createElement("div");
      box.className = "ticks";
      u.root.querySelector(".u-wrap").appendChild(box);
    }
    const left = u.over.offsetLeft, top = u.over.offsetTop, height = u.over.clientHeight;
    const spans = [];
    u.axes.forEach((axis, i) => {
      if (u.scales[axis.scale].min === null || !u._ticks || !u._ticks[i]) return;
      for (const [v, text] of u._ticks[i]) {
        const s = document.createElement("span");
        s.textContent = text;
        const pos = u.valToPos(v, axis.scale);
        if (i === 0) {
          s.className = "tick x";
          Object.assign(s.style, {left: `${left + pos}px`, top: `${top + height + 7}px`});
        } else {
          s.className = "tick y";
          Object.assign(s.style, {left: `${left - 5}px`, top: `${top + pos}px`});
        }
        spans.push(s);
      }
    });
    box.replaceChildren(...spans);
  }}};
}

function niceTop(hi) {
  // the axis ends on a round tick above the data (1, 2, 2.5 or 5 times a power of ten, about 4 steps)
  const raw = hi / 4, e = 10 ** Math.floor(Math.log10(raw)), m = raw / e;
  const step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * e;
  return Math.ceil(hi * 1.02 / step) * step;
}

function yRange(kind, hi) {
  // latency, rates and counts start at zero; shares read 0 … 100 %
  hi = Number.isFinite(hi) ? hi : 0;
  if (kind === "count") return [0, Math.max(4, niceTop(Math.max(hi, 1)))];
  if (kind === "pct") return [0, hi <= 100 ? 100 : niceTop(hi)];
  return [0, hi > 0 ? niceTop(hi) : 1];
}

function makeChart(el, kind, names) {
  const series = names.map((name, i) => {
    const look = LOOKS[i % LOOKS.length];
    return {
      label: name, stroke: COLORS[i % COLORS.length], width: look.width, dash: look.dash, spanGaps: true,
      value: (u, v) => kind === "count" && Number.isInteger(v) ? String(v) : threeDigits(v),
      points: {size: look.marker || 5, show: look.marker ? (u, si, i0, i1) => i1 - i0 < 90 : undefined},
    };
  });
  const axis = {size: 20, gap: 2, font: "11px system-ui", grid: {stroke: "#eee", width: 1},
                ticks: {stroke: "#ccc", width: 1, size: 4}};
  const opts = {
    width: Math.max(200, el.clientWidth), height: CHART_HEIGHT, padding: [8, 14, 0, 0],
    cursor: {sync: {key: "llmload"}, drag: {x: false, y: false}},
    scales: {x: {time: false, range: () => [X0, X1]}, y: {range: (u, lo, hi) => yRange(kind, hi)}},
    axes: [
      {...axis, splits: timeSplits, values: keepTicks(0, v => elapsed(v - X0))},
      {...axis, size: 44, space: 18, incrs: kind === "count" ? COUNT_INCRS : undefined, values: keepTicks(1, tickText)},
    ],
    series: [{label: "at", value: (u, v) => v === null || v === undefined ? "–" : elapsed(v - X0)},
             ...series],
    plugins: [pageTicks()],
    // away from the cursor, the legend shows the newest values
    hooks: {setCursor: [u => { if (u.cursor.idx === null || u.cursor.idx === undefined) showNewest(u); }]},
  };
  return new uPlot(opts, [[], ...names.map(() => [])], el);
}

function showNewest(u) {
  // each series' newest sample (the server's and the client's come at different times)
  const n = u.data[0].length;
  if (!n) return;
  const idxs = u.data.map((ys, i) => {
    let j = n - 1;
    while (i > 0 && j > 0 && ys[j] === null) j--;
    return j;
  });
  u.setLegend({idxs});
}

function align(pointLists) {
  // uPlot wants one x array: the union of every series' times, null where a series has no sample
  const xs = [...new Set(pointLists.flatMap(p => p.map(q => q[0])))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  return [xs, ...pointLists.map(p => {
    const ys = new Array(xs.length).fill(null);
    for (const [t, v] of p) ys[at.get(t)] = typeof v === "number" ? v : null;
    return ys;
  })];
}

function draw(id, kind, series) {
  // series: [{name, points: [[t, v], ...]}]; a chart is made again only when its series change
  const el = document.getElementById(id);
  if (!el) return;
  const key = series.map(s => s.name).join("\u0000");
  let chart = charts.get(id);
  if (!chart || chart.key !== key) {
    if (chart) chart.u.destroy();
    chart = {u: makeChart(el, kind, series.map(s => s.name)), key};
    charts.set(id, chart);
  }
  const data = align(series.map(s => s.points));
  chart.u.setData(data);
  if (chart.u.cursor.left === undefined || chart.u.cursor.left < 0) showNewest(chart.u);
  let empty = el.querySelector(".empty");
  const none = !data[1 + 0] || data.slice(1).every(ys => ys.every(v => v === null));
  if (none && !empty) {
    empty = document.createElement("div");
    empty.className = "empty";
    empty.textContent = "no data yet";
    el.appendChild(empty);
  } else if (!none && empty) {
    empty.remove();
  }
}

function span() {
  // the same time span on every panel: the first sample to the newest, client or server
  let lo = Infinity, hi = -Infinity;
  for (const list of [rows, server]) {
    if (list.length) {
      lo = Math.min(lo, list[0].time);
      hi = Math.max(hi, list[list.length - 1].time);
    }
  }
  if (lo === Infinity) return [0, MIN_SPAN_S];
  return [lo, Math.max(hi, lo + MIN_SPAN_S)];
}

function wholeRunName() {
  const latestT = rows.length ? rows[rows.length - 1].time : 0;
  const latest = rows.filter(r => r.time === latestT).map(r => r.scenario);
  return latest.includes("Aggregated") ? "Aggregated" : latest[0];
}

function running() {
  return !["stopped", "ready", "stopping", "missing", ""].includes(state);
}

function render() {
  [X0, X1] = span();
  const sel = document.getElementById("scenario");
  const names = [...new Set(rows.map(r => r.scenario))];
  if (names.join("\u0000") !== [...sel.options].map(o => o.value).join("\u0000")) {
    // Default to the whole run when the latest sample has it, else to its first scenario.
    const keep = chosen && names.includes(chosen) ? chosen : wholeRunName();
    // Scenario names come from files, flags and any worker's rows: text, never markup.
    sel.replaceChildren(...names.map(n => { const o = document.createElement("option"); o.value = o.textContent = n; return o; }));
    sel.value = keep;
  }
  const mine = rows.filter(r => r.scenario === sel.value);
  const pts = k => mine.map(r => [r.time, r[k]]);
  for (const m of latency) {
    const id = `chart-${m.name}`;
    const card = document.getElementById(id).parentElement;
    // a metric that is another's exact copy here (TTFT visible without reasoning) gets no panel
    card.hidden = !!m.differs_from && !mine.some(r => m.series.some(s =>
      typeof r[s.key] === "number" && r[s.key] !== r[m.differs_from[s.name]]));
    if (card.hidden) {
      if (charts.has(id)) { charts.get(id).u.destroy(); charts.delete(id); }
      continue;
    }
    draw(id, "value", m.series.map(s => ({name: s.name, points: pts(s.key)})));
  }
  draw("chart-tps", "value", [{name: "output tok/s", points: pts("output_tps")}]);
  draw("chart-load", "count", [{name: "in flight", points: pts("in_flight")}, {name: "users", points: pts("users")}]);
  const kinds = [...new Set(mine.flatMap(r => Object.keys(r.errors_by_status || {})))].sort();
  draw("chart-errors", "count", kinds.length
    ? kinds.map(k => ({name: k, points: mine.map(r => [r.time, (r.errors_by_status || {})[k] || 0])}))
    : [{name: "errors", points: pts("errors")}]);
  renderServer();
  renderClient(mine[mine.length - 1]);
}

function renderClient(last) {
  // The client's verdict over the run so far is the end-of-run summary's own line (history.json's
  // client.text, made by the same function over the same intervals): a limited interval stays in
  // it after the load generator recovers, as it stays in the summary. Only "now" is the newest sample's.
  const client = document.getElementById("client");
  const errors = document.getElementById("errors");
  errors.textContent = last && last.errors_dominate
    ? `SERVER ERRORS: ${last.errors} of ${last.ok + last.errors} requests failed in the last window; the client is not the limit`
    : "";
  const limited = verdict && verdict.limited_intervals > 0;
  client.className = "client" + (limited ? " bad" : "");
  if (!verdict || !last) return;
  const now = !running() && rows.length ? `the test has stopped (last sample at ${elapsed(X1 - X0)})`
    : last.errors_dominate ? "now: not judged (errors dominate)"
    : last.client_limited ? `now: limited (CPU ${last.client_cpu_max} %, event-loop lag p99 ${last.client_lag_p99_ms_max} ms)`
    : `now: ok (CPU ${last.client_cpu_max ?? "–"} %)`;
  client.textContent = `${verdict.text} — ${now}`;
}

function renderServer() {
  // The server is one for the whole run: its charts are not per scenario. Client TTFT here is
  // the whole run's row (Aggregated, or the only scenario).
  const status = document.getElementById("server-status");
  const wholeName = wholeRunName();
  const whole = rows.filter(r => r.scenario === wholeName);
  const sp = (k, scale = 1) => server.map(s => [s.time, typeof s[k] === "number" ? s[k] * scale : null]);
  const last = server[server.length - 1];
  if (last && !running()) {
    // the scraper stops with the test: its last sample is history, not the server's state now
    status.textContent = `— ${last.engine || "unknown engine"}: not read since the test stopped (last sample at ${elapsed(last.time - X0)})`;
  } else if (last) {
    const up = last.endpoints_up === last.endpoints ? "" : ` — ${last.endpoints_up} of ${last.endpoints} endpoints answering`;
    status.textContent = `— ${last.engine || "unknown engine"}: ${last.running ?? "–"} running, ${last.waiting ?? "–"} waiting, KV cache ${threeDigits(last.kv_usage_pct)} %${up}`;
  } else {
    status.textContent = metricsUrls.length ? `— reading ${metricsUrls.join(", ")}: no answer yet`
      : "— no server metrics (the target host has no /metrics; pass --server-metrics URL)";
  }
  draw("chart-server-queue", "count", [{name: "running", points: sp("running")}, {name: "waiting", points: sp("waiting")}]);
  draw("chart-server-cache", "pct", [{name: "KV cache %", points: sp("kv_usage_pct")},
                                     {name: "prefix hits %", points: sp("prefix_hit_rate", 100)}]);
  // Means side by side (the server's is exact, from its histogram's sum and count); its p95 is
  // interpolated inside a histogram bucket, so it is coarse.
  draw("chart-server-ttft", "value", [
    {name: "server mean", points: sp("ttft_mean_ms")}, {name: "client mean", points: whole.map(r => [r.time, r.ttft_mean_ms])},
    {name: "server p95", points: sp("ttft_p95_ms")}, {name: "client p95", points: whole.map(r => [r.time, r.ttft_p95_ms])}]);
}

function renderState(data) {
  const badge = document.getElementById("state");
  badge.textContent = state || "?";
  badge.className = running() ? "running" : "stopped";
  document.getElementById("status").textContent = running()
    ? `${rows.length} samples, updated ${clock(Date.now() / 1000)}`
    : `${rows.length} samples; the charts end at the last one (${elapsed(X1 - X0)})`;
}

async function loadMetrics() {
  // The catalog's latency metrics: chart titles, series names and the row keys they read.
  const res = await fetch("metrics.json", {cache: "no-store"});
  latency = (await res.json()).metrics;
  const grid = document.getElementById("llm-grid");
  const first = grid.firstElementChild;
  for (const m of latency) {
    const card = document.createElement("div");
    card.className = "card";
    card.title = m.description;
    const h2 = document.createElement("h2");
    h2.textContent = m.title;
    const chart = document.createElement("div");
    chart.id = `chart-${m.name}`;
    chart.className = "chart llm-chart";
    card.append(h2, chart);
    grid.insertBefore(card, first);
  }
}

async function poll() {
  try {
    const res = await fetch(`history.json?since=${lastTime}&server_since=${lastServerTime}`, {cache: "no-store"});
    if (res.ok) {
      const data = await res.json();
      if (data.rows.length) {
        rows = rows.concat(data.rows);
        lastTime = data.rows[data.rows.length - 1].time;
      }
      if (data.server && data.server.length) {
        server = server.concat(data.server);
        lastServerTime = data.server[data.server.length - 1].time;
      }
      metricsUrls = data.server_metrics || [];
      verdict = data.client || null;
      state = data.state || "";
      render();
      renderState(data);
    }
  } catch (e) {
    document.getElementById("status").textContent = `cannot reach Locust: ${e}`;
  }
}

window.addEventListener("resize", () => {
  for (const [id, chart] of charts) chart.u.setSize({width: Math.max(200, document.getElementById(id).clientWidth), height: CHART_HEIGHT});
});
document.getElementById("scenario").addEventListener("change", e => { chosen = e.target.value; render(); });
loadMetrics().catch(e => { document.getElementById("status").textContent = `cannot read metrics.json: ${e}`; })
  .finally(() => { poll(); setInterval(poll, 2000); });
