"""One HTML page with interactive plots: latency vs load, KV utilization and queue depth over
time, and latency distributions. plotly.js is embedded once, inline (no CDN): the file works
offline. Takes results-layer values only (a summary, per-request columns, a load table)."""

from __future__ import annotations

import html as _html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from servecap.results import RecordColumns, RunSummary, Slo, summary_to_json_dict

_LATENCY_SERIES = (  # key, name, dash, marker: distinct in colour, line style and marker
    ("ttft_p50_s", "TTFT p50", "dot", "circle"),
    ("ttft_p99_s", "TTFT p99", "solid", "circle"),
    ("tpot_p50_s", "TPOT p50", "dot", "square"),
    ("tpot_p99_s", "TPOT p99", "solid", "square"),
    ("e2e_p99_s", "E2E p99", "dash", "diamond"),
)


def _ms(values: Sequence[Any]) -> list[float | None]:
    return [None if v is None else float(v) * 1e3 for v in values]


def html_report(
    title: str,
    *,
    summary: RunSummary | None = None,
    columns: RecordColumns | None = None,
    load_table: Sequence[Mapping[str, Any]] | None = None,
    load_unit: str = "req/s",
    notes: Sequence[str] = (),
    context: Mapping[str, str] | None = None,
    slo: Slo | None = None,
    capacity: float | None = None,
) -> str:
    """The page as a string (the caller writes it). ``context`` (deployment, workload, the answer)
    heads the page; ``slo`` is drawn as lines on the latency plots; ``capacity`` (the largest
    load within the SLOs) as a vertical line on the load plots."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from servecap.report.log_ticks import log_ticks

    figs: list[tuple[str, Any]] = []
    if load_table:
        loads = [row["load"] for row in load_table]
        fig = make_subplots(rows=1, cols=2, subplot_titles=("latency vs load", "queue depth and batch vs load"))
        for key, name, dash, marker in _LATENCY_SERIES:
            fig.add_trace(
                go.Scatter(
                    x=loads,
                    y=_ms([row.get(key) for row in load_table]),
                    mode="lines+markers",
                    name=name,
                    line={"dash": dash},
                    marker={"symbol": marker, "size": 8},
                ),
                row=1,
                col=1,
            )
        for key, name, dash in (
            ("mean_queue_depth", "mean queue depth", "solid"),
            ("mean_batch_size", "mean batch", "dash"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=loads,
                    y=[row.get(key) for row in load_table],
                    mode="lines+markers",
                    name=name,
                    line={"dash": dash},
                ),
                row=1,
                col=2,
            )
        _slo_lines(fig, slo, row=1, col=1, log=True)
        if capacity is not None and capacity > 0:
            for col in (1, 2):
                fig.add_vline(x=capacity, line={"color": "green", "dash": "dash"}, row=1, col=col)
            fig.add_annotation(  # one label, on the latency plot (an empty one reads "new text")
                x=capacity,
                xref="x",
                y=1,
                yref="y domain",
                text=f"capacity {capacity:,.4g} {load_unit}",
                showarrow=False,
                xanchor="left",
                yanchor="top",
                font={"color": "green"},
            )
        fig.update_xaxes(title_text=f"offered load ({load_unit})")
        shown_ms = [v for key, *_ in _LATENCY_SERIES for v in _ms([row.get(key) for row in load_table])]
        shown_ms += [x * 1e3 for x in (slo.ttft_s, slo.tpot_s) if x is not None] if slo is not None else []
        fig.update_yaxes(
            title_text="latency (ms, log scale)", type="log", row=1, col=1, **log_ticks(shown_ms)
        )  # 1-2-5 per decade, as the web pages (report/log_ticks.py): plotly's minor labels overlap
        fig.update_yaxes(title_text="requests", row=1, col=2)
        figs.append(("Latency vs load", fig))
    if summary is not None and summary.timeseries is not None and summary.timeseries.time_s:
        ts = summary.timeseries
        fig = make_subplots(specs=[[{"secondary_y": True}]])
        fig.add_trace(
            go.Scatter(
                x=list(ts.time_s),
                y=[100.0 * u for u in ts.kv_utilization],
                name="KV cache used (%)",
                line={"dash": "solid"},
            ),
            secondary_y=False,
        )
        fig.add_trace(
            go.Scatter(x=list(ts.time_s), y=list(ts.queue_depth), name="waiting requests", line={"dash": "dot"}),
            secondary_y=True,
        )
        fig.add_trace(
            go.Scatter(x=list(ts.time_s), y=list(ts.running), name="running requests", line={"dash": "dash"}),
            secondary_y=True,
        )
        fig.update_xaxes(title_text="simulated time (s)")
        fig.update_yaxes(title_text="KV cache used (%)", secondary_y=False)
        fig.update_yaxes(title_text="requests (waiting, running)", secondary_y=True)
        figs.append(("KV utilization and queue depth over time", fig))
    if columns is not None and len(columns):
        ok = np.array([e is None for e in columns.errors]) & ~np.isnan(columns.end_s)
        ttft = (columns.first_token_s - columns.arrival_s)[ok] * 1e3
        e2e = (columns.end_s - columns.arrival_s)[ok] * 1e3
        out = columns.output_tokens[ok]
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = ((columns.end_s - columns.first_token_s)[ok] / np.maximum(out - 1, 1))[out >= 2] * 1e3
        fig = make_subplots(rows=1, cols=3, subplot_titles=("TTFT (ms)", "TPOT (ms)", "E2E (ms)"))
        for i, (values, name) in enumerate(((ttft, "TTFT"), (tpot, "TPOT"), (e2e, "E2E")), start=1):
            fig.add_trace(go.Histogram(x=values.tolist(), name=name, nbinsx=60), row=1, col=i)
            fig.update_xaxes(title_text=f"{name} (ms)", row=1, col=i)
            limit = {"TTFT": slo.ttft_s, "TPOT": slo.tpot_s}.get(name) if slo is not None else None
            if limit is not None:
                fig.add_vline(
                    x=limit * 1e3,
                    line={"color": "red", "dash": "dash"},
                    row=1,
                    col=i,
                    annotation_text=f"SLO {limit * 1e3:,.0f} ms",
                )
        fig.update_yaxes(title_text="requests", row=1, col=1)
        fig.update_layout(showlegend=False)
        figs.append(("Latency distributions", fig))

    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{_html.escape(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        "th:first-child,td:first-child{text-align:left}.answer{font-size:1.3em;font-weight:bold}</style>"
        "</head><body>",
        f"<h1>{_html.escape(title)}</h1>",
    ]
    if context:
        if "answer" in context:
            parts.append(f"<p class='answer'>{_html.escape(context['answer'])}</p>")
        parts.append(
            "<table>"
            + "".join(
                f"<tr><th>{_html.escape(k)}</th><td style='text-align:left'>{_html.escape(v)}</td></tr>"
                for k, v in context.items()
                if k != "answer"
            )
            + "</table>"
        )
    if slo is not None and (slo.ttft_s is not None or slo.tpot_s is not None):
        parts.append(f"<p>SLOs (p99): {_html.escape(_slo_text(slo))}</p>")
    if summary is not None:
        parts.append(_summary_table(summary))
    if load_table:
        parts.append(_load_table(load_table, load_unit))
    first = True
    for heading, fig in figs:
        fig.update_layout(height=460, margin={"t": 60, "b": 50})
        parts.append(f"<h2>{_html.escape(heading)}</h2>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=bool(first)))
        first = False
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_html.escape(n)}</li>" for n in notes) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _slo_text(slo: Slo) -> str:
    parts = []
    if slo.ttft_s is not None:
        parts.append(f"TTFT <= {slo.ttft_s * 1e3:,.0f} ms")
    if slo.tpot_s is not None:
        parts.append(f"TPOT <= {slo.tpot_s * 1e3:,.0f} ms")
    return ", ".join(parts)


def _slo_lines(fig: Any, slo: Slo | None, *, row: int, col: int, log: bool = False) -> None:
    """The SLOs as horizontal lines on a latency-in-ms plot, each labelled at its right end.

    The labels are annotations of their own: ``add_hline``'s annotation takes the line's value as
    its position, which a log axis reads as an exponent (a 1,000 ms line put its label at
    10^1000 and the axis ran to 10^48); on a log axis an annotation's ``y`` is ``log10(value)``."""
    if slo is None:
        return
    sub = fig.get_subplot(row, col)
    suffix = sub.xaxis.plotly_name[5:] if sub is not None else ""  # "xaxis2" -> "2"
    for name, limit, dash in (("TTFT", slo.ttft_s, "dash"), ("TPOT", slo.tpot_s, "dot")):
        if limit is not None:
            value = limit * 1e3
            fig.add_hline(y=value, line={"color": "red", "dash": dash}, row=row, col=col)
            fig.add_annotation(
                x=1,
                xref=f"x{suffix} domain",
                y=math.log10(value) if log else value,
                yref=f"y{suffix}",
                text=f"{name} SLO {value:,.0f} ms",
                showarrow=False,
                xanchor="right",
                yanchor="bottom" if name == "TTFT" else "top",
                font={"color": "red"},
            )


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return _html.escape(str(x))


