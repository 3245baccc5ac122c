"use strict";
const form = document.getElementById("form");
traceFields(document.getElementById("trace-box"));
// the fidelity a trace is replayed at (`fleet simulate --fidelity`): cache-replay streams a
// block-hash trace through each replica's prefix cache, the router and admission
document.getElementById("trace-fields").insertAdjacentHTML("beforeend",
  `<label>Fidelity<select name="fidelity" id="fidelity"><option value="full">full: the discrete-event simulation</option>` +
  `<option value="cache-replay">cache-replay: prefix caches, routing and admission exact; latencies at admission</option></select></label>`);
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
  if (s.remote_kv_tib) pool.remote_kv_tib = n("remote_kv_tib");
  if (s.max_replicas) pool.autoscaler = { preset: s.preset, min_replicas: Math.max(1, n("replicas") || 1), max_replicas: n("max_replicas") };
  const fleet = { pools: [pool], router: { name: s.router, scrape_interval_ms: n("scrape_interval_ms") || 0 },
    slo: { ttft_ms: n("ttft_ms"), tpot_ms: n("tpot_ms") } };
  if (s.prefill_replicas !== undefined || s.decode_replicas !== undefined) splitPools(s, fleet);
  const rate = n("rate");
  const arrival = s.step_rate
    ? { kind: "schedule", rate: { kind: "piecewise", steps: [{ start_s: 0, rate_per_s: rate }, { start_s: n("step_at_s") || 0, rate_per_s: n("step_rate") }] } }
    : { kind: "poisson", rate_per_s: rate };
  const trace = traceFrom(s);  // a trace sample brings its arrivals and lengths
  const workload = trace ? { arrival: trace } : { arrival, prompt_tokens: n("prompt_tokens"), output_tokens: n("output_tokens"), duration_s: n("duration_s") };
  const body = { fleet, workload, seed: n("seed") || 0 };
  if (s.fidelity === "cache-replay") body.fidelity = "cache-replay";
  return body;
}

// The pool as a prefill and a decode pool (`fleet simulate --prefill-replicas N --decode-replicas
// M`, app/fleet_flags.py): each its role, the KV link and the P/D router.
function splitPools(s, fleet) {
  const missing = ["prefill_replicas", "decode_replicas"].filter((k) => s[k] === undefined);
  if (missing.length) throw new ApiError(`${missing[0]}: give prefill replicas and decode replicas for a disaggregated fleet (or neither: co-located)`);
  if (s.max_replicas) throw new ApiError(`max_replicas=${s.max_replicas}: give prefill/decode replicas or an autoscaler (a fleet file autoscales each role)`);
  const { name, replicas, autoscaler, ...base } = fleet.pools[0];
  const decode = { name: "decode", role: "decode", ...base, replicas: Number(s.decode_replicas) };
  if (s.decode_tp) decode.tp = Number(s.decode_tp);
  fleet.pools = [{ name: "prefill", role: "prefill", ...base, replicas: Number(s.prefill_replicas) }, decode];
  fleet.kv_link = { kind: s.kv_link || "infiniband" };
  if (s.kv_via === "store") fleet.kv_link.via = "store";
  if (s.pd_router && s.pd_router !== "router") {  // a preset: both sides' policies (no router name beside it)
    fleet.pd_router = s.pd_router;
    const scrape = fleet.router.scrape_interval_ms;
    if (scrape) fleet.router = { scrape_interval_ms: scrape }; else delete fleet.router;  // above 0: the server's one line
  }
}

const pct = (x) => (x === null || x === undefined ? "–" : num(100 * x, 1) + "%");

