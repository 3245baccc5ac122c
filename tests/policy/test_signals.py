"""One signal function for the simulated fleet and the live monitor."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from servecap.monitor.advice import signal_value as monitor_signal
from servecap.monitor.views import ScrapedReplica
from servecap.policy.signals import ADDITIVE_SIGNALS, SIGNALS, signal_value


@dataclass(frozen=True)
class _Engine:  # a simulated replica's view, as the fleet's Replica gives it
    replica_id: int
    pool: str
    is_ready: bool
    num_waiting: int
    num_running: int
    kv_usage: float
    num_inflight_tokens: int = 0

    def prefix_hit_blocks(self, block_keys: Sequence[int]) -> int:
        return 0

    def prefix_tier_blocks(self, block_keys: Sequence[int]) -> tuple[int, int, int, int]:
        return (self.prefix_hit_blocks(block_keys), 0, 0, 0)


def test_values_by_hand() -> None:
    reps = [_Engine(0, "p", True, 3, 10, 0.4), _Engine(1, "p", True, 5, 20, 0.8), _Engine(2, "p", False, 9, 9, 1.0)]
    assert signal_value("num_requests_waiting", reps, lambda: None, pending=2) == 10.0  # 3 + 5 + 2 at the router
    assert signal_value("inflight", reps, lambda: None, pending=2) == 40.0
    assert signal_value("kv_usage", reps, lambda: None, pending=2) == pytest.approx(0.6)  # not ready: left out
    assert signal_value("kv_usage", [], lambda: None, pending=1) == 1.0  # nothing ready, work waits: full
    assert signal_value("kv_usage", [], lambda: None) == 0.0
    assert signal_value("p99_ttft_s", reps, lambda: 0.75) == 0.75
    assert signal_value("p99_itl_s", reps, lambda: 0.75, 0, lambda: 0.012) == 0.012
    assert signal_value("p99_itl_s", reps, lambda: 0.75) is None  # a caller that cannot tell the ITL
    assert set(ADDITIVE_SIGNALS) < set(SIGNALS)


def test_the_monitor_reads_what_the_fleet_reads() -> None:
    sim = [_Engine(0, "p", True, 3, 10, 0.4), _Engine(1, "p", False, 2, 1, 0.1)]
    live = [ScrapedReplica(r.replica_id, r.pool, r.is_ready, r.num_waiting, r.num_running, r.kv_usage) for r in sim]
    for name in ("num_requests_waiting", "inflight", "kv_usage"):
        assert monitor_signal(name, live, None) == signal_value(name, sim, lambda: None)
