"use strict";
const form = document.getElementById("form");

function p99(summary, key) { return summary && summary[key] ? ms(summary[key].p99) : "–"; }

async function openRun(id) {
  const [run, reqs] = await Promise.all([api(`/runs/${encodeURIComponent(id)}`), api(`/runs/${encodeURIComponent(id)}/requests`)]);
  const s = run.summary;
  let accuracy = "";
  if (run.kind === "measured") {
    try {
      const a = await api(`/runs/${encodeURIComponent(id)}/accuracy`);
      accuracy = `<h2>Measured vs simulated</h2>` + table([["metric", (m) => esc(m.metric)], ["measured", (m) => num(m.measured, 4)],
        ["simulated", (m) => num(m.predicted, 4)], ["error", (m) => (m.error === null ? "–" : num(100 * m.error, 1) + "%")]], a.metrics) + notes(a.notes);
    } catch (e) { accuracy = `<h2>Measured vs simulated</h2><p class="muted">${esc(e.message)}</p>`; }
  }
  document.getElementById("result").innerHTML = `
    <h2>Run <code id="run-id">${esc(run.run_id)}</code> (${esc(run.kind)})</h2>
    <p class="muted">${esc(run.model)} ${run.url ? "at " + esc(run.url) : ""}, ${esc(run.mode)}, ${esc(run.created_at)};
      ${num(run.num_requests)} requests, ${num(run.num_errors)} errors${run.interrupted ? ", interrupted" : ""}.</p>
    ${cards([["TTFT p99 (ms)", p99(s, "ttft_s")], ["TPOT p99 (ms)", p99(s, "tpot_s")], ["E2E p99 (ms)", p99(s, "e2e_s")],
      ["req/s", num(s.throughput_req_s, 2)], ["output tokens/s", num(s.output_tokens_per_s)]])}
    <div id="scatter" class="plot"></div>${accuracy}`;
  if (!reqs.requests.length && run.kind === "simulated" && run.num_requests > 0) {
    // a streamed run keeps sketches, not records: its percentiles per window and per group
    await plotSketches(id, run);
    return;
  }
  const ok = reqs.requests.filter((r) => r.first_token_s !== null && r.first_token_s !== undefined);
  // a request's time axis: its scheduled arrival (seconds from the start of the run)
  Plotly.newPlot("scatter", [{ x: ok.map((r) => r.scheduled_s), y: ok.map((r) => (r.first_token_s - r.scheduled_s) * 1e3), mode: "markers",
    name: "TTFT", marker: { size: 5 } }], { ...PLOT_LAYOUT, title: { text: "Time to first token of each request" },
    xaxis: { title: { text: "arrival (s from the start)" } }, yaxis: { title: { text: "TTFT (ms)" } } }, PLOT_CONFIG);
}

// A streamed run (`fleet simulate --sketch --save`): TTFT p50/p99 of each time window from the
// stored sketches (GET /runs/{id}/sketches, as `servecap runs show --sketches`), the fleet's TTFT
// SLO as a labelled line, and the percentiles of every pool, tenant and class.
async function plotSketches(id, run) {
  const r = await api(`/runs/${encodeURIComponent(id)}/sketches`);
  const plot = document.getElementById("scatter");
  plot.insertAdjacentHTML("afterend", `<p class="muted" id="sketch-note">Percentiles from the run's sketches, each within
    ${num(100 * r.relative_accuracy)}% of the exact value at its rank; windows of ${num(r.window_s)} s by first-token time.</p>
    <h2>Percentiles by group</h2>
    ${table([["group", (g) => esc(g.axis === "run" ? "whole run" : `${g.axis} ${g.name}`)], ["requests", (g) => num(g.requests)],
      ["completed", (g) => num(g.completed)], ["TTFT p50 ms", (g) => ms(g.ttft_p50_s, 0)], ["TTFT p99 ms", (g) => ms(g.ttft_p99_s, 0)],
      ["TPOT p50 ms", (g) => ms(g.tpot_p50_s, 1)], ["TPOT p99 ms", (g) => ms(g.tpot_p99_s, 1)], ["E2E p99 ms", (g) => ms(g.e2e_p99_s, 0)]], r.groups)}`);
  const w = r.windows, mid = w.map((x) => (x.start_s + x.end_s) / 2);
  const slo = run.settings && run.settings.fleet && run.settings.fleet.slo;
  const sloMs = slo && slo.ttft_ms ? slo.ttft_ms : null;
  Plotly.newPlot("scatter", [
    { x: mid, y: w.map((x) => (x.ttft_p99_s === null ? null : x.ttft_p99_s * 1e3)), name: "TTFT p99", mode: "lines+markers", line: { width: 2 } },
    { x: mid, y: w.map((x) => (x.ttft_p50_s === null ? null : x.ttft_p50_s * 1e3)), name: "TTFT p50", mode: "lines+markers", line: { dash: "dot" } },
    { x: mid, y: w.map((x) => x.first_tokens), name: "first tokens per window", mode: "lines", yaxis: "y2", line: { shape: "hv", color: "#98a2b3" } },
  ], { ...PLOT_LAYOUT, margin: { ...PLOT_LAYOUT.margin, r: 70 }, title: { text: "Time to first token per window (from the run's sketches)" },
    xaxis: { title: { text: "simulated time (s, window middle)" } }, yaxis: { title: { text: "TTFT (ms)" }, rangemode: "tozero" },
    yaxis2: { title: { text: "first tokens" }, overlaying: "y", side: "right", showgrid: false, ...countAxis(w.map((x) => x.first_tokens)) },
    shapes: sloMs ? [sloShape("TTFT", sloMs, "y", "#b42318")] : [] }, PLOT_CONFIG);
}

