"use strict";
const form = document.getElementById("form");
traceFields(document.getElementById("trace-box"));
const progressEl = document.getElementById("progress"), labelEl = document.getElementById("progress-label");
const cancelBtn = document.getElementById("cancel");

// The form as a plan file (the same keys as `servecap fleet plan --plan`).
function planFrom(s) {
  const n = (k) => (s[k] === undefined ? undefined : Number(s[k]));
  const list = (k) => (s[k] ? s[k].split(",").filter(Boolean) : []);
  // every candidate takes the deployment fields (TP, weights dtype, context) as `-g` takes --tp/-w/-l
  const candidates = list("gpus").map((gpu) => {
    const c = { gpu };
    if (s.max_model_len) c.max_model_len = n("max_model_len");
    if (s.tp && n("tp") > 1) c.tp = n("tp");
    if (s.weights_dtype) c.weights_dtype = s.weights_dtype;
    return c;
  });
  const arrival = s.shape === "diurnal"
    ? { kind: "schedule", rate: { kind: "diurnal", peak_per_s: 1.0, trough_per_s: 0.25, peak_at_s: 50400 } }
    : { kind: "poisson", rate_per_s: 1 };
  const workload = { arrival, prompt_tokens: n("prompt_tokens"), output_tokens: n("output_tokens"), duration_s: s.shape === "diurnal" ? 86400 : 600 };
  const trace = traceFrom(s);  // a replayed trace sets its own rate and lengths: no peak, no shape
  const traffic = { workload: trace ? { arrival: trace } : workload, request_interval_s: n("request_interval_s") };
  if (!trace) { if (s.peak_users) traffic.peak_users = n("peak_users"); else traffic.peak_rps = n("peak_rps"); }
  const slo = {};
  if (s.ttft_ms) slo.ttft_s = { p99: n("ttft_ms") / 1e3 };
  if (s.tpot_ms) slo.tpot_s = { p99: n("tpot_ms") / 1e3 };
  return { model: s.model, candidates, traffic, slo: Object.keys(slo).length ? slo : undefined, router: s.router, levers: list("levers"), seed: n("seed") || 0 };
}

const pct = (x) => (x === null || x === undefined ? "–" : num(100 * x, 1) + "%");
const evalRow = (label, e) => e ? [label, `${num(e.replicas)} × ${esc(e.candidate)}`, usd(e.usd_per_month, 0), ms(e.ttft_p99_s), ms(e.tpot_p99_s), pct(e.attainment), e.slo_met ? "yes" : "no"] : null;

// a file the browser downloads as is: the fleet file `fleet plan --out` writes, as JSON (export and
// fleet simulate read .json fleet files as they read YAML ones)
const jsonHref = (obj) => "data:application/json;charset=utf-8," + encodeURIComponent(JSON.stringify(obj || {}, null, 2) + "\n");

