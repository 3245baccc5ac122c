"""Per-class SLO attainment against percentile targets, worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servecap.errors import ServecapError
from servecap.results.slo_report import check_target, metric_values, slo_report
from servecap.results.summary import RecordColumns


def _cols() -> RecordColumns:
    # four requests: TTFT 0.1, 0.2, 0.3 s, and one that failed; the third is a one-token answer
    nan = np.nan
    return RecordColumns(
        arrival_s=np.array([0.0, 1.0, 2.0, 3.0]),
        first_token_s=np.array([0.1, 1.2, 2.3, nan]),
        end_s=np.array([1.1, 3.2, 2.3, nan]),
        prompt_tokens=np.array([10, 10, 10, 10], dtype=np.int64),
        output_tokens=np.array([11, 21, 1, 5], dtype=np.int64),
        cached_prompt_tokens=np.zeros(4, dtype=np.int64),
        preemptions=np.zeros(4, dtype=np.int64),
        queue_time_s=np.array([0.0, 0.05, 0.1, nan]),
        errors=(None, None, None, "replica_failed"),
    )


def test_per_request_values_by_hand() -> None:
    c = _cols()
    ttft = metric_values(c, "ttft_s")
    assert ttft[:3] == pytest.approx([0.1, 0.2, 0.3]) and math.isinf(ttft[3])
    tpot = metric_values(c, "tpot_s")  # (1.1 - 0.1) / 10 = 0.1, (3.2 - 1.2) / 20 = 0.1; one token: none
    assert tpot[:2] == pytest.approx([0.1, 0.1]) and math.isnan(tpot[2]) and math.isinf(tpot[3])
    assert metric_values(c, "e2e_s")[:3] == pytest.approx([1.1, 2.2, 0.3])


def test_percentile_target_counts_failures_as_slowest() -> None:
    ttft = metric_values(_cols(), "ttft_s")
    # p50 of [0.1, 0.2, 0.3, inf] (linear): between 0.2 and 0.3 -> 0.25; two of four within 0.25
    r = check_target(ttft, ("ttft_s", 50.0, 0.25), "all")
    assert r.observed_s == pytest.approx(0.25) and r.met and r.share_within == 0.5
    assert r.label() == "p50 TTFT <= 250 ms"
    r99 = check_target(ttft, ("ttft_s", 99.0, 10.0), "all")  # the failed request is the p99
    assert math.isinf(r99.observed_s) and not r99.met and r99.share_within == 0.75


def test_groups_with_their_own_targets() -> None:
    c = _cols()
    groups = {"a/chat": np.array([0, 1]), "b/api": np.array([2, 3]), "c/none": np.array([0])}
    targets = {
        "a/chat": [("ttft_s", 99.0, 0.25), ("tpot_s", 99.0, 0.1)],
        "b/api": [("ttft_s", 50.0, 1.0)],
    }
    rep = {g.group: g for g in slo_report(c, groups, targets)}
    assert set(rep) == {"a/chat", "b/api"}  # a group without targets is not scored
    chat = rep["a/chat"]
    # p99 TTFT of [0.1, 0.2] = 0.199 <= 0.25; TPOT 0.1 <= 0.1: met, both requests within
    assert chat.met and chat.attainment == 1.0
    api = rep["b/api"]  # [0.3, inf]: p50 is inf -> missed; one of two within
    assert not api.met and api.attainment == 0.5


def test_itl_targets_are_refused_in_one_line() -> None:
    with pytest.raises(ServecapError, match="ITL is pooled"):
        metric_values(_cols(), "itl_s")
