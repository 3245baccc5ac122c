"use strict";
const form = document.getElementById("form");
deploymentFields(document.getElementById("deployment"));
traceFields(document.getElementById("trace-box"));
const SPEC = { ...DEPLOYMENT_SPEC, rate: "float", users: "int", think_time_s: "float", prompt_tokens: "int", output_tokens: "int",
  num_requests: "int", ttft_slo_ms: "float", tpot_slo_ms: "float", seed: "int" };
const progressEl = document.getElementById("progress"), labelEl = document.getElementById("progress-label");
const cancelBtn = document.getElementById("cancel");

function pct(dist) { return dist ? [ms(dist.p50), ms(dist.p90), ms(dist.p99), ms(dist.mean)] : ["–", "–", "–", "–"]; }

function sloLines(slo, axis) {
  const shapes = [];
  for (const [name, value] of [["TTFT", slo && slo.ttft_s], ["TPOT", slo && slo.tpot_s]]) {
    if (value) shapes.push(sloShape(name, value * 1e3, axis(name), name === "TTFT" ? "#b42318" : "#6941c6", "dash", name === "TTFT" ? "start" : "end"));
  }
  return shapes;
}

function renderSimulation(r, body) {
  const el = document.getElementById("result");
  const check = r.load_check;
  el.innerHTML = `
    ${check && check.message ? `<div class="error" id="overload">${esc(check.message)}</div>` : ""}
    <p class="answer" id="answer">${num(r.completed)} of ${num(r.num_requests)} requests completed:
      p99 TTFT <strong>${ms(r.ttft_s && r.ttft_s.p99)}</strong> ms${ivText(r.interval && r.interval["ttft_s.p99"], (x) => ms(x), "ttft-interval")},
      p99 TPOT <strong>${ms(r.tpot_s && r.tpot_s.p99)}</strong> ms${ivText(r.interval && r.interval["tpot_s.p99"], (x) => ms(x), "tpot-interval")},
      ${num(r.throughput_req_s, 2)} req/s, ${num(r.output_tokens_per_s)} output tokens/s.</p>
    ${r.slo_verdict ? `<p class="${r.slo_verdict.met ? "answer" : "error"}" id="slo-verdict" title="${esc(r.slo_verdict.rule)}">${esc(r.slo_verdict.text)}</p>` : ""}
    <p class="muted">${esc(r.model)} on ${esc(r.gpu)}, seed ${num(r.seed)}. Mean batch ${num(r.mean_batch_size, 1)},
      KV use ${num(100 * r.mean_kv_utilization, 1)}% mean / ${num(100 * r.max_kv_utilization, 1)}% max, preemptions ${num(r.preemptions)},
      prefix-cache hit rate <span id="prefix-hit-rate">${num(100 * (r.prefix_cache_hit_rate || 0), 1)}%</span>${body && body.trace ? ` (replayed ${esc(body.trace.path)})` : ""}.</p>
    ${r.kv_tiers ? `<p class="muted" id="kv-tiers">KV tier hits (of prompt tokens): ${Object.entries(r.kv_tiers)
      .filter(([, v]) => typeof v === "object").map(([k, v]) => `${esc(k)} ${v.fraction === null ? "–" : num(100 * v.fraction, 1) + "%"}`).join(", ")}.</p>` : ""}
    ${table([["latency (ms)", (x) => esc(x[0])], ["p50", (x) => x[1][0]], ["p90", (x) => x[1][1]], ["p99", (x) => x[1][2]], ["mean", (x) => x[1][3]]],
      [["TTFT", pct(r.ttft_s)], ["TPOT", pct(r.tpot_s)], ["ITL", pct(r.itl_s)], ["E2E", pct(r.e2e_s)], ["queue", pct(r.queue_time_s)]])}
    <div id="series" class="plot"></div>${notes(r.notes)}`;
  const ts = r.timeseries;
  if (ts && ts.time_s.length) {
    Plotly.newPlot("series", [
      { x: ts.time_s, y: ts.running, name: "running (batch)", mode: "lines", line: { width: 2 } },
      { x: ts.time_s, y: ts.queue_depth, name: "waiting", mode: "lines", line: { dash: "dot", width: 2 } },
      { x: ts.time_s, y: ts.kv_utilization.map((u) => 100 * u), name: "KV use (%)", mode: "lines", yaxis: "y2", line: { dash: "dash" } },
    ], { ...PLOT_LAYOUT, margin: { ...PLOT_LAYOUT.margin, r: 70 }, title: { text: "Batch, queue and KV cache over the run" }, xaxis: { title: { text: "time (s)" } },
      yaxis: { title: { text: "requests" } }, yaxis2: { title: { text: "KV use (%)" }, overlaying: "y", side: "right", range: [0, 100], tick0: 0, dtick: 20 } }, PLOT_CONFIG);
  }
}

