"""The lifecycle pieces the co-located and the P/D fleet share: a cold start's draw and the
replicas a scale-down stops."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from fleet_helpers import setup_8b

from servecap.fleet import Pool
from servecap.fleet.lifecycle import cold_start_draw_s, scale_down_choice
from servecap.fleet.spec import ColdStart, Phase


@dataclass
class _R:
    replica_id: int
    state: str
    num_waiting: int = 0
    num_running: int = 0


def test_fixed_phases_and_the_weights_load_by_hand() -> None:
    # 16 GB of weights at 2 GB/s = 8 s, plus 60 + 45 + 30 + 10 s of fixed phases = 153 s
    cs = ColdStart(Phase(60.0), Phase(45.0), 2e9, Phase(30.0), Phase(10.0))
    pool = Pool("p", setup_8b(), cold_start=cs, weights_bytes=16e9)
    assert cold_start_draw_s(pool, np.random.default_rng(0)) == pytest.approx(153.0)


def test_a_random_phase_is_one_lognormal_draw_of_its_mean_and_cv() -> None:
    cs = ColdStart(Phase(60.0, 0.3), Phase(0.0), float("inf"), Phase(0.0), Phase(0.0))
    pool = Pool("p", setup_8b(), cold_start=cs)
    mu, sigma = Phase(60.0, 0.3).log_params()
    assert cold_start_draw_s(pool, np.random.default_rng(7)) == np.random.default_rng(7).lognormal(mu, sigma)


def test_a_scale_down_cancels_the_newest_starting_then_drains_the_least_loaded() -> None:
    members = [
        _R(0, "ready", 2, 5),
        _R(1, "ready", 0, 3),
        _R(2, "starting"),
        _R(3, "ready", 1, 2),
        _R(4, "starting"),
    ]
    starting, ready = scale_down_choice(members, 1)
    assert [r.replica_id for r in starting] == [4] and ready == []
    starting, ready = scale_down_choice(members, 4)
    # both starting ones (4, then 2); then replicas 1 and 3, each with 3 requests: the newer first
    assert [r.replica_id for r in starting] == [4, 2]
    assert [r.replica_id for r in ready] == [3, 1]
