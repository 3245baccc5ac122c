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
  const ok = reqs.requests.filter((r) => r.first_token_s !== null && r.first_token_s !== undefined);
  // a request's time axis: its scheduled arrival (seconds from the start of the run)
  Plotly.newPlot("scatter", [{ x: ok.map((r) => r.scheduled_s), y: ok.map((r) => (r.first_token_s - r.scheduled_s) * 1e3), mode: "markers",
    name: "TTFT", marker: { size: 5 } }], { ...PLOT_LAYOUT, title: { text: "Time to first token of each request" },
    xaxis: { title: { text: "arrival (s from the start)" } }, yaxis: { title: { text: "TTFT (ms)" } } }, PLOT_CONFIG);
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
ui.restore();
ui.go();
