"""The fleet's HTML page: the percentile table, outcomes and cost, the time series (arrival
rate, ready and starting replicas, queue depth, rolling p99 TTFT with the SLO line) and the
per-replica table. plotly.js is inlined once (the file works offline); returns a string."""

from __future__ import annotations

import html as _html
from collections.abc import Sequence
from typing import Any

from servecap.fleet.run_result import FleetResult


def _fmt(x: Any, unit: str = "") -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.0f}{unit}" if abs(x) >= 1000 else f"{x:.4g}{unit}"
    return _html.escape(f"{x}{unit}")


def fleet_html(title: str, res: FleetResult, notes: Sequence[str] = ()) -> str:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    ts = res.timeseries
    t = list(ts.time_s)
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=(
            "Arrival rate (requests/s)",
            "Replicas (ready, starting)",
            "Queue depth (requests waiting in engines and at the router)",
            "Rolling p99 TTFT (ms)",
        ),
    )
    fig.add_trace(go.Scatter(x=t, y=list(ts.arrival_rate_req_s), name="arrivals (req/s)"), row=1, col=1)
    fig.add_trace(go.Scatter(x=t, y=list(ts.ready), name="ready replicas", line_shape="hv"), row=2, col=1)
    fig.add_trace(go.Scatter(x=t, y=list(ts.starting), name="starting replicas", line_shape="hv"), row=2, col=1)
    fig.add_trace(go.Scatter(x=t, y=list(ts.queue_depth), name="waiting requests"), row=3, col=1)
    fig.add_trace(go.Scatter(x=t, y=[1e3 * v for v in ts.p99_ttft_s], name="p99 TTFT (ms)"), row=4, col=1)
    slo = res.summary.slo
    if slo is not None and slo.ttft_s is not None:
        fig.add_hline(
            y=slo.ttft_s * 1e3,
            line_dash="dash",
            line_color="red",
            annotation_text=f"TTFT SLO {slo.ttft_s * 1e3:,.0f} ms",
            row=4,
            col=1,
        )
    fig.update_xaxes(title_text="simulated time (s)", row=4, col=1)
    fig.update_yaxes(title_text="req/s", row=1, col=1)
    fig.update_yaxes(title_text="replicas", row=2, col=1)
    fig.update_yaxes(title_text="requests", row=3, col=1)
    fig.update_yaxes(title_text="ms", row=4, col=1)
    fig.update_layout(height=900, margin={"t": 40, "b": 40})
    s = res.summary
    rows = ["<table><tr><th>latency (ms)</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>mean</th></tr>"]
    for key, label in (
        ("ttft_s", "TTFT"),
        ("tpot_s", "TPOT"),
        ("itl_s", "ITL"),
        ("e2e_s", "E2E"),
        ("queue_time_s", "queue"),
    ):
        p = getattr(s, key)
        vals = [getattr(p, q) for q in ("p50", "p90", "p95", "p99", "mean")]
        rows.append(
            f"<tr><td>{label}</td>"
            + "".join(f"<td>{_fmt(None if v is None else v * 1e3)}</td>" for v in vals)
            + "</tr>"
        )
    rows.append("</table>")
    groups = [("tenant", k, v) for k, v in res.by_tenant.items()] + [("class", k, v) for k, v in res.by_class.items()]
    if groups:
        rows.append(
            "<table><tr><th>per tenant / class</th><th>requests</th><th>TTFT p50 (ms)</th><th>TTFT p99 (ms)</th>"
            "<th>TPOT p99 (ms)</th><th>E2E p99 (ms)</th><th>SLO attainment</th></tr>"
        )
        for kind, name, g in groups:
            att = "-" if g.slo_attainment is None else f"{g.slo_attainment:.1%}"
            cells = [g.ttft_s.p50, g.ttft_s.p99, g.tpot_s.p99, g.e2e_s.p99]
            rows.append(
                f"<tr><td>{kind} {_html.escape(name)}</td><td>{g.num_requests:,}</td>"
                + "".join(f"<td>{_fmt(None if v is None else v * 1e3)}</td>" for v in cells)
                + f"<td>{att}</td></tr>"
            )
        rows.append("</table>")
    facts = [
        ("requests", f"{s.num_requests:,}"),
        ("outcomes", ", ".join(f"{k} {v:,}" for k, v in res.outcomes.items())),
        ("throughput", _fmt(s.throughput_req_s, " req/s")),
        ("goodput (within SLOs)", _fmt(s.goodput_req_s, " req/s")),
        ("SLO attainment", "-" if s.slo_attainment is None else f"{s.slo_attainment:.1%}"),
        ("prefix cache hit rate", "-" if s.prefix_cache_hit_rate is None else f"{s.prefix_cache_hit_rate:.1%}"),
        ("GPU-hours", _fmt(res.gpu_hours)),
        ("cost", f"${res.cost_usd:,.2f}"),
        ("$ per million tokens", "-" if res.usd_per_million_tokens is None else f"${res.usd_per_million_tokens:,.3f}"),
        ("simulated time", _fmt(res.horizon_s, " s")),
    ]
    rows.append("<table>" + "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in facts) + "</table>")
    rep = [
        "<table><tr><th>replica</th><th>pool</th><th>state</th><th>requested (s)</th><th>ready (s)</th>"
        "<th>stopped (s)</th><th>routed</th><th>completed</th><th>load (req/s)</th>"
        "<th>busy (a request in flight)</th><th>prefix hit rate</th></tr>"
    ]
    for r in res.replicas:
        hit = "-" if r.prefix_cache_hit_rate is None else f"{r.prefix_cache_hit_rate:.1%}"
        # "busy" is the share of time with any request in flight: 100% at a fraction of the
        # replica's capacity is idle room, so the load it carried comes first
        span = (r.stopped_s if r.stopped_s is not None else res.horizon_s) - (r.ready_s or 0.0)
        load = f"{r.completed / span:,.2f}" if r.ready_s is not None and span > 0 else "-"
        rep.append(
            f"<tr><td>{r.replica_id}</td><td>{_html.escape(r.pool)}</td><td>{r.state}</td><td>{_fmt(r.requested_s)}</td>"
            f"<td>{_fmt(r.ready_s)}</td><td>{_fmt(r.stopped_s)}</td><td>{r.routed:,}</td><td>{r.completed:,}</td>"
            f"<td>{load}</td><td>{r.utilization:.0%}</td><td>{hit}</td></tr>"
        )
    rep.append("</table>")
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{_html.escape(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        "th:first-child,td:first-child{text-align:left}</style></head><body>",
        f"<h1>{_html.escape(title)}</h1>",
        "<h2>Latency, outcomes and cost</h2>",
        *rows,
        "<h2>Over time</h2>",
        fig.to_html(full_html=False, include_plotlyjs=True),
        "<h2>Replicas</h2>",
        *rep,
    ]
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_html.escape(n)}</li>" for n in notes) + "</ul>")
    if res.pd is not None:
        from servecap.fleet.pd.stats import pd_rows

        parts.append("<h2>Disaggregated prefill/decode</h2>")
        parts.append(
            "<table>"
            + "".join(f"<tr><td>{_html.escape(k)}</td><td>{_html.escape(v)}</td></tr>" for k, v in pd_rows(res.pd))
            + "</table>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)
