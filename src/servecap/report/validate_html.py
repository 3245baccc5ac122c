"""``servecap validate --html``: the summary tables, then every value with its error, as one page."""

from __future__ import annotations

from servecap.app.validate import StatsOut, ValidateResponse


def render_html(resp: ValidateResponse) -> str:
    """A self-contained HTML page: the summary tables, then every value with its error."""
    from html import escape

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:+.1%}"

    def stats_rows(title: str, table: dict[str, StatsOut]) -> str:
        body = "".join(
            f"<tr><td>{escape(k)}</td><td>{s.count}</td><td>{pct(s.mape).lstrip('+')}</td>"
            f"<td>{pct(s.median_abs_error).lstrip('+')}</td><td>{pct(s.median_signed_error)}</td></tr>"
            for k, s in table.items()
        )
        return (
            f"<h2>{escape(title)}</h2><table><tr><th>metric</th><th>values</th><th>MAPE</th>"
            f"<th>median |error|</th><th>median error</th></tr>{body}</table>"
        )

    parts = [stats_rows("All rows", resp.by_metric)]
    parts += [stats_rows(f"Split: {s}", t) for s, t in resp.by_split.items()]
    parts += [stats_rows(f"GPU: {g}", t) for g, t in resp.by_gpu.items()]
    parts += [stats_rows(f"Engine: {e}", t) for e, t in resp.by_engine.items()]
    vals = "".join(
        f"<tr><td>{escape(v.row)}</td><td>{escape(v.gpu)}</td><td>{v.split}</td><td>{escape(v.metric)}</td>"
        f"<td>{v.measured:.6g}</td><td>{'-' if v.predicted is None else f'{v.predicted:.6g}'}</td>"
        f"<td>{pct(v.error)}</td><td>{escape(v.where)}</td></tr>"
        for v in resp.values
    )
    parts.append(
        "<h2>Every value (SI units: s, tok/s, req/s)</h2><table><tr><th>row</th><th>GPU</th><th>split</th>"
        f"<th>metric</th><th>measured</th><th>predicted</th><th>error</th><th>where</th></tr>{vals}</table>"
    )
    style = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}th{background:#eee}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>servecap validate</title><style>{style}</style>"
        f"</head><body><h1>servecap validate: {resp.rows} rows from {len(resp.sources)} sources</h1>"
        f"{''.join(parts)}</body></html>"
    )