function render(r) {
  const c = r.chosen, f = r.fleet;
  const el = document.getElementById("result");
  const evals = [evalRow("chosen", f), evalRow("one replica fewer", r.next_cheaper), evalRow("second seed", r.verify)].filter(Boolean);
  const a = r.autoscaler;
  el.innerHTML = `
    <p class="answer" id="answer"><strong id="chosen-replicas">${num(c.replicas)}</strong> × <strong id="chosen-gpu">${esc(c.name)}</strong>${ivText(r.interval && r.interval.replicas, (x) => num(x), "replicas-interval")}
      (${num(c.gpus_per_replica)} GPU${c.gpus_per_replica > 1 ? "s" : ""} per replica, ${esc(c.gpu)}) serve ${num(r.peak_rps, 1)} req/s at the peak
      for <strong id="chosen-usd">${usd(f.usd_per_month, 0)}</strong>/month${ivText(r.interval && r.interval.usd_per_month, (x) => usd(x, 0), "usd-interval")}; SLO attainment ${pct(f.attainment)};
      prefix-cache hit rate <span id="prefix-hit-rate">${pct(f.prefix_cache_hit_rate)}</span>${r.peak_workload.arrival && r.peak_workload.arrival.kind === "trace" ? ` (replayed ${esc(r.peak_workload.arrival.path)})` : ""}.</p>
    <p class="muted">SLOs: ${esc(r.slo.join(", "))}. Router ${esc(r.router)}. <span id="simulations">${num(r.simulations)}</span> simulations.</p>
    <p id="downloads">Deploy it: <a id="fleet-file" download="fleet.json" href="${jsonHref(r.fleet_file)}">the fleet file</a>
      (<code>servecap export keda|kserve|ray-serve|production-stack|litellm fleet.json</code>) and
      <a id="peak-file" download="fleet.peak.json" href="${jsonHref(r.peak_workload)}">its peak window</a>
      (<code>servecap fleet simulate --fleet fleet.json --workload fleet.peak.json --seed ${esc(String(r.fleet.seed || 0))}</code> re-runs the evidence).</p>
    <h2>Evidence</h2>
    ${table([["fleet", (x) => x[0]], ["replicas", (x) => x[1]], ["$/month", (x) => x[2]], ["p99 TTFT (ms)", (x) => x[3]], ["p99 TPOT (ms)", (x) => x[4]], ["attainment", (x) => x[5]], ["SLO met", (x) => x[6]]], evals)}
    <div id="candidates-plot" class="plot"></div>
    <h2>Candidates</h2>
    ${table([["pool", (x) => esc(x.name)], ["replicas", (x) => (x.replicas === null ? "–" : num(x.replicas))], ["$/month", (x) => usd(x.usd_per_month, 0)],
      ["req/s per replica", (x) => num(x.req_s_per_replica, 2)], ["closed form", (x) => num(x.closed_form_req_s_per_replica, 2)], ["simulations", (x) => num(x.simulations)]], r.candidates)}
    ${notes(r.candidates.filter((x) => x.note).map((x) => `${x.name}: ${x.note}`))}
    ${a ? `<h2>Autoscaler for the daily curve</h2><p id="autoscaler">${esc(a.preset)} on ${esc(a.signal)}, target ${num(a.target, 2)}, every ${num(a.interval_s)} s,
      ${num(a.min_replicas)} to ${num(a.max_replicas)} replicas; scale ahead at ${num(a.scale_ahead_req_s_per_replica, 2)} req/s per replica,
      ${num(a.scale_ahead_lead_s)} s early; ${usd(a.usd_per_month, 0)}/month over the day. Steepest ramp
      (${num(a.ramp_rate_from_req_s, 1)} → ${num(a.ramp_rate_to_req_s, 1)} req/s): p99 TTFT ${ms(a.ramp.ttft_p99_s)} ms, SLO ${a.ramp.slo_met ? "met" : "missed"}.</p>` : ""}
    <h2>Levers</h2>
    ${r.levers.length ? table([["lever", (x) => esc(x.name)], ["change", (x) => esc(x.change)], ["replicas", (x) => num(x.replicas) + ivText(x.interval && x.interval.replicas, (v) => num(v), `lever-${x.name}-interval`)], ["$/month", (x) => usd(x.usd_per_month, 0) + ivText(x.interval && x.interval.usd_per_month, (v) => usd(v, 0))],
      ["p99 TTFT (ms)", (x) => ms(x.ttft_p99_s)], ["SLO met", (x) => (x.slo_met ? "yes" : "no")], ["note", (x) => esc(x.note)]], r.levers) : '<p class="muted">No levers asked for.</p>'}
    ${r.levers_skipped.length ? `<p class="muted">Left out: ${esc(r.levers_skipped.join("; "))}</p>` : ""}
    ${notes([...r.story, ...r.notes])}`;
  const priced = r.candidates.filter((x) => x.usd_per_month !== null);
  Plotly.newPlot("candidates-plot", [{ type: "bar", x: priced.map((x) => x.name), y: priced.map((x) => x.usd_per_month), name: "$/month",
    marker: { color: priced.map((x) => (x.name === c.name ? "#1d4ed8" : "#94a3b8")) } }],
    { ...PLOT_LAYOUT, height: 300, title: { text: "$/month per candidate" }, yaxis: { title: { text: "$/month" }, rangemode: "tozero" } }, PLOT_CONFIG);
}

const ui = page("fleet-plan", form, async (state) => {
  render(await runJob("/fleet/plan", { plan: planFrom(state) }, progressEl, labelEl, cancelBtn));
  labelEl.textContent = "";
});

// The lever list and its default selection from the planner's table (GET /fleet/plan/levers).
function fillLevers(lists) {
  const sel = document.getElementById("levers");
  for (const name of lists.levers) {
    const on = lists.default_levers.includes(name);
    sel.add(new Option(name, name, on, on));
  }
}

Promise.all([fillCatalogs(document.getElementById("model"), document.getElementById("gpus")), api("/fleet/plan/levers"), fillTraces(document.getElementById("trace"))])
  .then(([, levers]) => {
    fillLevers(levers);
    document.getElementById("model").value = "meta-llama/Llama-3.1-8B";
    for (const o of document.getElementById("gpus").options) o.selected = ["H100-SXM", "L40S"].includes(o.value);
    const params = new URLSearchParams(location.search);
    if ([...params.keys()].length && !params.has("levers")) for (const o of document.getElementById("levers").options) o.selected = false;
    ui.startOrWait();  // the default answer before the first submit, or a link's form waiting for Run
  })
  .catch((e) => showError(ui.errorEl, e.message));
