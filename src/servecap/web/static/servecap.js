// servecap web UI: shared helpers. Every number comes from /api/v1; this file only lays them out.
"use strict";

const PAGES = [["plan", "Plan"], ["compare", "Compare GPUs"], ["simulate", "Simulate"], ["fleet", "Fleet"], ["fleet-plan", "Fleet plan"], ["runs", "Runs"]];

function header(current) {
  const nav = PAGES.map(([p, t]) => `<a href="/${p}" class="${p === current ? "current" : ""}">${t}</a>`).join("");
  document.body.insertAdjacentHTML("afterbegin",
    `<header><a class="brand" href="/plan">servecap</a><nav>${nav}</nav>` +
    `<span class="muted">How many users can this GPU or fleet serve, at what latency and cost</span></header>`);
}

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

// Numbers: never truncated, thousands separators, a fixed number of decimals.
function num(x, digits = 0) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  return Number(x).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
const ms = (s, d = 1) => (s === null || s === undefined ? "–" : num(s * 1e3, d));
const gb = (b, d = 1) => (b === null || b === undefined ? "–" : num(b / 1e9, d));
const usd = (x, d = 2) => (x === null || x === undefined ? "–" : "$" + num(x, d));
// an answer's 80% interval (the API's `interval`: low, high, level, note) next to its number, in
// the number's own format; the note (what the corpus errors it comes from) on hover; "" when none
function ivText(iv, fmt, id) {
  if (!iv) return "";
  const attr = id ? ` id="${esc(id)}"` : "";
  const model = Number.isFinite(iv.model) && Number.isFinite(iv.estimate) && fmt(iv.model) !== fmt(iv.estimate)
    ? `; servecap's model ${fmt(iv.model)}` : "";
  return ` <span class="interval"${attr} title="${esc(iv.note)}">(${num(100 * iv.level)}% interval ${fmt(iv.low)}–${fmt(iv.high)}${model})</span>`;
}
// the answer a page shows beside its interval: the interval's bias-corrected estimate (always
// inside it, validation/interval.py), else the model's figure
function ivPoint(iv, value) {
  return iv && Number.isFinite(iv.estimate) ? iv.estimate : value;
}

class ApiError extends Error {}

async function api(path, body, method) {
  const init = { method: method || (body === undefined ? "GET" : "POST"), headers: {} };
  if (body !== undefined) { init.headers["content-type"] = "application/json"; init.body = JSON.stringify(body); }
  const r = await fetch("/api/v1" + path, init);
  let data = null;
  try { data = await r.json(); } catch (e) { throw new ApiError(`the server answered ${r.status} with no JSON`); }
  if (!r.ok) throw new ApiError(data && data.error ? data.error.message : `the server answered ${r.status}`);
  return data;
}

function showError(el, message) {
  el.textContent = message;
  el.classList.toggle("hidden", !message);
}

// ---- form <-> URL: each page's state lives in the query string --------------------------------

function formState(form) {
  const state = {};
  for (const el of form.elements) {
    if (!el.name || el.type === "file") continue;
    if (el.type === "checkbox") { if (el.checked) state[el.name] = "1"; continue; }
    if (el.type === "select-multiple") { const v = [...el.selectedOptions].map((o) => o.value).join(","); if (v) state[el.name] = v; continue; }
    if (el.value !== "") state[el.name] = el.value;
  }
  return state;
}

function fillForm(form, params) {
  for (const el of form.elements) {
    if (!el.name || el.type === "file") continue;
    if (!params.has(el.name)) continue;
    const v = params.get(el.name);
    if (el.type === "checkbox") { el.checked = v === "1"; continue; }
    if (el.type === "select-multiple") {
      const want = v.split(",").filter(Boolean);
      for (const w of want) if (![...el.options].some((o) => o.value === w)) el.add(new Option(w, w));
      for (const o of el.options) o.selected = want.includes(o.value);
      continue;
    }
    if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === v)) el.add(new Option(v, v));
    el.value = v;
  }
}

function saveState(form) {
  const qs = new URLSearchParams(formState(form)).toString();
  history.replaceState(null, "", location.pathname + (qs ? "?" + qs : ""));
}

