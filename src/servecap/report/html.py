"""One HTML page with interactive plots: latency vs load, KV utilization and queue depth over
time, and latency distributions. plotly.js is embedded once, inline (no CDN): the file works
offline. Takes results-layer values only (a summary, per-request columns, a load table)."""

from __future__ import annotations

import html as _html
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from servecap.results import RecordColumns, RunSummary, summary_to_json_dict


def html_report(
    title: str,
    *,
    summary: RunSummary | None = None,
    columns: RecordColumns | None = None,
    load_table: Sequence[Mapping[str, Any]] | None = None,
    load_unit: str = "req/s",
    notes: Sequence[str] = (),
) -> str:
    """The page as a string (the caller writes it)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    figs: list[tuple[str, Any]] = []
    if load_table:
        loads = [row["load"] for row in load_table]
        fig = make_subplots(rows=1, cols=2, subplot_titles=("latency vs load", "queue depth and batch vs load"))
        for key, name in (
            ("ttft_p50_s", "TTFT p50"),
            ("ttft_p99_s", "TTFT p99"),
            ("tpot_p50_s", "TPOT p50"),
            ("tpot_p99_s", "TPOT p99"),
            ("e2e_p99_s", "E2E p99"),
        ):
            fig.add_trace(
                go.Scatter(x=loads, y=[row.get(key) for row in load_table], mode="lines+markers", name=name),
                row=1,
                col=1,
            )
        fig.add_trace(
            go.Scatter(
                x=loads,
                y=[row.get("mean_queue_depth") for row in load_table],
                mode="lines+markers",
                name="mean queue depth",
            ),
            row=1,
            col=2,
        )
        fig.add_trace(
            go.Scatter(
                x=loads, y=[row.get("mean_batch_size") for row in load_table], mode="lines+markers", name="mean batch"
            ),
            row=1,
            col=2,
        )
        fig.update_xaxes(title_text=f"load ({load_unit})")
        fig.update_yaxes(title_text="seconds", type="log", row=1, col=1)
        figs.append(("Latency vs load", fig))
    if summary is not None and summary.timeseries is not None and summary.timeseries.time_s:
        ts = summary.timeseries
        fig = make_subplots(specs=[[{"secondary_y": True}]])
        fig.add_trace(
            go.Scatter(x=list(ts.time_s), y=[100.0 * u for u in ts.kv_utilization], name="KV used (%)"),
            secondary_y=False,
        )
        fig.add_trace(go.Scatter(x=list(ts.time_s), y=list(ts.queue_depth), name="waiting requests"), secondary_y=True)
        fig.add_trace(go.Scatter(x=list(ts.time_s), y=list(ts.running), name="running requests"), secondary_y=True)
        fig.update_xaxes(title_text="simulated time (s)")
        fig.update_yaxes(title_text="KV cache used (%)", secondary_y=False)
        fig.update_yaxes(title_text="requests", secondary_y=True)
        figs.append(("KV utilization and queue depth over time", fig))
    if columns is not None and len(columns):
        ok = np.array([e is None for e in columns.errors]) & ~np.isnan(columns.end_s)
        ttft = (columns.first_token_s - columns.arrival_s)[ok]
        e2e = (columns.end_s - columns.arrival_s)[ok]
        out = columns.output_tokens[ok]
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = ((columns.end_s - columns.first_token_s)[ok] / np.maximum(out - 1, 1))[out >= 2]
        fig = make_subplots(rows=1, cols=3, subplot_titles=("TTFT (s)", "TPOT (s)", "E2E (s)"))
        for i, (values, name) in enumerate(((ttft, "TTFT"), (tpot, "TPOT"), (e2e, "E2E")), start=1):
            fig.add_trace(go.Histogram(x=values.tolist(), name=name, nbinsx=60), row=1, col=i)
        fig.update_layout(showlegend=False)
        figs.append(("Latency distributions", fig))

    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{_html.escape(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        "th:first-child,td:first-child{text-align:left}</style></head><body>",
        f"<h1>{_html.escape(title)}</h1>",
    ]
    if summary is not None:
        parts.append(_summary_table(summary))
    if load_table:
        parts.append(_load_table(load_table, load_unit))
    first = True
    for heading, fig in figs:
        fig.update_layout(height=420, margin={"t": 40, "b": 40})
        parts.append(f"<h2>{_html.escape(heading)}</h2>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=bool(first)))
        first = False
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_html.escape(n)}</li>" for n in notes) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return _html.escape(str(x))


def _summary_table(summary: RunSummary) -> str:
    d = summary_to_json_dict(summary)
    rows = [
        "<h2>Summary</h2><table><tr><th>latency (s)</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th>"
        "<th>mean</th></tr>"
    ]
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_time_s"):
        v = d[key]
        rows.append(
            f"<tr><td>{key}</td>"
            + "".join(f"<td>{_fmt(v[q])}</td>" for q in ("p50", "p90", "p95", "p99", "mean"))
            + "</tr>"
        )
    rows.append("</table><table>")
    for key in (
        "num_requests",
        "completed",
        "throughput_req_s",
        "output_tokens_per_s",
        "goodput_req_s",
        "mean_batch_size",
        "max_batch_size",
        "mean_queue_depth",
        "preemptions",
        "rejected",
        "prefix_cache_hit_rate",
    ):
        rows.append(f"<tr><td>{key}</td><td>{_fmt(d.get(key))}</td></tr>")
    rows.append("</table>")
    return "".join(rows)


def _load_table(table: Sequence[Mapping[str, Any]], unit: str) -> str:
    cols = (
        "load",
        "ttft_p50_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p99_s",
        "e2e_p99_s",
        "mean_queue_depth",
        "mean_batch_size",
        "meets_slo",
    )
    head = "".join(f"<th>{_html.escape(c if c != 'load' else f'load ({unit})')}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(row.get(c))}</td>" for c in cols) + "</tr>" for row in table)
    return f"<h2>Load vs latency</h2><table><tr>{head}</tr>{body}</table>"
