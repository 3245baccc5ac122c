"""The cache-replay fidelity: a block-hash trace on a fleet, one admission per request.

``cache_replay(fleet, chunks)`` replays a stream of request chunks (in arrival order; a trace
file read chunk by chunk, :func:`servecap.workload.trace_stream.iter_trace_chunks`) on ``fleet``
with the core of :mod:`servecap.fleet.cache_replay`, and folds every request's TTFT, end-to-end
latency and TPOT into the streaming quantile sketches (:class:`servecap.results.sketch.QuantileSketch`)
chunk by chunk: its memory is the replicas' caches and the requests in flight, whatever the
length of the trace. It is called by name (``benchmarks/trace_replay_speed.py`` runs both
fidelities side by side), never in place of the full simulation
(:func:`servecap.fleet.simulate_fleet`), and refuses a fleet it does not model.

What it models exactly (the same rules as the engine and the router):
- each replica's GPU prefix cache at the engine's block size, keyed by the trace's block hashes
  (:func:`servecap.workload.block_hash.engine_block_runs`: the engine's keys, as runs), least
  recently used first out, capacity ``num_gpu_blocks`` logical blocks less the held requests'
  private blocks; hits capped at ``(prompt - 1) // block_size`` blocks as in vLLM;
- the router's choice from those caches and loads: ``precise-prefix`` (the same score as
  :class:`servecap.policy.routers.PrecisePrefix`: prefix share, waiting queue, KV usage, lowest
  index on ties), ``least-outstanding``, ``round-robin``;
- ``max_num_seqs`` and the KV pool as admission limits (a request waits for held ones to end);
- KV tiers below GPU memory (``kv_tiers``: each replica's CPU DRAM and SSD, the fleet's shared
  remote store) by the engine's tier rules, kept by runs (:mod:`servecap.fleet.cache_replay_tiers`):
  GPU evictions demoted, tier hits past the GPU hit promoted and counted per tier, their load
  time in the admitting step, the precise-prefix router's tier-weighted score.

Validated (tests/fleet/test_cache_replay.py): one request at a time, its hit rate equals the
engine's exactly (unbounded and bounded pools); on a small multi-turn trace on 8 replicas with
evictions the stated tolerance holds: hit rate within 3 points of the full simulation's, median
TTFT and TPOT within a factor of 2. What it approximates:
- latency: the prompt's uncached tokens are priced by the engine's step-time model
  (:class:`servecap.sim.step_time.StepTimeModel`) in chunks of the token budget the held
  requests leave, one prompt at a time per replica; each decode step at the batch the request
  joins (held requests plus itself, context at mid-answer), fixed at admission: requests
  admitted later do not slow it down, and its prefill does not stretch the others' steps;
- eviction is per run (a trace block's engine blocks together) and may take a run a held
  request shares (the engine pins those); hits are counted when the request is routed.

What it does not model (refused by name): P/D pools, more than one
pool, autoscaling, failures, the gateway stage, speculative decoding, scheduling policies other
than FCFS, engine profiles other than vLLM, layouts without prefix caching (sliding window,
state), routers other than the three above.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from servecap.errors import ServecapError
from servecap.fleet.cache_replay import ROUTERS, CacheReplay
from servecap.fleet.cache_replay_tiers import TIER_ORDER, ReplayTiers
from servecap.fleet.spec import FleetSpec
from servecap.policy.routers import PrecisePrefix, make_router
from servecap.results.sketch import DEFAULT_RELATIVE_ACCURACY, QuantileSketch
from servecap.results.stats import Percentiles
from servecap.sim.gc_pause import gc_paused
from servecap.sim.setup import prefix_caching_supported
from servecap.sim.step_time import StepTimeModel
from servecap.workload import RequestArrays
from servecap.workload.block_hash import _MIX

SLICE_ROWS = 8192  # rows handed to the core at once (see _replay)


@dataclass(frozen=True, slots=True)
class CacheReplayResult:
    """A cache replay's figures (latencies as sketched percentiles, within ``relative_accuracy``)."""

    requests: int
    prefix_cache_hit_tokens: int
    prefix_cache_query_tokens: int
    ttft_s: Percentiles
    e2e_s: Percentiles
    tpot_s: Percentiles
    requests_per_replica: tuple[int, ...]
    peak_index_keys: int  # run keys some replica cached at once, at most (bounded by capacities)
    horizon_s: float  # when the last request ended
    # prompt tokens found per tier (gpu, cpu, ssd, remote; None: no tiers), as the full simulation
    # names them (RunSummary.kv_tier_hit_tokens), over prefix_cache_query_tokens
    kv_tier_hit_tokens: dict[str, int] | None = None
    kv_tier_load_s: float = 0.0  # loads from the tiers, summed over requests (before overlap)
    # (tier, blocks held, capacity) at the end: every replica's cpu/ssd tier, the shared store
    kv_tier_occupancy: tuple[tuple[str, int, int], ...] = ()

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        q = self.prefix_cache_query_tokens
        return self.prefix_cache_hit_tokens / q if q else None