// Body for the API: numbers where the field is numeric, lists split on commas.
function bodyFrom(state, spec) {
  const body = {};
  for (const [k, v] of Object.entries(state)) {
    const kind = spec[k];
    if (kind === undefined) continue;
    if (kind === "int") body[k] = parseInt(v, 10);
    else if (kind === "float") body[k] = parseFloat(v);
    else if (kind === "bool") body[k] = v === "1";
    else if (kind === "list") body[k] = v.split(",").map((s) => s.trim()).filter(Boolean);
    else if (kind === "intlist") body[k] = v.split(",").map((s) => parseInt(s.trim(), 10)).filter((n) => !Number.isNaN(n));
    else body[k] = v;
    if ((kind === "int" || kind === "float") && Number.isNaN(body[k])) body[k] = v; // let the API name the bad value
  }
  return body;
}

async function fillCatalogs(modelSelect, gpuSelect) {
  const [models, gpus, policies] = await Promise.all([api("/models"), api("/gpus"), api("/policies")]);
  if (modelSelect) for (const m of models) modelSelect.add(new Option(m.id, m.id));
  if (gpuSelect) for (const g of gpus) gpuSelect.add(new Option(`${g.id} (${num(g.memory_gb)} GB)`, g.id));
  fillPolicies(policies);
}

// Router and autoscaler lists from the registries (GET /policies): <select data-list="routers">
// gets every registered router with the default selected (policies.default_router).
function fillPolicies(policies) {
  for (const sel of document.querySelectorAll("select[data-list]")) {
    const list = sel.dataset.list, chosen = policies["default_" + list.replace(/s$/, "")];
    for (const name of policies[list]) sel.add(new Option(name, name, name === chosen, name === chosen));
  }
}

// An uploaded config.json becomes a model name (upload:<id>) the server keeps by content.
function wireUpload(fileInput, modelSelect, errorEl) {
  if (!fileInput) return;
  fileInput.addEventListener("change", async () => {
    const file = fileInput.files[0];
    if (!file) return;
    try {
      const config = JSON.parse(await file.text());
      const out = await api("/models/upload", { config, name: file.name });
      modelSelect.add(new Option(`${file.name} (${out.model})`, out.model));
      modelSelect.value = out.model;
      showError(errorEl, "");
    } catch (e) {
      showError(errorEl, e instanceof SyntaxError ? `config.json: not valid JSON (${e.message})` : e.message);
    }
  });
}

function table(columns, rows) {
  const head = "<tr>" + columns.map((c) => `<th>${esc(c[0])}</th>`).join("") + "</tr>";
  const body = rows.map((r) => "<tr>" + columns.map((c) => `<td>${c[1](r)}</td>`).join("") + "</tr>").join("");
  return `<div class="tablewrap"><table>${head}${body}</table></div>`;
}

function cards(items) {
  return `<div class="cards">${items.map(([k, v]) => `<div class="card"><div class="k">${esc(k)}</div><div class="v">${v}</div></div>`).join("")}</div>`;
}

function notes(list) {
  return list && list.length ? `<ul class="notes">${list.map((n) => `<li>${esc(n)}</li>`).join("")}</ul>` : "";
}

const PLOT_LAYOUT = { margin: { l: 64, r: 20, t: 40, b: 56 }, font: { size: 13 }, legend: { orientation: "h", y: -0.25 } };
const PLOT_CONFIG = { displaylogo: false, responsive: true };

// A job's progress event in a line, the fields `servecap` prints on stderr (cli/console.py's
// progress_line): "simulate: 470 of 4,709 requests (10%), 12 s simulated — a note".
function progressText(snap) {
  const p = snap.progress;
  if (!p || snap.state === "queued") return snap.state;
  let text = `${p.stage}: ${num(p.done)}${p.total ? " of " + num(p.total) : ""} ${p.unit}`;
  if (p.total) text += ` (${num(100 * Math.min(1, p.done / p.total))}%)`;
  if (p.sim_time_s !== null && p.sim_time_s !== undefined) text += `, ${num(p.sim_time_s)} s simulated`;
  return text + (p.message ? " — " + p.message : "");
}

// An SLO as a dashed horizontal line labelled with its name and value ("TTFT SLO 2,000 ms") just
// under it at the right end (`position` "start": the left; under it: a line at the top of the
// range keeps its label inside the plot), on the y axis `yref` (a log axis takes the value as is: shapes are in data units).
function sloShape(name, valueMs, yref, color, dash, position) {
  return { type: "line", xref: "paper", x0: 0, x1: 1, yref: yref || "y", y0: valueMs, y1: valueMs,
    line: { dash: dash || "dash", width: 2, color },
    label: { text: `${name} SLO ${num(valueMs)} ms`, textposition: position || "end", yanchor: "top", font: { color, size: 12 } } };
}

