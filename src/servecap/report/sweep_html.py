"""A sweep's HTML summary: one row per point (its settings and figures) and, per point, cost
against p99 TTFT with the SLO line, so the cheapest point that meets the SLO stands out.
plotly.js is inlined once (the file works offline); returns a string."""

from __future__ import annotations

import html as _html
from typing import Any

from servecap.app.fleet_sweep import SweepRun, merge_points

_COLUMNS = (
    ("throughput_req_s", "req/s", 1.0),
    ("ttft_p50_s", "TTFT p50 (ms)", 1e3),
    ("ttft_p99_s", "TTFT p99 (ms)", 1e3),
    ("tpot_p99_s", "TPOT p99 (ms)", 1e3),
    ("slo_attainment", "SLO attainment", 1.0),
    ("goodput_req_s", "goodput (req/s)", 1.0),
    ("cost_usd", "cost ($)", 1.0),
)


def _cell(x: Any, scale: float = 1.0) -> str:
    if x is None or x == "":
        return "-"
    if isinstance(x, float):
        v = x * scale
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return _html.escape(str(x))


def sweep_html(title: str, run: SweepRun) -> str:
    import plotly.graph_objects as go

    from servecap.report.log_ticks import log_ticks

    axes = list(run.points[0].values) if run.points else []
    head = "".join(f"<th>{_html.escape(a)}</th>" for a in ("#", *axes, *(c[1] for c in _COLUMNS), "error"))
    rows = [f"<table><tr>{head}</tr>"]
    xs: list[float] = []
    ys: list[float] = []
    labels: list[str] = []
    ok: list[bool] = []
    slo_ttft: float | None = None
    for p, r in zip(run.points, run.results, strict=True):
        values = "".join(f"<td>{_cell(p.values[a])}</td>" for a in axes)
        figures = "".join(f"<td>{_cell(None if r is None else r.row.get(k), s)}</td>" for k, _, s in _COLUMNS)
        rows.append(f"<tr><td>{p.index}</td>{values}{figures}<td>{_cell(run.errors.get(p.index))}</td></tr>")
        cost, ttft = (None, None) if r is None else (r.row.get("cost_usd"), r.row.get("ttft_p99_s"))
        if r is None or cost is None or ttft is None:
            continue
        xs.append(float(cost))
        ys.append(float(ttft) * 1e3)
        labels.append(f"#{p.index}: " + ", ".join(f"{a}={p.values[a]}" for a in axes))
        att = r.row.get("slo_attainment")
        ok.append(att is None or float(att) >= 0.99)
        if r.summary.slo is not None and r.summary.slo.ttft_s is not None:
            slo_ttft = r.summary.slo.ttft_s
    rows.append("</table>")
    fig = go.Figure(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers",
            text=labels,
            hovertemplate="%{text}<br>cost $%{x:,.2f}<br>p99 TTFT %{y:,.0f} ms<extra></extra>",
            marker={"size": 11, "color": ["#2a9d8f" if k else "#e76f51" for k in ok]},
        )
    )
    if slo_ttft is not None:
        fig.add_hline(y=slo_ttft * 1e3, line_dash="dash", line_color="red", annotation_text="TTFT SLO")
    fig.update_layout(
        height=480,
        margin={"t": 30, "b": 40},
        xaxis_title="cost of the simulated span ($)",
        yaxis_title="p99 TTFT (ms)",
        yaxis_type="log",
    )
    # 1-2-5 per decade, as the web pages (report/log_ticks.py): plotly's minor labels overlap
    fig.update_yaxes(**log_ticks([*ys, *([slo_ttft * 1e3] if slo_ttft is not None else [])]))
    failed = len(run.errors)
    n_seeds = len(run.points[0].all_seeds) if run.points else 1
    seeds = f", each on {n_seeds} seeds merged through their sketches" if n_seeds > 1 else ""
    merged = merge_points(run)
    merged_lines = []
    if merged is not None:
        for name, m in [("all points", merged.summary), *((f"pool {k}", v) for k, v in merged.by_pool.items())]:
            merged_lines.append(
                f"<li>{_html.escape(name)}: {m.num_requests:,} requests, TTFT p50 {_cell(m.ttft_s.p50, 1e3)} ms, "
                f"p99 {_cell(m.ttft_s.p99, 1e3)} ms, TPOT p99 {_cell(m.tpot_s.p99, 1e3)} ms</li>"
            )
    merged_html = (
        f"<h2>Every point merged</h2><p>{merged.points} points' sketches pooled (each percentile within "
        f"{merged.summary.relative_error or 0:.0%} of the exact value):</p><ul>{''.join(merged_lines)}</ul>"
        if merged is not None
        else ""
    )
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{_html.escape(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        "</style></head><body>",
        f"<h1>{_html.escape(title)}</h1>",
        f"<p>{len(run.points)} points on the {_html.escape(run.executor)} executor{seeds}"
        + (f"; {failed} failed (their errors in the table)" if failed else "")
        + ". Green: meets the SLO for at least 99% of requests (or no SLO set).</p>",
        "<h2>Cost against p99 TTFT</h2>",
        fig.to_html(full_html=False, include_plotlyjs=True),
        "<h2>Points</h2>",
        *rows,
        merged_html,
        "</body></html>",
    ]
    return "\n".join(parts)
