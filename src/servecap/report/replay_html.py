"""The shadow autoscaler's page (``monitor replay --html``): the recorded traffic, the replicas
that ran and those the autoscaler would have run (ready and starting), minute by minute, with
the minutes above the engine model's SLO rate marked. plotly.js embedded once (works offline).
Takes the replay's JSON object (``ReplayResponse.model_dump()``), so this layer needs no app."""

from __future__ import annotations

import html as _html
from collections.abc import Mapping
from typing import Any


def replay_html(r: Mapping[str, Any]) -> str:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    minutes = list(r["minutes"])
    x = [m["minute"] for m in minutes]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=("Replicas: what ran and the shadow autoscaler", "Traffic and SLO risk"),
    )
    if any(m["actual_replicas"] is not None for m in minutes):
        fig.add_trace(
            go.Scatter(x=x, y=[m["actual_replicas"] for m in minutes], name="ran", line={"shape": "hv"}), row=1, col=1
        )
    fig.add_trace(
        go.Scatter(x=x, y=[m["shadow_ready"] for m in minutes], name="shadow: ready", line={"shape": "hv"}),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[m["shadow_ready"] + m["shadow_starting"] for m in minutes],
            name="shadow: ready + starting",
            line={"shape": "hv", "dash": "dot"},
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=x, y=[m["rate_req_s"] for m in minutes], name="recorded req/s", line={"shape": "hv"}),
        row=2,
        col=1,
    )
    risky = [m for m in minutes if m["shadow_at_risk"]]
    if risky:
        fig.add_trace(
            go.Scatter(
                x=[m["minute"] for m in risky],
                y=[m["rate_req_s"] for m in risky],
                mode="markers",
                name="shadow above the SLO rate",
                marker={"color": "red", "size": 9, "symbol": "x"},
            ),
            row=2,
            col=1,
        )
    fig.update_yaxes(title_text="replicas", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="requests/s", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text="minute of the history", row=2, col=1)
    fig.update_layout(height=640, margin={"t": 60, "b": 50})
    rows = "".join(
        f"<tr><td>{m['minute']}</td><td>{m['rate_req_s']:.2f}</td>"
        f"<td>{'-' if m['actual_replicas'] is None else format(m['actual_replicas'], '.1f')}</td>"
        f"<td>{m['shadow_ready']:.1f}</td><td>{m['shadow_starting']:.1f}</td>"
        f"<td>{'cold start' if m['cold_start_gap'] else ('over' if m['shadow_at_risk'] else '')}</td></tr>"
        for m in minutes
    )
    title = f"servecap monitor replay: pool {r['pool']} of {r['fleet_file']}"
    answer = (
        f"{len(r['scale_events'])} scale events; shadow {r['shadow_gpu_hours']:,.2f} GPU-hours "
        f"(${r['shadow_cost_usd']:,.2f})"
        + (
            f" vs {r['actual_gpu_hours']:,.2f} GPU-hours (${r['actual_cost_usd']:,.2f}) that ran"
            if r["actual_gpu_hours"] is not None
            else ""
        )
        + f"; SLO break rate {r['break_rate_req_s']:.2f} req/s per replica"
    )
    return "\n".join(
        [
            "<!DOCTYPE html><html><head><meta charset='utf-8'>",
            f"<title>{_html.escape(title)}</title>",
            "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
            ".answer{font-size:1.3em;font-weight:bold}</style></head><body>",
            f"<h1>{_html.escape(title)}</h1>",
            f"<p class='answer'>{_html.escape(answer)}</p>",
            f"<p>history: {_html.escape(str(r['history']))}</p>",
            fig.to_html(full_html=False, include_plotlyjs=True),
            "<h2>Minute by minute</h2><table><tr><th>minute</th><th>req/s</th><th>ran</th>"
            "<th>shadow ready</th><th>starting</th><th>risk</th></tr>" + rows + "</table>",
            "<h2>Notes</h2><ul>" + "".join(f"<li>{_html.escape(n)}</li>" for n in r["notes"]) + "</ul>",
            "</body></html>",
        ]
    )
