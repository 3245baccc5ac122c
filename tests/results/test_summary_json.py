"""The typed run summary (results/summary_json.py) writes the JSON the summary dict always was:
same keys, same order, same values, for a simulated and a measured run alike."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from servecap.results import RequestRecord, Slo, summarize, summary_to_json_dict
from servecap.results.summary import RunSummary, TimeSeries
from servecap.results.summary_json import RunSummaryJson


def _summary() -> RunSummary:
    # the hand-worked run of tests/results/test_results_schema.py: TTFT 0.5 / 2.0 / 0.2 s,
    # one request within both SLOs (goodput 0.1 req/s over 10 s), one rejected
    recs = [
        RequestRecord(0, 0.0, 100, 11, first_token_s=0.5, end_s=1.5),
        RequestRecord(1, 1.0, 100, 11, first_token_s=3.0, end_s=4.0),
        RequestRecord(2, 2.0, 100, 11, first_token_s=2.2, end_s=5.2),
        RequestRecord(3, 3.0, 100, 0, error="rejected"),
    ]
    return summarize(recs, duration_s=10.0, slo=Slo(ttft_s=1.0, tpot_s=0.2))


def test_typed_summary_is_the_summary_dict_key_for_key() -> None:
    s = _summary()
    typed = RunSummaryJson.of(s).model_dump()
    plain = summary_to_json_dict(s)
    assert typed == plain
    assert list(typed) == list(plain)  # the same order: the JSON text is the same
    assert json.loads(RunSummaryJson.of(s).model_dump_json()) == json.loads(json.dumps(plain))
    assert typed["goodput_req_s"] == pytest.approx(0.1) and typed["completed"] == 3 and typed["rejected"] == 1
    assert typed["errors"] == {"rejected": 1} and "extra" not in typed and "timeseries" not in typed


def test_extra_figures_and_the_time_series_when_there_are_some() -> None:
    s = replace(
        _summary(),
        extra={"replicas_mean": 2.5},
        timeseries=TimeSeries((0.0, 1.0), (0.1, 0.4), (0, 3), (2, 5)),
    )
    typed = RunSummaryJson.of(s, include_timeseries=True).model_dump()
    plain = summary_to_json_dict(s, include_timeseries=True)
    assert typed == plain and list(typed) == list(plain)
    assert typed["extra"] == {"replicas_mean": 2.5} and typed["timeseries"]["queue_depth"] == [0, 3]
    assert "timeseries" not in RunSummaryJson.of(s).model_dump()  # only when asked for, as the dict
