"""The cache replay's exact outcome on small generated traces, pinned.

The figures were computed by the cache-replay core before its speed work (main at 6e9f180: LRU
as a linked list of entry objects, per-replica dicts): a faster core must give the same
requests on the same replicas, the same cached blocks and the same latencies to the last bit.
The traces evict (4000 blocks a replica, prompts of ~1.5k blocks), make requests wait
(``max_num_seqs`` 6) and cover every router, prefix caching off, and more replicas (70) than a
64-bit mask holds."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest
from cache_replay_helpers import BS, admit_all, replay_fleet, sessions
from cache_replay_helpers import setup as setup  # the fixture

from servecap.fleet.cache_replay import CacheReplay
from servecap.fleet.cache_replay_run import cache_replay
from servecap.fleet.stream_source import chunked
from servecap.policy.routers import PrecisePrefix, make_router
from servecap.sim import EngineSetup
from servecap.sim.step_time import StepTimeModel

# router, prefix caching -> hit blocks, requests per replica, peak run keys, last end (s),
# TTFT (s) of requests 0, 1, 123, 250, 377, 499, math.fsum of every (ttft, e2e, tpot)
PINNED = {
    ("precise-prefix", True): (
        128369,
        (131, 64, 91, 91, 45, 78),
        733,
        283.1547838774709,
        (
            0.05082375272205707,
            0.042941262777851555,
            0.03015466799951927,
            0.030845078045981467,
            0.045636525013229345,
            0.03143765703015333,
        ),
        469.3405009972932,
    ),
    ("least-outstanding", True): (
        75213,
        (150, 104, 84, 65, 60, 37),
        513,
        283.1547838774709,
        (
            0.05082375272205707,
            0.042941262777851555,
            0.09093405532200727,
            0.030753375401832983,
            0.19467570258813538,
            0.03143765703015333,
        ),
        509.4582079539143,
    ),
    ("round-robin", True): (
        64580,
        (84, 84, 83, 83, 83, 83),
        501,
        283.4432186569841,
        (
            0.05082375272205707,
            0.042941262777851555,
            0.07157265568093463,
            0.09673507385270597,
            0.19467570258813538,
            0.31987243654333497,
        ),
        527.0176066273975,
    ),
    ("precise-prefix", False): (
        0,
        (139, 104, 85, 62, 55, 55),
        0,
        284.03626936326606,
        (
            0.05082375272205707,
            0.042941262777851555,
            0.09090111074914509,
            0.11150124243965465,
            0.21073379579485874,
            0.9129231428253206,
        ),
        592.2203200489018,
    ),
}
PICKED = (0, 1, 123, 250, 377, 499)


def _small(setup: EngineSetup, caching: bool) -> EngineSetup:
    return dataclasses.replace(setup, num_gpu_blocks=4000, max_num_seqs=6, enable_prefix_caching=caching)


@pytest.mark.parametrize(("router", "caching"), list(PINNED))
def test_core_outcome_is_pinned(setup: EngineSetup, router: str, caching: bool) -> None:
    s = _small(setup, caching)
    rt = make_router(router, random.Random(0), None)
    weights = (rt.prefix_weight, rt.queue_weight, rt.kv_weight) if isinstance(rt, PrecisePrefix) else (0.0, 0.0, 0.0)
    core = CacheReplay(
        6,
        s.num_gpu_blocks,
        s.block_size,
        StepTimeModel(s.step, s.efficiency),
        s.max_num_seqs,
        s.max_num_batched_tokens,
        router,
        *weights,
        caching,
    )
    arrays = sessions(500, 150.0, 7)
    out = admit_all(core, arrays, BS)
    hit_blocks, per_replica, peak_keys, last_end_s, ttfts, total = PINNED[(router, caching)]
    assert core.hit_tokens == hit_blocks * BS
    assert tuple(r.served for r in core.replicas) == per_replica
    assert core.peak_index_keys == peak_keys
    assert core.last_end_s == last_end_s
    assert tuple(out[3 * k] for k in PICKED) == ttfts
    assert math.fsum(out) == total
    # the public path, chunked, gives the same
    res = cache_replay(replay_fleet(s, 6, router), chunked(arrays, 64))
    assert (res.prefix_cache_hit_tokens, res.requests_per_replica, res.horizon_s) == (
        hit_blocks * BS,
        per_replica,
        last_end_s,
    )


def test_seventy_replicas_outcome_is_pinned(setup: EngineSetup) -> None:
    s = dataclasses.replace(setup, num_gpu_blocks=2500, max_num_seqs=4)
    res = cache_replay(replay_fleet(s, 70, "precise-prefix"), chunked(sessions(800, 400.0, 8), 100))
    assert res.prefix_cache_hit_tokens == 3643536
    assert res.requests_per_replica == (
        (50, 17, 53, 34, 31, 56, 43, 24, 55, 69, 33, 56, 35, 51, 29, 34, 26, 16, 18, 46, 24) + (0,) * 49
    )
    assert res.peak_index_keys == 1348
    assert (res.horizon_s, res.ttft_s.p50, res.ttft_s.p99, res.e2e_s.p90) == (
        228.49075686165085,
        0.0343840548943749,
        0.577267138457772,
        1.632261263753172,
    )
