"""Each HTML report rendered in a real browser: sane axes and labels (issue 20, defect 9: the
capacity report's latency axis ran to 10^48, its labels overlapped, one read "new text")."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from servecap.report.html import html_report
from servecap.report.replay_html import replay_html
from servecap.results import Slo

pytestmark = pytest.mark.browser

TABLE = [
    {"load": 10.0 * i, "ttft_p50_s": 0.04 * i, "ttft_p99_s": 0.09 * i * i, "tpot_p50_s": 0.01 + 0.002 * i,
     "tpot_p99_s": 0.012 + 0.004 * i, "e2e_p99_s": 1.5 * i, "mean_queue_depth": 0.1 * i * i, "mean_batch_size": 8.0 * i}
    for i in range(1, 9)
]  # fmt: skip


def _layouts(page: Any, path: Path) -> list[dict[str, Any]]:
    page.goto(path.as_uri())
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length > 0")
    return page.evaluate(  # type: ignore[no-any-return]
        """() => [...document.querySelectorAll('.js-plotly-plot')].map((g) => ({
            axes: Object.fromEntries(Object.entries(g._fullLayout)
                .filter(([k]) => /^[xy]axis\\d*$/.test(k))
                .map(([k, a]) => [k, {range: a.range, type: a.type, title: a.title && a.title.text}])),
            annotations: (g._fullLayout.annotations || []).map((a) => a.text),
        }))"""
    )


def test_capacity_report_axes_and_labels(browser: Any, tmp_path: Path) -> None:
    path = tmp_path / "capacity.html"
    path.write_text(
        html_report("capacity", load_table=TABLE, load_unit="users", slo=Slo(1.0, 0.05), capacity=50.0),
        encoding="utf-8",
    )
    page = browser.new_page()
    try:
        (fig,) = _layouts(page, path)
    finally:
        page.close()
    y = fig["axes"]["yaxis"]
    assert y["type"] == "log"
    lo, hi = y["range"]  # log10 of ms
    assert math.log10(10) <= hi <= math.log10(1e5), y  # not 10^48
    assert lo >= -1
    texts = fig["annotations"]
    assert "TTFT SLO 1,000 ms" in texts and "TPOT SLO 50 ms" in texts and "capacity 50 users" in texts
    assert not any(t in ("", "new text", None) for t in texts)
    assert fig["axes"]["xaxis"]["title"] == "offered load (users)"


def test_replay_report_axes(browser: Any, tmp_path: Path) -> None:
    minutes = [
        {"minute": m, "rate_req_s": 4.0 if m < 5 else 40.0, "actual_replicas": 1.0, "shadow_ready": 1.0 + m,
         "shadow_starting": 0.0, "shadow_at_risk": m == 5, "cold_start_gap": m == 5}
        for m in range(10)
    ]  # fmt: skip
    data = {"minutes": minutes, "pool": "h100", "fleet_file": "f.yaml", "scale_events": [], "shadow_gpu_hours": 1.0,
            "shadow_cost_usd": 2.5, "actual_gpu_hours": 0.2, "actual_cost_usd": 0.5, "break_rate_req_s": 29.0,
            "history": "m.sqlite", "notes": []}  # fmt: skip
    path = tmp_path / "replay.html"
    path.write_text(replay_html(data), encoding="utf-8")
    page = browser.new_page()
    try:
        (fig,) = _layouts(page, path)
    finally:
        page.close()
    assert fig["axes"]["yaxis"]["range"][0] == 0 and 10 <= fig["axes"]["yaxis"]["range"][1] <= 12
    assert fig["axes"]["yaxis2"]["range"][0] == 0 and 40 <= fig["axes"]["yaxis2"]["range"][1] <= 45
    assert fig["axes"]["xaxis2"]["title"] == "minute of the history"


def test_capacity_reports_log_axis_has_the_pages_ticks_none_overlapping(browser: Any, tmp_path: Path) -> None:
    """Issue 32, defect 8: the web pages' log axes got 1-2-5/decade ticks; the HTML reports kept
    plotly's minor labels ("2", "5" between decades), overlapping over a few decades."""
    from servecap.report.log_ticks import log_ticks

    from .conftest import TICK_OVERLAPS

    path = tmp_path / "capacity.html"
    path.write_text(html_report("capacity", load_table=TABLE, load_unit="users", slo=Slo(1.0, 0.05)), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1000, "height": 800})
    try:
        page.goto(path.as_uri())
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length > 0")
        plot = page.evaluate("() => document.querySelector('.js-plotly-plot').id")
        drawn = page.evaluate(f"() => document.getElementById('{plot}')._fullLayout.yaxis.ticktext")
        overlaps = page.evaluate(TICK_OVERLAPS, plot)
    finally:
        page.close()
    ms = [1e3 * row[k] for row in TABLE for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p99_s")]
    assert drawn == log_ticks([*ms, 1000.0, 50.0])["ticktext"] and len(drawn) >= 3
    assert overlaps == []
