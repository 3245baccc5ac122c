"use strict";
const form = document.getElementById("form");
deploymentFields(document.getElementById("deployment"));
const SPEC = { ...DEPLOYMENT_SPEC, prompt_tokens: "int", output_tokens: "int", turns: "int", think_time_s: "float",
  ttft_slo_ms: "float", tpot_slo_ms: "float", price_per_hour: "float", peak_users: "int" };

function render(p) {
  const el = document.getElementById("result");
  const slo = p.slo.source === "none" ? "no SLO" :
    `SLO (${p.slo.statistic}): ${sloText(p.slo)}${p.slo.source === "default" ? " — the default interactive SLO" : ""}`;
  const replicas = p.replicas ? `; <strong>${num(p.replicas)}</strong> replicas for ${num(p.peak_users)} users` : "";
  el.innerHTML = `
    <p class="answer" id="answer"><strong id="users-served">${num(Math.floor(ivPoint(p.interval && p.interval.users_served, p.users_served)))}</strong>${ivText(p.interval && p.interval.users_served, (x) => num(x), "users-interval")} users on
      ${num(p.num_gpus)}× ${esc(p.gpu)} with ${esc(p.model)}, at <strong>${ms(ivPoint(p.interval && p.interval.tpot_s, p.tpot_s))}</strong> ms${ivText(p.interval && p.interval.tpot_s, (x) => ms(x), "tpot-interval")} per output token
      and ${ms(p.ttft_s)} ms to the first token; <strong>${usd(p.usd_per_user_month)}</strong> per user-month${replicas}.</p>
    <p class="muted">${esc(slo)}. Batch ${num(p.batch_size)} (limited by ${esc(p.batch_limited_by)}), bottleneck: ${esc(p.bottleneck)}.
      <span id="busy">${p.busy_fraction ? `Users keep the batch ${num(100 * p.busy_fraction)}% busy on average (the 99th percentile of requests in flight fits it), not 100%.` : ""}</span></p>
    ${cards([
      ["KV cache tokens", num(p.kv_cache_tokens)],
      [`Max concurrency at ${num(p.max_model_len)} tokens`, num(p.max_concurrency, 2) + "×"],
      ["GPU KV blocks", num(p.num_gpu_blocks)],
      ["KV bytes / token / GPU", num(p.kv_bytes_per_token_per_gpu)],
      ["Output tokens/s (total)", num(p.output_tokens_per_s_total)],
      ["$ per million tokens", usd(p.usd_per_million_tokens, 3)],
    ])}
    <h2>Memory per GPU</h2><div id="memory" class="plot"></div>
    <h2>Latency and cost</h2>
    ${table([["", (r) => esc(r[0])], ["value", (r) => r[1]]], [
      ["TTFT, lone request (ms)", ms(p.single_request_ttft_s)], ["TPOT, lone request (ms)", ms(p.single_request_tpot_s)],
      ["TTFT at the planned batch (ms)", ms(p.ttft_s)], ["TPOT at the planned batch (ms)", ms(p.tpot_s)],
      ["tokens/s per user", num(p.output_tokens_per_s_per_user, 1)], ["$/hour", usd(p.usd_per_hour)],
      ["$/user-month", usd(p.usd_per_user_month)],
    ])}
    <h2>Levers</h2>
    ${table([
      ["lever", (l) => esc(l.name)], ["change", (l) => `<code>${esc(l.change)}</code>`],
      ["users", (l) => num(l.users_served)], ["max concurrency", (l) => num(l.max_concurrency, 2)],
      ["TPOT ms", (l) => ms(l.tpot_s)], ["TTFT ms", (l) => ms(l.ttft_s)], ["$/user-month", (l) => usd(l.usd_per_user_month)],
      ["note", (l) => esc(l.note || "")],
    ], p.levers)}
    <h2>Notes</h2>${notes([...(p.notes || []), ...(p.warnings || [])])}`;
  const total = p.total_gpu_memory_bytes, requested = p.requested_memory_bytes;
  const parts = [["weights", p.weights_bytes_per_gpu], ["activations (est.)", p.activation_bytes_per_gpu],
    ["runtime (non-torch)", p.non_torch_bytes_per_gpu], ["KV cache", p.kv_budget_bytes_per_gpu],
    ["kept free (1 − utilization)", total - requested]];
  Plotly.newPlot("memory", parts.map(([name, bytes]) => ({
    type: "bar", orientation: "h", name, x: [bytes / 1e9], y: ["GPU memory"], hovertemplate: `${name}: %{x:.2f} GB<extra></extra>`,
  })), { ...PLOT_LAYOUT, barmode: "stack", height: 230, margin: { l: 20, r: 20, t: 10, b: 50 }, legend: { orientation: "h", y: 1.35, traceorder: "normal" }, xaxis: { title: { text: "GB per GPU (of " + gb(total) + " GB)" } }, yaxis: { showticklabels: false } }, PLOT_CONFIG);
}

const ui = page("plan", form, async (state) => render(await api("/plan", bodyFrom(state, SPEC))));
// the default answer shows before the first submit (a plan is closed form: instant)
Promise.all([deploymentReady(form, ui.errorEl), fillDefaults(form, "PlanBody")])
  .then(() => { ui.restore(); ui.go(); }).catch((e) => showError(ui.errorEl, e.message));
