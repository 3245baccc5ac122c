"use strict";
const form = document.getElementById("form");
const SPEC = { model: "str", gpus: "list", counts: "intlist", weights_dtypes: "list", kv_dtypes: "list", max_model_len: "int",
  prompt_tokens: "int", output_tokens: "int", ttft_slo_ms: "float", tpot_slo_ms: "float", price_per_hour: "float" };

function label(c) { return `${c.num_gpus}× ${c.gpu} ${c.weights_dtype}/${c.kv_cache_dtype}`; }

function render(r) {
  const ok = r.candidates.filter((c) => !c.problem);
  const priced = ok.filter((c) => c.usd_per_user_month !== null);
  const best = priced[0] || ok[0];
  const el = document.getElementById("result");
  el.innerHTML = `
    <p class="answer" id="answer">${best ? `Cheapest: <strong>${esc(label(best))}</strong> — ${num(best.users_served)} users at
      <strong>${usd(best.usd_per_user_month)}</strong> per user-month` : "No candidate meets the SLO."}</p>
    <p class="muted">${esc(r.model)}; SLO (${esc(r.slo.statistic)}): ${sloText(r.slo)} (${esc(r.slo.source)}); ${num(r.prompt_tokens)} + ${num(r.output_tokens)} tokens per request, ${r.request_interval_s !== null ? `a request every ${num(r.request_interval_s)} s per user (duty cycle from each deployment's time generating)` : `duty cycle ${num(r.duty_cycle, 2)}`}.
      ${r.unpriced_gpus.length ? "Unpriced (ranked after the priced ones): " + esc(r.unpriced_gpus.join(", ")) + "." : ""}</p>
    <div id="chart" class="plot"></div>
    ${table([
      ["#", (c) => num(r.candidates.indexOf(c) + 1)], ["GPU", (c) => esc(c.gpu)], ["GPUs", (c) => num(c.num_gpus)],
      ["weights", (c) => esc(c.weights_dtype)], ["KV", (c) => esc(c.kv_cache_dtype)], ["users", (c) => num(c.users_served)],
      ["TPOT ms", (c) => ms(c.tpot_s)], ["TTFT ms", (c) => ms(c.ttft_s)], ["$/hour", (c) => usd(c.usd_per_hour)],
      ["$/user-month", (c) => usd(c.usd_per_user_month)], ["$/M tokens", (c) => usd(c.usd_per_million_tokens, 3)],
      ["problem", (c) => esc(c.problem || "")],
    ], r.candidates)}`;
  const top = priced.slice(0, 20);
  if (top.length) {
    Plotly.newPlot("chart", [{ type: "bar", orientation: "h", x: top.map((c) => c.usd_per_user_month).reverse(),
      y: top.map(label).reverse(), hovertemplate: "%{y}: $%{x:.3f} per user-month<extra></extra>" }],
      { ...PLOT_LAYOUT, height: Math.max(260, 26 * top.length + 90), margin: { ...PLOT_LAYOUT.margin, l: 230 },
        title: { text: "Cheapest candidates within the SLO" }, xaxis: { title: { text: "USD per user-month" } } }, PLOT_CONFIG);
  }
}

const ui = page("compare", form, async (state) => render(await api("/compare", bodyFrom(state, SPEC))));
fillCatalogs(document.getElementById("model"), null)
  .then(() => fillDefaults(form, "CompareBody"))  // the request's defaults, the default model among them
  .then(() => { ui.restore(); ui.go(); })  // the default answer at once
  .catch((e) => showError(ui.errorEl, e.message));
