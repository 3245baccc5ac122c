"""The cache-replay fidelity (servecap.fleet.cache_replay_run) against the full simulation.

Exact where it claims to be: with one replica and one request at a time its hit rate equals the
shipped Mooncake sample's direct count over ``hash_ids`` (unbounded cache) and the engine's
(bounded pool); its block runs equal ``engine_block_runs`` row by row; runs are deterministic.
Approximate where it says so, with the stated tolerance (docs/workload.md): on a small multi-turn
trace on 8 replicas behind ``precise-prefix`` and ``least-outstanding``, the hit rate within 3
points of the full simulation's and the median TTFT and TPOT within a factor of 2."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from cache_replay_helpers import SAMPLE, admit_all, direct_unbounded_hit_rate, replay_fleet, sessions
from cache_replay_helpers import setup as setup  # the fixture

from servecap.errors import ServecapError
from servecap.fleet import INSTANT, FleetSpec, Pool, simulate_fleet
from servecap.fleet.cache_replay import CacheReplay
from servecap.fleet.cache_replay_run import cache_replay, chunk_runs
from servecap.fleet.stream_source import chunked
from servecap.policy.autoscaler_base import AutoscalerSettings
from servecap.sim import EngineSetup
from servecap.sim.step_time import StepTimeModel
from servecap.workload import RequestArrays
from servecap.workload.block_hash import engine_block_runs
from servecap.workload.generate import trace_arrays
from servecap.workload.spec import TraceArrival
from servecap.workload.trace import load_trace
from servecap.workload.trace_stream import iter_trace_chunks


def _spaced(arrays: RequestArrays) -> RequestArrays:
    """One request at a time: 1000 s apart, one output token."""
    n = len(arrays)
    return dataclasses.replace(
        arrays, arrival_s=np.arange(n, dtype=np.float64) * 1000.0, output_tokens=np.ones(n, dtype=np.int64)
    )


@pytest.mark.parametrize("block_size", [16, 48, 128, 1024])
def test_chunk_runs_are_engine_block_runs_row_by_row(block_size: int) -> None:
    arrays = sessions(60, 4.0, 1)
    arrays = dataclasses.replace(arrays, prompt_tokens=arrays.prompt_tokens - np.arange(60) * 7)
    offsets, keys, ends = chunk_runs(arrays, block_size)
    for r in range(len(arrays)):
        ids = arrays.hash_ids[arrays.hash_offsets[r] : arrays.hash_offsets[r + 1]].tolist()
        runs = engine_block_runs(ids, 512, block_size, int(arrays.prompt_tokens[r]))
        got = (keys[offsets[r] : offsets[r + 1]].tolist(), ends[offsets[r] : offsets[r + 1]].tolist())
        assert got == (([], []) if runs is None else (list(runs.keys), list(runs.ends)))


def test_unbounded_cache_equals_the_direct_count(setup: EngineSetup) -> None:
    arrays = trace_arrays(TraceArrival(path=str(SAMPLE)))
    got = cache_replay(replay_fleet(dataclasses.replace(setup, num_gpu_blocks=200_000)), [arrays])
    assert got.prefix_cache_hit_rate == pytest.approx(direct_unbounded_hit_rate(), abs=1e-12)
    assert got.requests == len(load_trace(SAMPLE)) == 75


def test_the_full_simulation_under_load_stays_below_the_unbounded_count(setup: EngineSetup) -> None:
    """``fleet simulate``'s default fidelity on the sample at its own pace, one replica with its
    planned pool: requests are preempted and admitted again. The hit rate counts each request's
    first admission (vLLM's prefix_cache_queries/hits), so it stays under the unbounded count (a
    re-admission finding its own freed blocks counted them again: 19.1 % against 4.1 %)."""
    arrays = trace_arrays(TraceArrival(path=str(SAMPLE)))
    full = simulate_fleet(replay_fleet(setup), arrays, 0).summary
    assert full.completed == 75 and full.preemptions > 10
    assert full.prefix_cache_hit_rate is not None
    assert 0.03 < full.prefix_cache_hit_rate <= direct_unbounded_hit_rate() + 1e-12


@pytest.mark.parametrize("capacity_blocks", [5500, 9000, 20_000])
def test_one_at_a_time_equals_the_engine(setup: EngineSetup, capacity_blocks: int) -> None:
    """One request at a time in a bounded pool: the engine's LRU and the replay's agree."""
    arrays = _spaced(trace_arrays(TraceArrival(path=str(SAMPLE))))
    small = dataclasses.replace(setup, num_gpu_blocks=capacity_blocks, max_num_seqs=1, max_num_batched_tokens=131072)
    engine = simulate_fleet(replay_fleet(small), arrays, 0).summary.prefix_cache_hit_rate
    replay = cache_replay(replay_fleet(small), chunked(arrays, 16)).prefix_cache_hit_rate
    assert replay == pytest.approx(engine, abs=1e-12)


@pytest.mark.parametrize("router", ["precise-prefix", "least-outstanding"])
def test_within_the_stated_tolerance_of_the_full_simulation(setup: EngineSetup, router: str) -> None:
    arrays = sessions(600, 16.0, 0)
    small = dataclasses.replace(setup, num_gpu_blocks=6000)  # evictions: ~6 prompts' blocks a replica
    full = simulate_fleet(replay_fleet(small, 8, router), arrays, 0).summary
    fast = cache_replay(replay_fleet(small, 8, router), chunked(arrays, 100))
    assert full.prefix_cache_hit_rate is not None and fast.prefix_cache_hit_rate is not None
    assert full.prefix_cache_hit_rate > 0.3
    assert fast.prefix_cache_hit_rate == pytest.approx(full.prefix_cache_hit_rate, abs=0.03)
    for a, b in ((fast.ttft_s.p50, full.ttft_s.p50), (fast.tpot_s.p50, full.tpot_s.p50)):
        assert a is not None and b is not None and 0.5 < a / b < 2.0
    assert fast.requests == sum(fast.requests_per_replica) == 600


def test_deterministic_and_independent_of_the_chunking(setup: EngineSetup) -> None:
    arrays = sessions(300, 16.0, 2)
    fleet = replay_fleet(setup, 4, "precise-prefix")
    a = cache_replay(fleet, chunked(arrays, 7))
    assert a == cache_replay(fleet, chunked(arrays, 7))
    b = cache_replay(fleet, [arrays])
    # the same requests on the same replicas at the same times; a sketch's mean sums per chunk
    assert dataclasses.replace(a, ttft_s=b.ttft_s, e2e_s=b.e2e_s, tpot_s=b.tpot_s) == b
    for x, y in ((a.ttft_s, b.ttft_s), (a.e2e_s, b.e2e_s), (a.tpot_s, b.tpot_s)):
        assert dataclasses.replace(x, mean=y.mean) == y and x.mean == pytest.approx(y.mean, rel=1e-12)


def test_index_is_bounded_by_the_caches_not_the_trace(setup: EngineSetup) -> None:
    small = dataclasses.replace(setup, num_gpu_blocks=3000)
    fleet = replay_fleet(small, 4, "precise-prefix")
    short = cache_replay(fleet, [sessions(300, 16.0, 3)])
    long = cache_replay(fleet, [sessions(1500, 16.0, 3)])
    runs_at_most = 4 * 3000  # a run holds at least one block
    assert short.peak_index_keys <= long.peak_index_keys <= runs_at_most


@pytest.mark.parametrize("capacity_blocks", [3000, 10**9])
def test_lru_queues_are_bounded_by_the_cached_runs(setup: EngineSetup, capacity_blocks: int) -> None:
    """Each replica's queue of touches holds every cached run's last touch once, and a few items
    per cached run at most, with evictions and without (where nothing else trims it)."""
    s = dataclasses.replace(setup, num_gpu_blocks=capacity_blocks)
    core = CacheReplay(
        4,
        capacity_blocks,
        s.block_size,
        StepTimeModel(s.step, s.efficiency),
        s.max_num_seqs,
        s.max_num_batched_tokens,
        "round-robin",
        0.0,
        0.0,
        0.0,
        True,
    )
    admit_all(core, sessions(1500, 16.0, 3), s.block_size)
    for rep in core.replicas:
        pending = rep.queue[rep.head :]
        entries = {id(e): e for e in pending}
        touches = Counter(id(e) for e in pending)
        assert len(entries) == rep.live and all(entries[k].pending == n for k, n in touches.items())
        assert len(pending) <= 2 * rep.live + 64 and rep.head <= max(1024, len(rep.queue) // 2 + 1)
        assert rep.cached == sum(e.length for e in entries.values())


def test_streamed_trace_file_equals_the_whole_read(tmp_path: Path, setup: EngineSetup) -> None:
    whole = load_trace(SAMPLE)
    chunks = list(iter_trace_chunks(SAMPLE, chunk_rows=10))
    assert [len(c) for c in chunks] == [10] * 7 + [5]
    assert np.array_equal(np.concatenate([c.arrival_s for c in chunks]), whole.arrival_s)
    assert np.array_equal(np.concatenate([c.prompt_tokens for c in chunks]), whole.prompt_tokens)
    assert np.array_equal(np.concatenate([c.hash_ids for c in chunks]), whole.hash_ids)
    fleet = replay_fleet(setup, 2, "precise-prefix")
    a = cache_replay(fleet, iter_trace_chunks(SAMPLE, chunk_rows=10))
    b = cache_replay(fleet, [trace_arrays(TraceArrival(path=str(SAMPLE)))])
    assert (a.prefix_cache_hit_tokens, a.requests_per_replica, a.ttft_s.p99) == (
        b.prefix_cache_hit_tokens,
        b.requests_per_replica,
        b.ttft_s.p99,
    )


def test_streamed_trace_errors_name_the_line(tmp_path: Path) -> None:
    lines = SAMPLE.read_text().splitlines()
    late = tmp_path / "late.jsonl"
    late.write_text("\n".join([lines[-1], *lines[:-1]]) + "\n")  # the last line's time first
    with pytest.raises(ServecapError, match=r"late.jsonl:2.timestamp.*time order"):
        list(iter_trace_chunks(late))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(ServecapError, match=r"bad.jsonl:2.*not JSON"):
        list(iter_trace_chunks(bad))
    with pytest.raises(ServecapError, match="cannot be read"):
        list(iter_trace_chunks(tmp_path / "missing.jsonl"))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ServecapError, match="no requests"):
        list(iter_trace_chunks(empty))


def test_refuses_what_it_does_not_model(setup: EngineSetup) -> None:
    arrays = sessions(20, 4.0, 4)
    with pytest.raises(ServecapError, match="router 'session'"):
        cache_replay(replay_fleet(setup, 2, "session"), [arrays])
    scaled = FleetSpec((Pool("p", setup, replicas=2, cold_start=INSTANT, autoscaler=AutoscalerSettings()),))
    with pytest.raises(ServecapError, match="autoscaler"):
        cache_replay(scaled, [arrays])
    with pytest.raises(ServecapError, match="arrival order"):
        cache_replay(replay_fleet(setup), [arrays.take(np.arange(19, -1, -1, dtype=np.int64))])