// A y axis of counts (replicas, requests): whole numbers from 0 in steps of 1, 2 or 5 x 10^k, at
// most about `most` labels. Plotly's own ticks on an overlaying axis fall on fractions ("0.158")
// and a ",d" format then prints the same whole number twice.
function countAxis(values, most = 6) {
  const top = values.reduce((a, v) => (Number.isFinite(v) && v > a ? v : a), 1);
  const raw = top / most, p = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max(1, [1, 2, 5, 10].map((m) => m * p).find((x) => x >= raw));
  return { tickmode: "linear", tick0: 0, dtick: step, tickformat: ",d", rangemode: "tozero" };
}

// Ticks for a log axis over `values`: whole decades, or 1-2-5 in each decade when the data span
// few decades, each labelled in full ("2,000"), at most `most` of them. Plotly's own log ticks
// label minor ticks with single digits ("2", "5") that collide with the decade labels on a
// short axis.
function logTicks(values, most = 8) {
  const v = values.filter((x) => Number.isFinite(x) && x > 0);
  if (!v.length) return {};
  const lo = Math.min(...v), hi = Math.max(...v);
  const d0 = Math.floor(Math.log10(lo)), d1 = Math.ceil(Math.log10(hi));
  for (const [mantissas, every] of [[[1, 2, 5], 1], [[1], 1], [[1], 2], [[1], 3], [[1], 5], [[1], 10]]) {
    const ticks = [];
    for (let d = d0; d <= d1; d += 1) {
      if ((d - d0) % every) continue;
      for (const m of mantissas) { const t = m * 10 ** d; if (t >= lo / 1.5 && t <= hi * 1.5) ticks.push(t); }
    }
    if (ticks.length <= most) {
      const digits = (t) => Math.max(0, -Math.floor(Math.log10(t) + 1e-9));
      return ticks.length >= 2 ? { tickmode: "array", tickvals: ticks, ticktext: ticks.map((t) => num(t, digits(t))) } : {};
    }
  }
  return {};
}

// A job: submit, follow its server-sent events into a progress bar, return the result.
async function runJob(path, body, progressEl, labelEl, cancelBtn) {
  const job = await api(path, body);
  progressEl.classList.remove("hidden");
  progressEl.removeAttribute("value");
  labelEl.textContent = "queued";
  cancelBtn.classList.remove("hidden");
  const cancel = () => api(`/jobs/${job.id}`, undefined, "DELETE");
  cancelBtn.onclick = cancel;
  try {
    return await new Promise((resolve, reject) => {
      const events = new EventSource(`/api/v1/jobs/${job.id}/events`);
      const onSnap = (ev) => {
        const snap = JSON.parse(ev.data);
        const p = snap.progress;
        if (p && p.total) { progressEl.max = p.total; progressEl.value = p.done; }
        labelEl.textContent = progressText(snap);
        if (snap.state === "done") { events.close(); resolve(snap.result); }
        if (snap.state === "failed" || snap.state === "cancelled") { events.close(); reject(new ApiError(snap.error || snap.state)); }
      };
      for (const kind of ["progress", "done", "failed", "cancelled"]) events.addEventListener(kind, onSnap);
      events.onerror = () => { events.close(); reject(new ApiError("lost the connection to the job's progress")); };
    });
  } finally {
    progressEl.classList.add("hidden");
    cancelBtn.classList.add("hidden");
  }
}

// Form defaults from the API's schema (/openapi.json): an input named like a field of the use
// case's request takes that field's default, the one `servecap <command> --help` shows; a field
// whose default is null (the server decides) keeps the input empty, with its placeholder.
async function fillDefaults(form, schemaName) {
  const r = await fetch("/openapi.json");
  if (!r.ok) throw new ApiError(`the server answered ${r.status} for its schema`);
  const props = (await r.json()).components.schemas[schemaName].properties;
  for (const [name, prop] of Object.entries(props)) {
    const el = form.elements.namedItem(name);
    if (!el || el.type === "file" || prop.default === undefined || prop.default === null) continue;
    if (el.type === "checkbox") el.checked = Boolean(prop.default);
    else el.value = Array.isArray(prop.default) ? prop.default.join(",") : String(prop.default);
  }
}

