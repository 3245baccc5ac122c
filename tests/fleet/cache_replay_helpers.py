"""The setup the cache-replay tests share (test_cache_replay.py, test_cache_replay_tiers.py,
test_cache_replay_pinned.py): Llama-3.1-8B on an H100 with 16-token blocks, a one-pool fleet of
it, the shipped Mooncake sample and small multi-turn block-hash traces."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.fleet import INSTANT, FleetSpec, Pool
from servecap.fleet.cache_replay import CacheReplay
from servecap.fleet.cache_replay_run import chunk_runs
from servecap.sim import EngineSetup, engine_setup_from_plan
from servecap.specs import RequestShape
from servecap.workload import RequestArrays
from servecap.workload.block_hash import leading_hits
from servecap.workload.trace import load_trace

SAMPLE = Path(__file__).parents[2] / "src/servecap/workload/data/mooncake_conversation_head.jsonl"
BS = 16


@cache
def replay_setup() -> EngineSetup:
    """Llama-3.1-8B on an H100 at 131,072 tokens of context, planned for 8,192-token prompts."""
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=131072)
    s = engine_setup_from_plan(plan(dep, request=RequestShape(8192, 256)))
    assert s.block_size == BS
    return s


@pytest.fixture(scope="module")
def setup() -> EngineSetup:
    """:func:`replay_setup` as a fixture (import it as ``setup as setup``)."""
    return replay_setup()


def direct_unbounded_hit_rate() -> float:
    """The sample's hit rate counted straight off its ``hash_ids`` with an unbounded cache (the
    upper bound): every id seen before is cached; a hit of ``h`` leading ids is one of
    ``min(512 h, prompt) // 16`` blocks, at most ``(prompt - 1) // 16`` (the last token computed)."""
    trace = load_trace(SAMPLE)
    seen: set[int] = set()
    hit = total = 0
    for i in range(len(trace)):
        ids, prompt = trace.hashes_of(i).tolist(), int(trace.prompt_tokens[i])
        h = leading_hits(ids, seen)
        hit += min(min(h * 512, prompt) // BS, (prompt - 1) // BS) * BS
        total += prompt
        seen.update(ids)
    return hit / total


def replay_fleet(setup: EngineSetup, replicas: int = 1, router: str = "round-robin") -> FleetSpec:
    """One pool of ``replicas`` of ``setup``, started at once, behind ``router``."""
    return FleetSpec((Pool("p", setup, replicas=replicas, cold_start=INSTANT),), router=router)


def sessions(n: int, rate_per_s: float, seed: int) -> RequestArrays:
    """Multi-turn sessions on 4 shared system prompts (the benchmark's shape, small)."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[float, list[int]]] = []
    next_id = 100
    t = 0.0
    while len(rows) < n:
        t += float(rng.exponential(5.0 / rate_per_s))
        ctx = [int(rng.integers(0, 4))]
        turn_t = t
        for _ in range(int(rng.geometric(0.2))):
            new = int(rng.integers(1, 4))
            ctx = [*ctx, *range(next_id, next_id + new)]
            next_id += new
            rows.append((turn_t, ctx))
            turn_t += float(rng.exponential(10.0))
    rows.sort(key=lambda r: r[0])
    rows = rows[:n]
    lens = np.array([len(r[1]) for r in rows], dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return RequestArrays(
        arrival_s=np.array([r[0] for r in rows]),
        prompt_tokens=lens * 512 - rng.integers(0, 512, n),
        output_tokens=np.clip(rng.lognormal(np.log(100), 0.6, n), 1, 600).astype(np.int64),
        prefix_group=np.full(n, -1, dtype=np.int64),
        prefix_tokens=np.zeros(n, dtype=np.int64),
        hash_ids=np.array([x for r in rows for x in r[1]], dtype=np.int64),
        hash_offsets=offsets,
        trace_block_tokens=512,
    )


def admit_all(core: CacheReplay, arrays: RequestArrays, block_size: int) -> list[float]:
    """Give ``arrays`` to the replay's ``core`` in one chunk (its runs of ``block_size`` blocks);
    returns what the core writes out."""
    offsets, keys, ends = chunk_runs(arrays, block_size)
    out: list[float] = []
    core.admit_chunk(
        arrays.arrival_s.tolist(),
        arrays.prompt_tokens.tolist(),
        arrays.output_tokens.tolist(),
        offsets.tolist(),
        keys.tolist(),
        ends.tolist(),
        out,
    )
    return out
