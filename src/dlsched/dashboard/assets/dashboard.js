// The dashboard's page logic, one design for a live service and for a finished simulation.
//
// Live (`dlsched serve`): the data comes from /ui/v1/snapshot and /ui/v1/jobs/<id>, polled every
// POLL_MS with the bearer token kept in localStorage (given once as /?token=...), and the explanations
// from /v1/jobs/<id>/explain. Static (`dlsched report`): window.DLSCHED_DATA holds the same snapshot and
// every job's detail, so the written file needs no server. Routes are in the hash: #/ and #/job/<id>.
"use strict";

const POLL_MS = 2000;
const DEFAULT_CHARTS = [["throughput (samples/s)", "throughput_sps"], ["batch size", "batch_size"],
  ["goodput (samples/s)", "goodput_sps"], ["restarts", "restarts"]];
const TOKEN_KEY = "dlsched-token";
const MAX_EXPLANATIONS = 60;
const STATIC = window.DLSCHED_DATA || null;
let timer = null;

function esc(s) {
  return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
    c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}

function colour(job) {  // a stable colour per job id (FNV-1a, spread by the golden angle)
  let h = 0x811c9dc5;
  for (const c of String(job)) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  return `hsl(${Math.round((h % 1000) * 137.508) % 360}, 62%, 60%)`;
}

function num(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return "&mdash;";
  if (!Number.isFinite(x)) return "&infin;";
  return Number(x).toFixed(digits === undefined ? 1 : digits);
}

function duration(s) {
  if (s === null || s === undefined) return "&mdash;";
  if (s < 120) return `${num(s, 0)} s`;
  if (s < 7200) return `${num(s / 60, 1)} min`;
  return `${num(s / 3600, 1)} h`;
}

function token() {
  const params = new URLSearchParams(location.search);
  if (params.has("token")) {  // given once: kept, and taken out of the address bar
    localStorage.setItem(TOKEN_KEY, params.get("token"));
    history.replaceState(null, "", location.pathname + location.hash);
  }
  return localStorage.getItem(TOKEN_KEY);
}