// Wire a page: fill from the URL, run on submit (and at load when the URL has state).
function page(name, form, run) {
  header(name);
  const errorEl = document.getElementById("error");
  const resultEl = document.getElementById("result");
  const go = async () => {
    saveState(form);
    showError(errorEl, "");
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    const stale = markStale(resultEl);
    try { await run(formState(form)); }
    catch (e) { showError(errorEl, e.message); if (stale) resultEl.innerHTML = ""; }  // no old answer beside the error
    finally { button.disabled = false; unmarkStale(resultEl); }
  };
  form.addEventListener("submit", (ev) => { ev.preventDefault(); go(); });
  const restore = () => { const p = new URLSearchParams(location.search); fillForm(form, p); return [...p.keys()].length > 0; };
  // A job page: a link's state fills the form and waits for the user's Run (a link, framed or
  // followed from another site, never starts a job); with nothing in the link the page shows its
  // default answer (fixed inputs, nothing stored).
  const startOrWait = () => { if (restore()) awaitClick(form); else go(); };
  return { go, errorEl, restore, startOrWait };
}

// While a new answer is worked out the previous one stays visible but greyed out, with a note
// above it that it answers the previous inputs; the new answer (or the error) replaces both.
// True when there was an answer to mark.
function markStale(resultEl) {
  if (!resultEl || !resultEl.querySelector("#answer, .answer, h2")) return false;
  resultEl.classList.add("stale");
  resultEl.setAttribute("aria-busy", "true");
  let note = document.getElementById("stale-note");
  if (!note) {
    note = document.createElement("p");
    note.id = "stale-note";
    note.className = "stale-note";
    note.setAttribute("role", "status");
    resultEl.parentElement.insertBefore(note, resultEl);
  }
  note.textContent = "Working on the new inputs: the answer below is for the previous ones.";
  return true;
}

function unmarkStale(resultEl) {
  if (!resultEl) return;
  resultEl.classList.remove("stale");
  resultEl.removeAttribute("aria-busy");
  const note = document.getElementById("stale-note");
  if (note) note.remove();
}

// The note a page filled from its link shows until the user runs it.
function awaitClick(form) {
  const button = form.querySelector("button[type=submit]");
  let note = document.getElementById("await-click");
  if (!note) {
    note = document.createElement("p");
    note.id = "await-click";
    note.className = "muted";
    button.parentElement.appendChild(note);
  }
  note.textContent = "Filled from the link: press " + button.textContent + " to run it.";
  form.addEventListener("submit", () => note.remove(), { once: true });
}

// The deployment fields every page shares (the flags of `servecap plan`).
const DEPLOYMENT_SPEC = {
  model: "str", gpu: "str", num_gpus: "int", tp: "int", weights_dtype: "str", kv_cache_dtype: "str",
  max_model_len: "int", gpu_memory_utilization: "float", max_num_seqs: "int", rope_scaling: "str",
};

function deploymentFields(el) {
  const dtype = (name, values) => `<select name="${name}">${values.map((v) => `<option value="${v}">${v || "model's"}</option>`).join("")}</select>`;
  el.innerHTML = `<fieldset><legend>Deployment</legend>
    <label>Model<select name="model" id="model"></select></label>
    <label>…or config.json<input type="file" id="config-file" accept=".json,application/json"></label>
    <label>GPU<select name="gpu" id="gpu"></select></label>
    <label>GPUs (TP)<input name="num_gpus" type="number" min="1" placeholder="1"></label>
    <label>Weights dtype${dtype("weights_dtype", ["", "bf16", "fp16", "fp8", "int8", "int4"])}</label>
    <label>KV cache dtype${dtype("kv_cache_dtype", ["auto", "fp8"])}</label>
    <label>Context <span class="unit">tokens</span><input name="max_model_len" type="number" min="1" placeholder="model's"></label>
    <label>GPU memory share<input name="gpu_memory_utilization" type="number" step="0.01" min="0.05" max="1" placeholder="0.9"></label>
    <label>max_num_seqs<input name="max_num_seqs" type="number" min="1" placeholder="vLLM's"></label>
  </fieldset>`;
}

async function deploymentReady(form, errorEl) {
  const model = form.querySelector("#model"), gpu = form.querySelector("#gpu");
  model.add(new Option("(built-in example)", ""));
  gpu.add(new Option("(built-in example)", ""));
  await fillCatalogs(model, gpu);
  wireUpload(form.querySelector("#config-file"), model, errorEl);
}

// "TTFT ≤ 2,000 ms, TPOT ≤ 100 ms" from an SLO in seconds (a missing bound is left out).
function sloText(slo) {
  const parts = [];
  if (slo && slo.ttft_s !== null && slo.ttft_s !== undefined) parts.push(`TTFT ≤ ${ms(slo.ttft_s, 0)} ms`);
  if (slo && slo.tpot_s !== null && slo.tpot_s !== undefined) parts.push(`TPOT ≤ ${ms(slo.tpot_s, 0)} ms`);
  return parts.length ? parts.join(", ") : "none";
}
