"use strict";
const form = document.getElementById("form");
traceFields(document.getElementById("trace-box"));
const progressEl = document.getElementById("progress"), labelEl = document.getElementById("progress-label");
const cancelBtn = document.getElementById("cancel");

// The form as a fleet file and a workload file (the same keys as the YAML files).
function filesFrom(s) {
  const n = (k) => (s[k] === undefined ? undefined : Number(s[k]));
  const pool = { name: "main", model: s.model || "meta-llama/Llama-3.1-8B", gpu: s.gpu || "H100-SXM", replicas: n("replicas") };
  if (s.weights_dtype) pool.weights_dtype = s.weights_dtype;
  if (s.tp && n("tp") > 1) pool.tp = n("tp");
  if (s.max_model_len) pool.max_model_len = n("max_model_len");
  if (s.price_per_gpu_hour) pool.price_per_gpu_hour = n("price_per_gpu_hour");
  if (s.cold_start === "instant") pool.cold_start = "instant";
  if (s.max_replicas) pool.autoscaler = { preset: s.preset, min_replicas: Math.max(1, n("replicas") || 1), max_replicas: n("max_replicas") };
  const fleet = { pools: [pool], router: { name: s.router, scrape_interval_ms: n("scrape_interval_ms") || 0 },
    slo: { ttft_ms: n("ttft_ms"), tpot_ms: n("tpot_ms") } };
  const rate = n("rate");
  const arrival = s.step_rate
    ? { kind: "schedule", rate: { kind: "piecewise", steps: [{ start_s: 0, rate_per_s: rate }, { start_s: n("step_at_s") || 0, rate_per_s: n("step_rate") }] } }
    : { kind: "poisson", rate_per_s: rate };
  const trace = traceFrom(s);  // a trace sample brings its arrivals and lengths
  const workload = trace ? { arrival: trace } : { arrival, prompt_tokens: n("prompt_tokens"), output_tokens: n("output_tokens"), duration_s: n("duration_s") };
  return { fleet, workload, seed: n("seed") || 0 };
}

function render(r, body) {
  const s = r.summary, ts = r.timeseries, slo = body.fleet.slo;
  const el = document.getElementById("result");
  const outcomes = Object.entries(r.outcomes).map(([k, v]) => `${k} ${num(v)}`).join(", ");
  el.innerHTML = `
    <p class="answer" id="answer">${num(s.completed)} of ${num(s.num_requests)} requests served: p99 TTFT <strong>${ms(s.ttft_s && s.ttft_s.p99)}</strong> ms,
      p99 TPOT <strong>${ms(s.tpot_s && s.tpot_s.p99)}</strong> ms; ${num(r.gpu_hours, 2)} GPU-hours, <strong>${usd(r.cost_usd)}</strong>
      (${usd(r.usd_per_million_tokens, 3)} per million tokens).</p>
    <p class="muted">Prefix-cache hit rate <span id="prefix-hit-rate">${s.prefix_cache_hit_rate === null || s.prefix_cache_hit_rate === undefined ? "–" : num(100 * s.prefix_cache_hit_rate, 1) + "%"}</span>${body.workload.arrival.kind === "trace" ? ` (replayed ${esc(body.workload.arrival.path)})` : ""}.
      Outcomes: ${esc(outcomes)}. SLO attainment ${s.slo_attainment === null ? "–" : num(100 * s.slo_attainment, 1) + "%"};
      ${num(r.scale_events.length)} scaling events; ${num(r.retried)} retried.</p>
    ${s.kv_tiers ? `<p class="muted" id="kv-tiers">KV tier hits (of prompt tokens): ${Object.entries(s.kv_tiers)
      .filter(([, v]) => typeof v === "object").map(([k, v]) => `${esc(k)} ${v.fraction === null ? "–" : num(100 * v.fraction, 1) + "%"}`).join(", ")}.</p>` : ""}
    <div id="traffic" class="plot"></div><div id="latency" class="plot"></div>
    <h2>Replicas</h2>
    ${table([["id", (x) => num(x.replica_id)], ["pool", (x) => esc(x.pool)], ["state", (x) => esc(x.state)],
      ["ready at (s)", (x) => (x.ready_s === null ? "–" : num(x.ready_s, 1))], ["routed", (x) => num(x.routed)],
      ["load req/s (of capacity)", (x) => (x.load_req_s === null ? "–" : num(x.load_req_s, 2) + (x.capacity_req_s ? ` (of ~${num(x.capacity_req_s, 1)}, ${num(100 * x.load_req_s / x.capacity_req_s, 0)}%)` : ""))],
      ["busy (a request in flight)", (x) => num(100 * x.utilization, 0) + "%"], ["prefix hits", (x) => (x.prefix_cache_hit_rate === null ? "–" : num(100 * x.prefix_cache_hit_rate, 0) + "%")]],
      r.replicas)}${notes(r.notes)}`;
  Plotly.newPlot("traffic", [
    { x: ts.time_s, y: ts.arrival_rate_req_s, name: "arrivals (req/s)", mode: "lines", line: { width: 2 } },
    { x: ts.time_s, y: ts.ready, name: "ready replicas", mode: "lines", yaxis: "y2", line: { shape: "hv", width: 2 } },
    { x: ts.time_s, y: ts.starting, name: "starting replicas", mode: "lines", yaxis: "y2", line: { shape: "hv", dash: "dot" } },
    { x: ts.time_s, y: ts.queue_depth, name: "waiting requests", mode: "lines", yaxis: "y3", line: { dash: "dash" } },
  ], { ...PLOT_LAYOUT, margin: { ...PLOT_LAYOUT.margin, r: 40 }, title: { text: "Traffic, replicas and queue" }, xaxis: { title: { text: "time (s)" }, domain: [0, 0.88] },
    yaxis: { title: { text: "arrivals (req/s)" }, rangemode: "tozero" },
    yaxis2: { title: { text: "replicas" }, overlaying: "y", side: "right", showgrid: false, ...countAxis(ts.ready.map((v, i) => v + ts.starting[i])) },
    yaxis3: { title: { text: "waiting" }, overlaying: "y", side: "right", position: 0.96, anchor: "free", showgrid: false, ...countAxis(ts.queue_depth) } }, PLOT_CONFIG);
  Plotly.newPlot("latency", [{ x: ts.time_s, y: ts.p99_ttft_s.map((v) => (v === null ? null : v * 1e3)), name: "rolling p99 TTFT", mode: "lines" }],
    { ...PLOT_LAYOUT, title: { text: "Rolling p99 TTFT" }, xaxis: { title: { text: "time (s)" } },
      yaxis: { title: { text: "p99 TTFT (ms)" }, rangemode: "tozero" },
      shapes: slo.ttft_ms ? [sloShape("TTFT", slo.ttft_ms, "y", "#b42318")] : [] }, PLOT_CONFIG);
}

const ui = page("fleet", form, async (state) => {
  const body = filesFrom(state);
  render(await runJob("/fleet/simulate", body, progressEl, labelEl, cancelBtn), body);
  labelEl.textContent = "";
});
Promise.all([fillCatalogs(document.getElementById("model"), document.getElementById("gpu")), fillTraces(document.getElementById("trace"))])
  .then(() => {
    document.getElementById("model").value = "meta-llama/Llama-3.1-8B";
    document.getElementById("gpu").value = "H100-SXM";
    ui.startOrWait();  // the default answer before the first submit, or a link's form waiting for Run
  })
  .catch((e) => showError(ui.errorEl, e.message));