def _summary_table(summary: RunSummary) -> str:
    d = summary_to_json_dict(summary)
    rows = [
        "<h2>Summary</h2><table><tr><th>latency (ms)</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th>"
        "<th>mean</th></tr>"
    ]
    for key, label in (
        ("ttft_s", "TTFT"),
        ("tpot_s", "TPOT"),
        ("itl_s", "ITL"),
        ("e2e_s", "E2E"),
        ("queue_time_s", "queue wait"),
    ):
        v = d[key]
        rows.append(
            f"<tr><td>{label}</td>"
            + "".join(
                f"<td>{_fmt(None if v[q] is None else v[q] * 1e3)}</td>" for q in ("p50", "p90", "p95", "p99", "mean")
            )
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
    tiers = d.get("kv_tiers")
    if isinstance(tiers, dict):  # per-tier hits (sim/kv_tiers.py)
        rows.append('<table class="kv-tiers"><tr><th>KV tier</th><th>hit tokens</th><th>of prompt tokens</th></tr>')
        for name, hit in tiers.items():
            if isinstance(hit, dict):
                frac = hit.get("fraction")
                rows.append(
                    f"<tr><td>{_fmt(name)}</td><td>{_fmt(hit.get('tokens'))}</td>"
                    f"<td>{'-' if frac is None else f'{frac:.1%}'}</td></tr>"
                )
        rows.append("</table>")
    return "".join(rows)


_LOAD_COLUMNS = (
    ("ttft_p50_s", "TTFT p50 (ms)"),
    ("ttft_p99_s", "TTFT p99 (ms)"),
    ("tpot_p50_s", "TPOT p50 (ms)"),
    ("tpot_p99_s", "TPOT p99 (ms)"),
    ("e2e_p99_s", "E2E p99 (ms)"),
    ("mean_queue_depth", "mean queue depth"),
    ("mean_batch_size", "mean batch"),
    ("meets_slo", "meets the SLOs"),
)


def _load_table(table: Sequence[Mapping[str, Any]], unit: str) -> str:
    head = f"<th>offered load ({_html.escape(unit)})</th>" + "".join(
        f"<th>{_html.escape(label)}</th>" for _, label in _LOAD_COLUMNS
    )

    def cell(key: str, value: Any) -> str:
        if key.endswith("_s") and value is not None:
            return f"{float(value) * 1e3:,.1f}"
        return _fmt(value)

    body = "".join(
        f"<tr><td>{_fmt(row.get('load'))}</td>"
        + "".join(f"<td>{cell(k, row.get(k))}</td>" for k, _ in _LOAD_COLUMNS)
        + "</tr>"
        for row in table
    )
    return f"<h2>Load vs latency</h2><table><tr>{head}</tr>{body}</table>"