async function getJson(path) {
  const r = await fetch(path, {headers: {"Authorization": `Bearer ${token() || ""}`}, cache: "no-store"});
  if (r.status === 401) throw {login: true};
  if (r.status === 404) return null;
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

function showLogin() {
  document.getElementById("app").innerHTML = `<section id="login"><h2>Sign in</h2>
    <p>Paste a token from <code>dlsched serve user add</code> (the admin's is in STATE/server.json).</p>
    <form><input name="token" type="password" autocomplete="off"> <button>Open</button></form></section>`;
  document.querySelector("#login form").onsubmit = ev => {
    ev.preventDefault();
    localStorage.setItem(TOKEN_KEY, ev.target.token.value.trim());
    render();
  };
}

// ------------------------------------------------------------------------------------------ overview

function clusterView(snap) {
  const nodes = snap.nodes.map(node => {
    const gpus = node.gpus.map((jobs, i) => {
      const title = `${node.name} GPU ${i}: ${jobs.length ? jobs.join(" + ") : "free"}`;
      let style = "";
      if (jobs.length === 1) style = `background:${colour(jobs[0])}`;
      if (jobs.length > 1) {
        const stops = jobs.map((j, k) => `${colour(j)} ${k * 100 / jobs.length}% ${(k + 1) * 100 / jobs.length}%`);
        style = `background:linear-gradient(135deg, ${stops.join(", ")})`;
      }
      return `<div class="gpu${jobs.length > 1 ? " packed" : ""}" data-node="${esc(node.name)}" data-gpu="${i}"
        data-jobs="${esc(jobs.join(" "))}" title="${esc(title)}" style="${style}">${esc(jobs.join("+"))}</div>`;
    }).join("");
    return `<div class="node"><div class="name">${esc(node.name)}</div><div class="type">${esc(node.gpu_type)}
      &times;${node.gpus.length}</div><div class="gpus">${gpus}</div></div>`;
  }).join("");
  return `<section id="cluster"><h2>Cluster${snap.round !== null ? ` &middot; round ${snap.round}` : ""}</h2>
    <div class="nodes">${nodes || '<p class="muted">no nodes known yet</p>'}</div></section>`;
}

function jobLink(id) {
  return `<a href="#/job/${encodeURIComponent(id)}"><span class="swatch" style="background:${colour(id)}"></span>${esc(id)}</a>`;
}

function queueView(snap) {
  const waiting = snap.jobs.filter(j => j.rank !== null && j.rank !== undefined).sort((a, b) => a.rank - b.rank);
  const rows = waiting.map(j => `<tr data-job="${esc(j.id)}"><td class="rank">${j.rank}</td><td>${jobLink(j.id)}</td>
    <td>${esc(j.name)}</td><td>${esc(j.user)}</td><td>${j.gpus_requested}</td><td>${num(j.priority, 2)}</td>
    <td>${duration(j.wait_s)}</td><td>${num(j.latency_ratio, 2)}</td>
    <td class="reason" title="${esc(j.reason_detail || "")}">${esc(j.reason || "")}</td></tr>`).join("");
  return `<section id="queue"><h2>Queue (${waiting.length} waiting)</h2>
    <table><thead><tr><th>rank</th><th>job</th><th>name</th><th>user</th><th>GPUs asked</th><th>priority</th>
    <th>wait</th><th>latency ratio</th><th>reason</th></tr></thead><tbody>${rows ||
    '<tr><td colspan="9" class="muted">nobody waits</td></tr>'}</tbody></table>
    <p class="muted">${esc(snap.rank_note || "")}</p></section>`;
}

function runningView(snap) {
  const running = snap.jobs.filter(j => j.status === "running" || j.status === "profiling");
  const rows = running.map(j => `<tr data-job="${esc(j.id)}"><td>${jobLink(j.id)}</td><td>${esc(j.name)}</td>
    <td>${esc(j.user)}</td><td>${esc(j.status)}</td><td>${j.gpus} ${esc(j.gpu_type || "")}</td>
    <td>${num(j.priority, 2)}</td><td>${j.restarts}</td></tr>`).join("");
  return `<section id="running"><h2>Running (${running.length})</h2><table><thead><tr><th>job</th><th>name</th>
    <th>user</th><th>status</th><th>GPUs</th><th>priority</th><th>restarts</th></tr></thead><tbody>${rows ||
    '<tr><td colspan="7" class="muted">nothing runs</td></tr>'}</tbody></table></section>`;
}

function timelineView(snap) {
  const segs = snap.timeline.segments;
  const jobs = [...new Set(segs.map(s => s.job))];
  const end = Math.max(snap.timeline.end_s || 0, ...segs.map(s => s.end_s), 1);
  const start = Math.min(0, ...segs.map(s => s.start_s));
  const W = 900, row = 16, left = 90, H = jobs.length * row + 24;
  const x = t => left + (t - start) / (end - start) * (W - left - 10);
  const bars = segs.map(s => {
    const y = jobs.indexOf(s.job) * row + 2;
    return `<rect x="${x(s.start_s).toFixed(1)}" y="${y}" width="${Math.max(1, x(s.end_s) - x(s.start_s)).toFixed(1)}"
      height="${row - 4}" fill="${colour(s.job)}"><title>${esc(s.job)}: ${s.gpus} ${esc(s.gpu_type)} from
      ${num(s.start_s, 0)} s to ${num(s.end_s, 0)} s</title></rect>`;
  }).join("");
  const labels = jobs.map((j, i) => `<text x="${left - 6}" y="${i * row + row - 4}" text-anchor="end"
    font-size="11">${esc(j)}</text>`).join("");
  const axis = `<text x="${left}" y="${H - 4}" font-size="11">${num(start, 0)} s</text>
    <text x="${W - 10}" y="${H - 4}" font-size="11" text-anchor="end">${num(end, 0)} s</text>`;
  return `<section id="timeline"><h2>Allocations over time</h2>${jobs.length ?
    `<svg width="${W}" height="${H}" role="img" aria-label="allocation timeline">${labels}${bars}${axis}</svg>` :
    '<p class="muted">no allocations yet</p>'}</section>`;
}

function usageView(snap) {
  const rows = snap.usage.map(u => {
    const pct = u.quota ? Math.min(100, 100 * u.gpus / u.quota) : 0;
    return `<tr><td>${esc(u.kind)}</td><td>${esc(u.name)}</td><td>${u.gpus}</td><td>${u.quota === null ? "none" : u.quota}</td>
      <td>${u.quota ? `<div class="bar"><span class="${u.gpus > u.quota ? "over" : ""}" style="width:${pct}%"></span></div>` :
      ""}</td></tr>`;
  }).join("");
  return `<section id="usage"><h2>Usage against quota</h2><table><thead><tr><th></th><th>who</th><th>GPUs held</th>
    <th>quota</th><th></th></tr></thead><tbody>${rows ||
    '<tr><td colspan="5" class="muted">no users</td></tr>'}</tbody></table></section>`;
}

function overview(snap) {
  return clusterView(snap) + queueView(snap) + runningView(snap) + timelineView(snap) + usageView(snap);
}

// --------------------------------------------------------------------------------------------- a job

function lineChart(title, points, key) {
  const pts = points.filter(p => p[key] !== null && p[key] !== undefined);
  const W = 300, H = 120, pad = 28;
  if (!pts.length) return `<div class="chart" data-series="${key}"><h3>${esc(title)}</h3><p class="muted">no reports yet</p></div>`;
  const t0 = pts[0].t, t1 = Math.max(pts[pts.length - 1].t, t0 + 1e-9);
  const ymax = Math.max(...pts.map(p => p[key]), 1e-9);
  const x = t => pad + (t - t0) / (t1 - t0 || 1) * (W - pad - 6);
  const y = v => H - 16 - v / ymax * (H - 26);
  const path = pts.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" ");
  return `<div class="chart" data-series="${key}"><h3>${esc(title)}</h3><svg width="${W}" height="${H}">
    <path d="${path}" fill="none" stroke="#3b7ddd" stroke-width="1.5"/>
    <text x="2" y="12" font-size="10">${num(ymax, 1)}</text><text x="2" y="${H - 18}" font-size="10">0</text>
    <text x="${pad}" y="${H - 2}" font-size="10">${num(t0, 0)} s</text>
    <text x="${W - 4}" y="${H - 2}" font-size="10" text-anchor="end">${num(t1, 0)} s</text></svg></div>`;
}