const ui = page("runs", form, async (state) => {
  const qs = new URLSearchParams();
  if (state.kind) qs.set("kind", state.kind);
  qs.set("limit", state.limit || "50");
  const runs = await api("/runs?" + qs.toString());
  document.getElementById("list").innerHTML = runs.length ? table([
    ["run", (r) => `<a href="?${new URLSearchParams({ ...state, run: r.run_id })}" data-run="${esc(r.run_id)}">${esc(r.run_id)}</a>`],
    ["kind", (r) => esc(r.kind)], ["when", (r) => esc(r.created_at)], ["model", (r) => esc(r.model)], ["requests", (r) => num(r.num_requests)],
    ["errors", (r) => num(r.num_errors)], ["TTFT p99 ms", (r) => p99(r.summary, "ttft_s")], ["TPOT p99 ms", (r) => p99(r.summary, "tpot_s")],
  ], runs) : `<p class="muted">No stored runs yet: <code>servecap bench URL</code> measures a server, and simulations run here are kept too.</p>`;
  if (state.run) await openRun(state.run);
  else document.getElementById("result").innerHTML = "";
});

// ---- the shadow autoscaler: `monitor replay` of a stored monitor session -----------------------

const replayForm = document.getElementById("replay-form");
const DEFAULT_FLEET = {
  pools: [{ name: "main", model: "meta-llama/Llama-3.1-8B", gpu: "H100", max_model_len: 8192,
    autoscaler: { preset: "keda-vllm", min_replicas: 1, max_replicas: 4 } }],
  router: "least-outstanding", slo: { ttft_ms: 2000, tpot_ms: 100 },  // fleet plan's default SLO
};