// The P/D section: the rows `fleet simulate` prints under "disaggregated prefill/decode"
// (fleet/pd/stats.py, pd_rows), with the same labels and figures.
function pdSection(pd) {
  const q = (x) => `p50 ${num(x.p50 * 1e3, 1)} ms, p99 ${num(x.p99 * 1e3, 1)} ms`;
  const busiest = pd.links.reduce((a, l) => Math.max(a, l.utilization), 0);
  const rows = [
    ["replicas", `${pd.prefill_replicas} prefill, ${pd.decode_replicas} decode`],
    ["prefill (arrival to KV ready)", q(pd.prefill_s)],
    ["wait for decode room", q(pd.wait_for_room_s)],
    ["link queue", q(pd.link_queue_s)],
    ["KV transfer", q(pd.transfer_s)],
    ["decode: KV landed to first token", q(pd.decode_first_s)],
    ["KV per request", `${num(pd.kv_mb_per_request, 1)} MB`],
    ["hand-off share of TTFT", pct(pd.transfer_share_of_ttft)],
    ["busiest link", `${pct(busiest)} busy`],
  ];
  if (pd.store_blocks) {
    rows.push(["hand-off via the shared store",
      `${pct(pd.store_hit_blocks / pd.store_blocks)} of ${num(pd.store_blocks)} blocks already there; ${num(pd.store_put_gb, 1)} GB put`]);
  }
  const links = table([["link", (l) => esc(l.name)], ["transfers", (l) => num(l.transfers)], ["GB", (l) => num(l.gigabytes, 2)],
    ["busy", (l) => pct(l.utilization)], ["mean queue (ms)", (l) => num(l.mean_queue_s * 1e3, 2)]], pd.links);
  return `<section id="pd"><h2>Disaggregated prefill/decode</h2>
    ${table([["what", (r) => esc(r[0])], ["value", (r) => esc(r[1])]], rows)}
    <details><summary>KV links (${num(pd.links.length)})</summary>${links}</details></section>`;
}

// A cache replay's answer: the lines `fleet simulate --fidelity cache-replay` prints.
function renderCacheReplay(r, body) {
  const served = r.requests_per_replica;
  const hit = r.prefix_cache_hit_rate === null ? "–" : num(100 * r.prefix_cache_hit_rate, 1) + "%";
  const cell = (d, k) => (d[k] === null || d[k] === undefined ? "–" : num(1e3 * d[k], 1));
  const rows = [["TTFT", r.ttft_s], ["TPOT", r.tpot_s], ["E2E", r.e2e_s]];
  document.getElementById("result").innerHTML = `
    <p class="answer" id="answer">cache replay: ${num(r.requests)} requests on ${num(r.replicas)} replicas (${esc(r.router)} router) over
      ${num(r.horizon_s, 1)} s; prefix cache hit rate <strong id="prefix-hit-rate">${hit}</strong> of ${num(r.prefix_cache_query_tokens)} prompt tokens</p>
    <p class="muted">Replayed ${esc(body.workload.arrival.path)} at the cache-replay fidelity; ${num(r.throughput_req_s, 2)} req/s;
      requests per replica: min ${num(Math.min(...served))}, max ${num(Math.max(...served))}.</p>
    <section id="cache-replay"><h2>Latency (ms)</h2>
    ${table([["", (x) => x[0]], ...["p50", "p90", "p99", "mean", "max"].map((k) => [k, (x) => cell(x[1], k)])], rows)}</section>${notes(r.notes)}`;
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
      r.replicas)}${r.pd ? pdSection(r.pd) : ""}${notes(r.notes)}`;
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
  const result = await runJob("/fleet/simulate", body, progressEl, labelEl, cancelBtn);
  if (body.fidelity === "cache-replay") renderCacheReplay(result, body); else render(result, body);
  labelEl.textContent = "";
});
Promise.all([fillCatalogs(document.getElementById("model"), document.getElementById("gpu")), fillTraces(document.getElementById("trace"))])
  .then(() => {
    document.getElementById("model").value = "meta-llama/Llama-3.1-8B";
    document.getElementById("gpu").value = "H100-SXM";
    ui.startOrWait();  // the default answer before the first submit, or a link's form waiting for Run
  })
  .catch((e) => showError(ui.errorEl, e.message));