function explanationsView(records) {
  if (!records || !records.length) return `<section id="explanations"><h2>Why</h2><p class="muted">no explanations recorded</p></section>`;
  // per stage, consecutive rounds with the same summary read as one line: "rounds 3-7"
  const groups = [], open = {};
  for (const r of records) {
    const last = open[r.stage];
    if (last && last.summary === r.summary && (r.round === last.to + 1 || r.round === last.to)) last.to = r.round;
    else groups.push(open[r.stage] = {stage: r.stage, summary: r.summary, from: r.round, to: r.round});
  }
  const shown = groups.slice(-MAX_EXPLANATIONS);
  const items = shown.map(g => `<div class="explanation" data-stage="${esc(g.stage)}"><span class="stage">${esc(g.stage)}</span>
    <span class="muted">${g.from === g.to ? `round ${g.from}` : `rounds ${g.from}-${g.to}`}</span>: ${esc(g.summary)}</div>`);
  const more = groups.length > shown.length ? `<p class="muted">the latest ${shown.length} of ${groups.length}</p>` : "";
  return `<section id="explanations"><h2>Why</h2>${more}${items.join("")}</section>`;
}

function jobPage(snap, detail, explanations) {
  if (!detail) return `<section><h2>No job ${esc(location.hash.slice(7))}</h2><a href="#/">back</a></section>`;
  const j = detail.job;
  const facts = [["status", esc(j.status)], ["user", esc(j.user)], ["GPUs", `${j.gpus} ${esc(j.gpu_type || "")}`],
    ["priority", num(j.priority, 2)], ["wait", duration(j.wait_s)], ["restarts", j.restarts]]
    .concat((detail.facts || []).map(([k, v]) => [esc(k), esc(v)]))
    .map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join("");
  const s = detail.series || [];
  return `<section id="job" data-job="${esc(j.id)}"><h2><span class="swatch" style="background:${colour(j.id)}"></span>
    ${esc(j.id)} &middot; ${esc(j.name)}</h2><table>${facts}</table></section>
    <section id="series"><h2>Over time</h2><div class="charts">${(detail.charts || DEFAULT_CHARTS)
    .map(([title, key]) => lineChart(title, s, key)).join("")}</div><p class="muted">${esc(detail.series_note || "")}</p></section>
    ${explanationsView(explanations)}`;
}