function renderReplay(r) {
  const x = r.minutes.map((m) => m.minute);
  const ran = r.actual_gpu_hours === null ? "" : ` vs <strong>${num(r.actual_gpu_hours, 2)}</strong> GPU-hours (${usd(r.actual_cost_usd)}) that ran`;
  document.getElementById("replay").innerHTML = `
    <p class="answer" id="replay-answer"><strong id="replay-events">${num(r.scale_events.length)}</strong> scale events of pool ${esc(r.pool)}'s autoscaler;
      shadow <strong>${num(r.shadow_gpu_hours, 2)}</strong> GPU-hours (${usd(r.shadow_cost_usd)})${ran}.</p>
    <p class="muted">${esc(r.history)}, ${num(r.duration_s / 60, 1)} min at ${num(r.prompt_tokens)} + ${num(r.output_tokens)} tokens per request.
      SLO break rate ${num(r.break_rate_req_s, 2)} req/s per replica (${sloText(r.slo)}); minutes above it: shadow ${num(r.shadow_minutes_at_risk)}${r.actual_minutes_at_risk === null ? "" : ", what ran " + num(r.actual_minutes_at_risk)}, cold-start gaps ${num(r.cold_start_gap_minutes)}.</p>
    <div id="replay-plot" class="plot"></div>
    <h2>Scale events</h2>
    ${table([["time (s)", (e) => num(e.time_s, 1)], ["pool", (e) => esc(e.pool)], ["from", (e) => num(e.from)], ["to", (e) => num(e.to)]], r.scale_events)}
    ${notes(r.notes)}`;
  const risky = r.minutes.filter((m) => m.shadow_at_risk);
  const traces = [
    { x, y: r.minutes.map((m) => m.shadow_ready), name: "shadow: ready", line: { shape: "hv", width: 2 } },
    { x, y: r.minutes.map((m) => m.shadow_ready + m.shadow_starting), name: "shadow: ready + starting", line: { shape: "hv", dash: "dot" } },
    { x, y: r.minutes.map((m) => m.rate_req_s), name: "recorded req/s", yaxis: "y2", line: { shape: "hv" } },
  ];
  if (r.minutes.some((m) => m.actual_replicas !== null)) traces.unshift({ x, y: r.minutes.map((m) => m.actual_replicas), name: "ran", line: { shape: "hv" } });
  if (risky.length) traces.push({ x: risky.map((m) => m.minute), y: risky.map((m) => m.rate_req_s), name: "shadow above the SLO rate", yaxis: "y2",
    mode: "markers", marker: { color: "#b42318", size: 9, symbol: "x" } });
  Plotly.newPlot("replay-plot", traces, { ...PLOT_LAYOUT, height: 520, title: { text: "Replicas that ran and the shadow autoscaler's; the recorded traffic" },
    grid: { rows: 2, columns: 1, pattern: "independent" }, xaxis: { title: { text: "minute of the history" }, anchor: "y2" },
    yaxis: { title: { text: "replicas" }, domain: [0.55, 1], rangemode: "tozero" },
    yaxis2: { title: { text: "requests/s" }, domain: [0, 0.42], rangemode: "tozero" } }, PLOT_CONFIG);
}

async function replaySessions() {
  const sessions = await api("/monitor/sessions");
  document.getElementById("sessions").innerHTML = sessions.length ? table([
    ["session", (s) => `<a href="?${new URLSearchParams({ session: s.session })}" data-session="${esc(s.session)}">${esc(s.session)}</a>`],
    ["started", (s) => esc(s.started_at)], ["targets", (s) => esc(s.urls.join(", "))], ["samples", (s) => num(s.samples)],
    ["minutes", (s) => num(s.duration_s / 60, 1)],
  ], sessions) : `<p class="muted">No monitor sessions yet: <code>servecap monitor URL --db</code> this server's results file records one.</p>`;
  const select = document.getElementById("session");
  for (const s of sessions) select.add(new Option(`${s.session} (${s.started_at})`, s.session));
  return sessions;
}

const replayError = document.getElementById("error");
async function replayGo() {
  const state = formState(replayForm);
  history.replaceState(null, "", location.pathname + "?" + new URLSearchParams(state).toString());
  showError(replayError, "");
  let fleet;
  try { fleet = JSON.parse(state.fleet || "{}"); } catch (e) { showError(replayError, `fleet: not valid JSON (${e.message})`); return; }
  const body = { session: state.session, fleet, seed: parseInt(state.seed || "0", 10) };
  if (state.pool) body.pool = state.pool;
  const button = replayForm.querySelector("button[type=submit]");
  button.disabled = true;
  const replayEl = document.getElementById("replay"), stale = markStale(replayEl);  // the last replay, greyed out
  try {
    renderReplay(await runJob("/monitor/replay", body, document.getElementById("progress"), document.getElementById("progress-label"), document.getElementById("cancel")));
    document.getElementById("progress-label").textContent = "";
  } catch (e) { showError(replayError, e.message); if (stale) replayEl.innerHTML = ""; }
  finally { button.disabled = false; unmarkStale(replayEl); }
}
replayForm.addEventListener("submit", (ev) => { ev.preventDefault(); replayGo(); });
// a session's link clicked here replays it through the form's fleet (the user's click); the same
// link opened from elsewhere only fills the form
document.getElementById("sessions").addEventListener("click", (ev) => {
  const a = ev.target.closest("a[data-session]");
  if (!a) return;
  ev.preventDefault();
  replayForm.elements.session.value = a.dataset.session;
  replayGo();
});
const startParams = new URLSearchParams(location.search);  // read before the run list rewrites the link
ui.restore();
ui.go();
replaySessions().then((sessions) => {
  if (!sessions.length) return;
  document.getElementById("fleet").value = JSON.stringify(DEFAULT_FLEET, null, 2);
  replayForm.classList.remove("hidden");
  if (startParams.has("session")) { fillForm(replayForm, startParams); awaitClick(replayForm); }  // a shared link fills the replay: Run starts it
}).catch((e) => showError(replayError, e.message));
