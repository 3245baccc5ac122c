"use strict";
const form = document.getElementById("form");
const SPEC = { model: "str", gpus: "list", counts: "intlist", weights_dtypes: "list", kv_dtypes: "list", max_model_len: "int",
  prompt_tokens: "int", output_tokens: "int", ttft_slo_ms: "float", tpot_slo_ms: "float", price_per_hour: "float" };

function label(c) { return `${c.num_gpus}× ${c.gpu} ${c.weights_dtype}/${c.kv_cache_dtype}`; }

// Rows that differ only in dtypes yet plan the same, shown once with every (weights, KV) pair that
// gives them, in rank order: the CLI's table (app/compare.py merged_rows and dtype_columns; the
// browser test holds the two together).
function mergedRows(rows) {
  const out = [], index = new Map();
  const whole = (s) => (s === null || s === undefined ? null : Math.round(s * 1e3));
  for (const c of rows) {
    const key = JSON.stringify([c.gpu, c.num_gpus, c.users_served, whole(c.tpot_s), whole(c.ttft_s), c.usd_per_hour, c.problem]);
    if (index.has(key)) { out[index.get(key)].pairs.push([c.weights_dtype, c.kv_cache_dtype]); continue; }
    index.set(key, out.length);
    out.push({ c, pairs: [[c.weights_dtype, c.kv_cache_dtype]] });
  }
  return out;
}

function dtypeColumns(pairs) {
  const weights = [...new Set(pairs.map((p) => p[0]))], kvs = [...new Set(pairs.map((p) => p[1]))];
  if (new Set(pairs.map((p) => p.join("/"))).size === weights.length * kvs.length) return [weights.join(", "), kvs.join(", ")];
  return [pairs.map((p) => p.join("/")).join(", "), "(weights/KV)"];
}

function render(r) {
  const merged = mergedRows(r.candidates);
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
    <p class="muted" id="distinct">${num(merged.length)} distinct deployments of ${num(r.candidates.length)} planned${merged.some((m) => m.pairs.length > 1) ? "; a row with several dtypes: each plans the same (the batch is not limited by memory there)" : ""}.</p>
    ${table([
      ["#", (m) => num(merged.indexOf(m) + 1)], ["GPU", (m) => esc(m.c.gpu)], ["GPUs", (m) => num(m.c.num_gpus)],
      ["weights", (m) => esc(dtypeColumns(m.pairs)[0])], ["KV", (m) => esc(dtypeColumns(m.pairs)[1])], ["users", (m) => num(m.c.users_served)],
      ["TPOT ms", (m) => ms(m.c.tpot_s)], ["TTFT ms", (m) => ms(m.c.ttft_s)], ["$/hour", (m) => usd(m.c.usd_per_hour)],
      ["$/user-month", (m) => usd(m.c.usd_per_user_month)], ["$/M tokens", (m) => usd(m.c.usd_per_million_tokens, 3)],
      ["problem", (m) => esc(m.c.problem || "")],
    ], merged)}`;
  // the chart's bars are the table's rows: one per distinct deployment, its dtypes listed
  const top = merged.filter((m) => !m.c.problem && m.c.usd_per_user_month !== null).slice(0, 20);
  const barLabel = (m) => { const [w, k] = dtypeColumns(m.pairs); return `${m.c.num_gpus}× ${m.c.gpu} ${k === "(weights/KV)" ? w : w + " / " + k}`; };
  if (top.length) {
    Plotly.newPlot("chart", [{ type: "bar", orientation: "h", x: top.map((m) => m.c.usd_per_user_month).reverse(),
      y: top.map(barLabel).reverse(), hovertemplate: "%{y}: $%{x:.3f} per user-month<extra></extra>" }],
      { ...PLOT_LAYOUT, height: Math.max(260, 26 * top.length + 90), margin: { ...PLOT_LAYOUT.margin, l: 230 },
        title: { text: "Cheapest candidates within the SLO" }, xaxis: { title: { text: "USD per user-month" } } }, PLOT_CONFIG);
  }
}

const ui = page("compare", form, async (state) => render(await api("/compare", bodyFrom(state, SPEC))));
fillCatalogs(document.getElementById("model"), null)
  .then(() => fillDefaults(form, "CompareBody"))  // the request's defaults, the default model among them
  .then(() => { ui.restore(); ui.go(); })  // the default answer at once
  .catch((e) => showError(ui.errorEl, e.message));
