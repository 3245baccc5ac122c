"""The shared results schema: records, percentiles, goodput and the JSON keys."""

from __future__ import annotations

import numpy as np
import pytest

from servecap.results import (
    RequestRecord,
    Slo,
    percentiles,
    summarize,
    summary_to_json_dict,
    weighted_percentiles,
)


def test_record_derived_latencies() -> None:
    r = RequestRecord(
        request_id=0,
        arrival_s=1.0,
        prompt_tokens=10,
        output_tokens=4,
        first_token_s=1.5,
        end_s=2.1,
        token_times_s=(1.5, 1.7, 1.9, 2.1),
    )
    assert r.ttft_s == pytest.approx(0.5) and r.e2e_s == pytest.approx(1.1)
    assert r.tpot_s == pytest.approx(0.2)
    assert r.itl_s == pytest.approx((0.2, 0.2, 0.2))
    failed = RequestRecord(request_id=1, arrival_s=0.0, prompt_tokens=1, output_tokens=0, error="http_503")
    assert failed.ttft_s is None and failed.tpot_s is None and not failed.ok


def test_percentiles_hand_worked_and_weighted_equals_expanded() -> None:
    p = percentiles([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (p.p50, p.p90, p.mean, p.max) == (3.0, pytest.approx(4.6), 3.0, 5.0)
    rng = np.random.default_rng(0)
    v = rng.uniform(0, 1, 50)
    w = rng.integers(0, 7, 50)
    a, b = weighted_percentiles(v, w), percentiles(np.repeat(v, w))
    for q in ("p50", "p90", "p95", "p99", "mean", "max"):
        assert getattr(a, q) == pytest.approx(getattr(b, q), rel=1e-12)


def test_summary_goodput_and_json_keys() -> None:
    recs = [
        RequestRecord(0, 0.0, 100, 11, first_token_s=0.5, end_s=1.5),  # TTFT 0.5, TPOT 0.1: good
        RequestRecord(1, 1.0, 100, 11, first_token_s=3.0, end_s=4.0),  # TTFT 2.0: misses
        RequestRecord(2, 2.0, 100, 11, first_token_s=2.2, end_s=5.2),  # TPOT 0.3: misses
        RequestRecord(3, 3.0, 100, 0, error="rejected"),
    ]
    s = summarize(recs, duration_s=10.0, slo=Slo(ttft_s=1.0, tpot_s=0.2))
    assert s.num_requests == 4 and s.completed == 3 and s.rejected == 1
    assert s.throughput_req_s == pytest.approx(0.3)
    assert s.goodput_req_s == pytest.approx(0.1)
    assert s.output_tokens_per_s == pytest.approx(3.3)
    d = summary_to_json_dict(s)
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_time_s"):
        assert {"p50", "p90", "p99", "mean"} <= set(d[key])
    for key in (
        "throughput_req_s",
        "output_tokens_per_s",
        "goodput_req_s",
        "preemptions",
        "rejected",
        "mean_batch_size",
        "num_requests",
    ):
        assert key in d
    assert d["mean_batch_size"] is None and d["queue_time_s"]["p50"] is None
    assert summarize(recs, duration_s=10.0).goodput_req_s is None