def cache_replay_refusal(fleet: FleetSpec) -> str | None:
    """Why ``fleet`` cannot be replayed at the cache-replay fidelity (None: it can)."""
    if len(fleet.pools) != 1:
        return "one pool only"
    pool = fleet.pools[0]
    setup = pool.setup
    checks = (
        (pool.role != "both", f"pool role {pool.role!r} (P/D is simulated in full)"),
        (pool.autoscaler is not None, "an autoscaler"),
        (pool.mtbf_s is not None or bool(pool.crash_at_s), "replica failures"),
        (fleet.gateway is not None, "a gateway stage"),
        (bool(setup.spec_acceptance), "speculative decoding"),
        (setup.scheduling_policy != "fcfs", f"scheduling policy {setup.scheduling_policy!r}"),
        (setup.engine != "vllm", f"engine profile {setup.engine!r}"),
        (not prefix_caching_supported(setup.layout), "a KV layout without prefix caching (window or state)"),
        (fleet.router not in ROUTERS, f"router {fleet.router!r} (one of {', '.join(ROUTERS)})"),
        (pool.replicas < 1, "no replicas at the start"),
        (
            setup.kv_tiers is not None and (setup.kv_tiers.async_load or setup.kv_tiers.store_on_compute),
            "KV tiers loaded asynchronously or fed on compute (kv_load async, kv_store on-compute)",
        ),
    )
    for bad, what in checks:
        if bad:
            return f"the cache-replay fidelity does not model {what}; run the full simulation"
    return None


def cache_replay(
    fleet: FleetSpec,
    chunks: Iterable[RequestArrays],
    *,
    relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY,
) -> CacheReplayResult:
    """Replay ``chunks`` (one stream, in arrival order) on ``fleet`` (see the module doc)."""
    reason = cache_replay_refusal(fleet)
    if reason is not None:
        raise ServecapError("fidelity", "cache-replay", reason)
    setup = fleet.pools[0].setup
    # the router's own constructor checks its settings; the replay reads its weights
    router = make_router(fleet.router, random.Random(0), fleet.router_settings)
    weights = (
        (router.prefix_weight, router.queue_weight, router.kv_weight)
        if isinstance(router, PrecisePrefix)
        else (0.0, 0.0, 0.0)
    )
    tier_weights = router.tier_weights[1:] if isinstance(router, PrecisePrefix) else (0.0, 0.0, 0.0)
    model = StepTimeModel(setup.step, setup.efficiency)
    sketches = [QuantileSketch(relative_accuracy) for _ in range(3)]
    with gc_paused():  # no reference cycles on the hot path (servecap.sim.gc_pause)
        core = _replay(fleet, chunks, weights, model, sketches, tier_weights)
    if core is None:
        raise ServecapError("trace", "requests", "no requests to replay")
    tiers = core.tiers
    tier_hits: dict[str, int] | None = None
    if tiers is not None:
        below = tiers.hit_tokens()
        tier_hits = {"gpu": core.hit_tokens, **{n: below[n] for n in TIER_ORDER[1:] if n in below}}
    return CacheReplayResult(
        requests=core.requests,
        prefix_cache_hit_tokens=core.hit_tokens,
        prefix_cache_query_tokens=core.query_tokens,
        ttft_s=sketches[0].percentiles(),
        e2e_s=sketches[1].percentiles(),
        tpot_s=sketches[2].percentiles(),
        requests_per_replica=tuple(r.served for r in core.replicas),
        peak_index_keys=core.peak_index_keys,
        horizon_s=core.last_end_s,
        kv_tier_hit_tokens=tier_hits,
        kv_tier_load_s=tiers.load_s if tiers is not None else 0.0,
        kv_tier_occupancy=tuple(tiers.occupancy()) if tiers is not None else (),
    )