function renderCapacity(r) {
  const el = document.getElementById("result");
  const fmt = (x) => (r.closed_loop ? num(x) : num(x, 2));
  // the API names the answer by its unit: max_users (closed loop) or max_rate_req_s (open loop)
  const maxLoad = r.closed_loop ? r.max_users : r.max_rate_req_s;
  el.innerHTML = `
    <p class="answer" id="answer">Capacity: <strong id="capacity">${fmt(r.closed_loop ? Math.floor(ivPoint(r.interval, maxLoad)) : ivPoint(r.interval, maxLoad))}</strong>${ivText(r.interval, fmt, "capacity-interval")} ${esc(r.unit)} per replica
      within the p${num(r.slo.percentile)} SLO (${sloText(r.slo)})
      ${r.replicas_for_target ? `; ${fmt(r.target)} ${esc(r.unit)} need <strong>${num(r.replicas_for_target)}</strong> replicas` : ""}.</p>
    <p class="muted">${esc(r.why)}</p>
    <div id="curve" class="plot"></div>
    ${table([["assumption", (a) => esc(a.name)], ["plan", (a) => esc(a.plan || "–")], ["closed form", (a) => esc(a.closed_form)],
      ["simulated", (a) => esc(a.simulated)]], r.assumptions)}
    ${table([[r.unit, (x) => fmt(x.load)], ["TTFT p99 ms", (x) => ms(x.ttft_p99_s)], ["TPOT p99 ms", (x) => ms(x.tpot_p99_s)],
      ["E2E p99 ms", (x) => ms(x.e2e_p99_s, 0)], ["batch", (x) => num(x.mean_batch_size, 1)], ["meets SLOs", (x) => (x.meets_slo ? "yes" : "no")]],
      [...r.table].sort((a, b) => a.load - b.load))}${notes(r.notes)}`;
  const rows = [...r.table].sort((a, b) => a.load - b.load);
  Plotly.newPlot("curve", [
    { x: rows.map((x) => x.load), y: rows.map((x) => x.ttft_p99_s * 1e3), name: "TTFT p99", mode: "lines+markers", marker: { symbol: "circle" } },
    { x: rows.map((x) => x.load), y: rows.map((x) => x.tpot_p99_s * 1e3), name: "TPOT p99", mode: "lines+markers", yaxis: "y2",
      marker: { symbol: "square" }, line: { dash: "dot" } },
  ], { ...PLOT_LAYOUT, margin: { ...PLOT_LAYOUT.margin, r: 70 }, title: { text: "Load–latency curve (dashed: the SLOs)" }, xaxis: { title: { text: r.unit } },
    yaxis: { title: { text: "TTFT p99 (ms)" }, type: "log", ...logTicks([...rows.map((x) => x.ttft_p99_s * 1e3), r.slo.ttft_s * 1e3]) },
    yaxis2: { title: { text: "TPOT p99 (ms)" }, overlaying: "y", side: "right", type: "log", ...logTicks([...rows.map((x) => x.tpot_p99_s * 1e3), r.slo.tpot_s * 1e3]) },
    shapes: [...sloLines(r.slo, (n) => (n === "TTFT" ? "y" : "y2")),
      { type: "line", x0: maxLoad, x1: maxLoad, yref: "paper", y0: 0, y1: 1, line: { color: "#1a7f37", width: 2 },
        label: { text: `simulated capacity ${fmt(maxLoad)}`, textposition: "end", textangle: -90, xanchor: "right", font: { color: "#1a7f37", size: 12 } } }] }, PLOT_CONFIG);
}

const ui = page("simulate", form, async (state) => {
  const body = bodyFrom(state, SPEC);
  const trace = traceFrom(state);
  if (trace) { body.trace = trace; delete body.rate; delete body.users; delete body.think_time_s; }
  if (state.mode === "capacity") {
    delete body.num_requests;
    if (body.rate !== undefined) { body.closed_loop = false; body.target = body.rate; delete body.rate; }
    if (body.users !== undefined) { body.target = body.users; delete body.users; }
    renderCapacity(await runJob("/capacity", body, progressEl, labelEl, cancelBtn));
  } else {
    renderSimulation(await runJob("/simulate", body, progressEl, labelEl, cancelBtn), body);
  }
  labelEl.textContent = "";
});
// the default answer shows before the first submit: with nothing in the link, `servecap capacity`
// with no flags (a plain `simulate` needs a load: --rate or --users)
Promise.all([deploymentReady(form, ui.errorEl), fillDefaults(form, "SimulateBody"), fillTraces(document.getElementById("trace"))])
  .then(() => { if (ui.restore()) awaitClick(form); else { form.elements.mode.value = "capacity"; ui.go(); } })
  .catch((e) => showError(ui.errorEl, e.message));