// --------------------------------------------------------------------------------------------- what if

const CDF_COLOURS = ["#222", "#3b7ddd", "#dd6b3b", "#3bab5d", "#a33bdd", "#ddb83b", "#3bc6dd"];

function cdfChart(jcts) {  // one step line per row: the fraction of jobs done by each JCT
  const rows = Object.entries(jcts || {}).filter(([, v]) => v.length);
  if (!rows.length) return '<p class="muted">no completed jobs to draw</p>';
  const W = 460, H = 200, pad = 36;
  const xmax = Math.max(...rows.map(([, v]) => v[v.length - 1]), 1e-9);
  const x = t => pad + t / xmax * (W - pad - 8);
  const y = f => H - 20 - f * (H - 30);
  const lines = rows.map(([name, v], i) => {
    const pts = v.map((t, k) => `L${x(t).toFixed(1)},${y(k / v.length).toFixed(1)} L${x(t).toFixed(1)},${y((k + 1) / v.length).toFixed(1)}`);
    return `<path data-row="${esc(name)}" d="M${x(0)},${y(0)} ${pts.join(" ")}" fill="none" stroke="${CDF_COLOURS[i % CDF_COLOURS.length]}"
      stroke-width="${name === "measured" ? 2.5 : 1.5}"/>`;
  }).join("");
  const legend = rows.map(([name], i) => `<span class="legend"><span class="swatch" style="background:${CDF_COLOURS[i % CDF_COLOURS.length]}"></span>${esc(name)}</span>`).join(" ");
  return `<div class="chart" id="jct-cdf"><h3>JCT CDF</h3><svg width="${W}" height="${H}">${lines}
    <text x="2" y="14" font-size="10">1.0</text><text x="2" y="${H - 22}" font-size="10">0</text>
    <text x="${pad}" y="${H - 4}" font-size="10">0 s</text>
    <text x="${W - 4}" y="${H - 4}" font-size="10" text-anchor="end">${num(xmax, 0)} s</text></svg><p>${legend}</p></div>`;
}

function whatifTable(result) {
  const cols = [["policy", "policy"], ["completed", "jobs done"], ["avg_jct_s", "avg JCT"], ["p99_jct_s", "p99 JCT"],
    ["makespan_s", "makespan"], ["avg_wait_s", "avg wait"], ["utilization", "utilisation"],
    ["restarts_per_job", "restarts/job"], ["ftf_max", "max FTF"]];
  const cell = (row, key) => {
    if (key === "policy") return esc(row.policy) + (row.marked ? ` <span class="muted">(${esc(row.marked)})</span>` : "");
    const v = row[key], sd = row[`${key}_std`];
    if (v === null || v === undefined) return "&mdash;";
    const text = key.endsWith("_s") ? duration(v) : num(v, 2);
    return sd ? `${text} &plusmn; ${key.endsWith("_s") ? duration(sd) : num(sd, 2)}` : text;
  };
  const rows = [result.measured, ...result.rows].map(r => `<tr data-row="${esc(r.policy)}">${cols.map(([k]) =>
    `<td>${cell(r, k)}</td>`).join("")}</tr>`).join("");
  const f = result.fidelity || {};
  const fid = f.avg_jct_rel_err !== undefined && f.avg_jct_rel_err !== null ? `<p id="fidelity">fidelity: ${esc(f.policy)},
    the policy the service ran, replayed in the fitted world, is ${num(100 * f.avg_jct_rel_err, 1)}% off the measured
    average JCT and ${num(100 * (f.makespan_rel_err || 0), 1)}% off its makespan (per job: median
    ${num(100 * (f.job_jct_median_abs_err || 0), 1)}%): how far to trust the other rows</p>` : "";
  const notes = (result.notes || []).map(n => `<li>${esc(n)}</li>`).join("");
  return `<table id="whatif-table"><thead><tr>${cols.map(([, t]) => `<th>${t}</th>`).join("")}</tr></thead>
    <tbody>${rows}</tbody></table>${fid}${notes ? `<ul class="muted">${notes}</ul>` : ""}`;
}

