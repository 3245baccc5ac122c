"""The weighted router's weights: any non-negative number, zero turning a score off (llm-d's
scorer weights); a negative one is one error naming it. Found by benchmarks/mutation.py."""

from __future__ import annotations

import random

import pytest

from servecap.errors import ServecapError
from servecap.monitor.views import ScrapedReplica
from servecap.policy.routers import RouteRequest, Weighted


def test_fractional_and_zero_weights_are_settings() -> None:
    w = Weighted(random.Random(0), prefix_weight=0.5, queue_weight=0.0, kv_weight=0.25)
    assert (w.prefix_weight, w.queue_weight, w.kv_weight) == (0.5, 0.0, 0.25)
    views = [ScrapedReplica(0, "p", True, 4, 0, 0.2), ScrapedReplica(1, "p", True, 0, 0, 0.6)]
    # no keys: prefix 0; queue weighed 0; kv 0.25 x (1 - usage)
    assert w.scores(RouteRequest(0, 64, 16), views) == pytest.approx([0.25 * 0.8, 0.25 * 0.4])
    with pytest.raises(ServecapError, match=r"kv_weight=-0\.1"):
        Weighted(random.Random(0), kv_weight=-0.1)
