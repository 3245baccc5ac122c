"use strict";
// Replay a shipped trace sample (GET /traces lists them): the server reads those and only those,
// named sample:<name> (never a path), with the window of the trace's clock and its time scale.

function traceFields(el) {
  el.innerHTML = `<fieldset id="trace-fields"><legend>Replay a trace</legend>
    <label>Trace sample<select name="trace" id="trace"><option value="">none: the load above</option></select></label>
    <label>From <span class="unit">s of the trace</span><input name="trace_start_s" type="number" min="0" step="any" placeholder="0"></label>
    <label>To <span class="unit">s of the trace</span><input name="trace_end_s" type="number" min="0" step="any" placeholder="its end"></label>
    <label>Time scale <span class="unit">2: half the rate</span><input name="time_scale" type="number" min="0" step="any" placeholder="1"></label>
    <p class="muted" id="trace-about">A trace brings its arrivals and lengths: the rate, users and lengths above are not used.</p></fieldset>`;
}

async function fillTraces(select) {
  const rows = await api("/traces");
  for (const t of rows) {
    const what = `${t.name}: ${num(t.requests)} requests over ${num(t.span_s, 0)} s${t.block_hashes ? ", block hashes" : ""}`;
    select.add(new Option(what, t.name));
  }
  const about = document.getElementById("trace-about"), plain = about.textContent;
  const show = () => { const t = rows.find((x) => x.name === select.value); about.textContent = t ? `${t.description}. ${plain}` : plain; };
  select.addEventListener("change", show);
  show();
  return rows;
}

// The TraceArrival of the form (null without a sample); a number the browser cannot read is sent
// as typed, for the server to name it.
function traceFrom(s) {
  if (!s.trace) return null;
  const t = { kind: "trace", path: "sample:" + s.trace };
  for (const [field, key] of [["time_scale", "time_scale"], ["trace_start_s", "start_s"], ["trace_end_s", "end_s"]]) {
    if (s[field] === undefined) continue;
    const x = Number(s[field]);
    t[key] = Number.isNaN(x) ? s[field] : x;
  }
  return t;
}