async function whatifPage() {
  const state = await getJson("/ui/v1/whatif");
  const form = `<form id="whatif-form"><label>policies <input name="policies" value="fifo,sia,pollux"></label>
    <label>seeds <input name="seeds" type="number" min="1" max="10" value="1"></label>
    <button type="submit">run</button></form>`;
  let body = '<p class="muted">no what-if run yet</p>';
  if (state && state.status === "running") {
    body = `<p id="whatif-progress">running: ${esc(state.progress && state.progress.phase)} (${duration(state.progress && state.progress.elapsed_s)})</p>`;
  } else if (state && state.status === "failed") {
    body = `<p id="whatif-error">error: ${esc(state.error)}</p>`;
  } else if (state && state.status === "done") {
    body = `<p class="muted">what-if ${esc(state.id)}, ${duration(state.result.elapsed_s)} to run</p>
      ${whatifTable(state.result)}${cdfChart(state.result.jcts)}`;
  }
  return `<section id="whatif"><h2>What if</h2><p>The service's finished jobs replayed in a world fitted to their
    reports, under other policies, beside what really happened.</p>${form}${body}</section>`;
}

async function startWhatif(ev) {
  ev.preventDefault();
  const data = new FormData(ev.target);
  const q = new URLSearchParams({policies: data.get("policies"), seeds: data.get("seeds")});
  const r = await fetch(`/ui/v1/whatif?${q}`, {method: "POST", headers: {"Authorization": `Bearer ${token() || ""}`}});
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    alert(body.detail || body.error || `HTTP ${r.status}`);
  }
  render();
}

// --------------------------------------------------------------------------------------------- render

async function render() {
  const app = document.getElementById("app");
  const route = location.hash.startsWith("#/job/") ? decodeURIComponent(location.hash.slice(6)) : null;
  try {
    let snap, html;
    if (STATIC) {
      snap = STATIC.snapshot;
      const detail = route ? STATIC.jobs[route] || null : null;
      html = route ? jobPage(snap, detail, detail ? detail.explanations : null) : overview(snap);
    } else {
      snap = await getJson("/ui/v1/snapshot");
      if (location.hash === "#/whatif") {
        html = await whatifPage().catch(e => `<section id="whatif"><h2>What if</h2><p>${esc(e && e.message ? e.message : e)}</p></section>`);
      } else if (route) {
        const id = encodeURIComponent(route);
        const [detail, explain] = await Promise.all([getJson(`/ui/v1/jobs/${id}`), getJson(`/v1/jobs/${id}/explain`)]);
        html = jobPage(snap, detail, explain);
      } else {
        html = overview(snap);
      }
    }
    const link = document.getElementById("whatif-link");
    if (link && STATIC) link.remove();  // a written report has no service to replay
    document.getElementById("title").textContent = snap.title;
    document.getElementById("clock").textContent = snap.live ? `updated ${new Date().toLocaleTimeString()}` :
      `finished simulation, ${Math.round(snap.time_s)} s simulated`;
    const typing = document.activeElement;
    if (location.hash === "#/whatif" && typing && typing.tagName === "INPUT" && typing.closest("#whatif-form")) {
      return;  // the admin is typing in the form: the poll does not redraw it away
    }
    app.innerHTML = html;
    const form = document.getElementById("whatif-form");
    if (form) form.addEventListener("submit", startWhatif);
    document.body.dataset.ready = "1";
  } catch (e) {
    if (e && e.login) { showLogin(); return; }
    app.innerHTML = `<section><h2>error</h2><p>${esc(e && e.message ? e.message : e)}</p></section>`;
  }
}

window.addEventListener("hashchange", render);
render();
if (!STATIC) timer = setInterval(() => { if (!document.querySelector("#login")) render(); }, POLL_MS);