def _replay(
    fleet: FleetSpec,
    chunks: Iterable[RequestArrays],
    weights: tuple[float, float, float],
    model: StepTimeModel,
    sketches: list[QuantileSketch],
    tier_weights: tuple[float, float, float] = (0.8, 0.8, 0.5),
) -> CacheReplay | None:
    """Feed every chunk to one core (made at the first chunk: the trace's block size), its
    latencies to ``sketches``; None: no requests."""
    pool = fleet.pools[0]
    setup = pool.setup
    core: CacheReplay | None = None
    last_s = 0.0
    for chunk in chunks:
        if not len(chunk):
            continue
        arrival = chunk.arrival_s
        if float(arrival[0]) < last_s or (len(arrival) > 1 and bool(np.any(np.diff(arrival) < 0))):
            raise ServecapError("trace", "arrival_s", "the cache replay reads requests in arrival order")
        if not chunk.has_hashes and bool(np.any(chunk.prefix_group >= 0)):
            raise ServecapError(
                "fidelity", "cache-replay", "prefix groups without block hashes: give a block-hash trace"
            )
        last_s = float(arrival[-1])
        if core is None:
            core = CacheReplay(
                pool.replicas,
                setup.num_gpu_blocks // max(1, len(setup.layout.groups)),
                setup.block_size,
                model,
                setup.max_num_seqs,
                setup.max_num_batched_tokens,
                fleet.router,
                *weights,
                setup.enable_prefix_caching,
            )
            if setup.kv_tiers is not None and setup.enable_prefix_caching:
                core.tiers = ReplayTiers(setup.kv_tiers, pool.replicas, setup.block_size, tier_weights)
        offsets, keys, ends = chunk_runs(chunk, setup.block_size)
        # Python lists of SLICE_ROWS rows at a time: a chunk's million run keys as Python ints at
        # once would scatter the few the caches keep over many allocator arenas (a peak RSS that
        # creeps up with the trace)
        for lo in range(0, len(chunk), SLICE_ROWS):
            hi = min(lo + SLICE_ROWS, len(chunk))
            out: list[float] = []
            if len(offsets):
                rows = offsets[lo : hi + 1]
                a, b = int(rows[0]), int(rows[-1])
                runs = ((rows - a).tolist(), keys[a:b].tolist(), ends[a:b].tolist())
            else:
                runs = ([], [], [])
            core.admit_chunk(
                arrival[lo:hi].tolist(),
                chunk.prompt_tokens[lo:hi].tolist(),
                chunk.output_tokens[lo:hi].tolist(),
                *runs,
                out,
            )
            cols = np.asarray(out, dtype=np.float64).reshape(-1, 3)
            for k, sk in enumerate(sketches):
                sk.add_array(cols[:, k])
    return core


def chunk_runs(chunk: RequestArrays, block_size: int) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Every row's :func:`~servecap.workload.block_hash.engine_block_runs` at once (numpy):
    ``(offsets, keys, ends)``, row ``r``'s runs being ``keys[offsets[r]:offsets[r + 1]]`` ending
    at blocks ``ends[...]`` (empty arrays: a chunk without hashes). Trace block ``t`` of a row
    with ``m`` ids and a prompt of ``p`` tokens covers engine blocks ``[min(n, t x T // bs),
    min(n, (t + 1) x T // bs))``, ``n = min(p // bs, m x T // bs)``, keyed ``id x MIX + start``
    modulo 2^64; empty runs are left out (a test pins the rows equal to ``engine_block_runs``)."""
    empty = np.zeros(0, dtype=np.int64)
    if not chunk.has_hashes:
        return empty, empty, empty
    tbt = chunk.trace_block_tokens
    offsets = chunk.hash_offsets
    lens = np.diff(offsets)
    row_of = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    t = np.arange(len(chunk.hash_ids), dtype=np.int64) - offsets[:-1][row_of]
    n = np.minimum(chunk.prompt_tokens // block_size, (lens * tbt) // block_size)[row_of]
    start = np.minimum(n, (t * tbt) // block_size)
    end = np.minimum(n, ((t + 1) * tbt) // block_size)
    with np.errstate(over="ignore"):
        keys = (chunk.hash_ids.astype(np.uint64) * np.uint64(_MIX) + start.astype(np.uint64)).view(np.int64)
    keep = end > start
    kept = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(keep, out=kept[1:])
    return kept[offsets], keys[keep], end[keep]
