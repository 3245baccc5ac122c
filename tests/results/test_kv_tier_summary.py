"""Per-tier KV hits in a run's summary: written as ``kv_tiers`` (tokens and fraction per tier),
typed by RunSummaryJson, read back, and left out of a run without tiers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servecap.results import RequestRecord, summarize
from servecap.results.summary import RunSummary, summary_from_json_dict, summary_to_json_dict
from servecap.results.summary_json import RunSummaryJson


def _summary() -> RunSummary:
    return summarize([RequestRecord(0, 0.0, 100, 5, first_token_s=0.1, end_s=0.5)], duration_s=1.0)


def test_tiers_round_trip() -> None:
    s = replace(_summary(), kv_tier_hit_tokens={"gpu": 600, "cpu": 300, "remote": 50}, kv_tier_query_tokens=1200)
    d = summary_to_json_dict(s)
    assert d["kv_tiers"] == {
        "query_tokens": 1200,
        "gpu": {"tokens": 600, "fraction": 0.5},
        "cpu": {"tokens": 300, "fraction": 0.25},
        "remote": {"tokens": 50, "fraction": pytest.approx(50 / 1200)},
    }
    assert RunSummaryJson.of(s).model_dump() == d
    back = summary_from_json_dict(d)
    assert back.kv_tier_hit_tokens == {"gpu": 600, "cpu": 300, "remote": 50}
    assert back.kv_tier_query_tokens == 1200


def test_no_tiers_no_key() -> None:
    d = summary_to_json_dict(_summary())
    assert "kv_tiers" not in d and "kv_tiers" not in RunSummaryJson.of(_summary()).model_dump()


def test_the_html_report_shows_each_tier() -> None:
    from servecap.report.html import _summary_table

    s = replace(_summary(), kv_tier_hit_tokens={"gpu": 600, "cpu": 300}, kv_tier_query_tokens=1200)
    html = _summary_table(s)
    assert '<table class="kv-tiers">' in html
    assert "<td>cpu</td><td>300</td><td>25.0%</td>" in html
    assert "kv-tiers" not in _summary_table(_summary())
