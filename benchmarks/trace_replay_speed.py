"""Replay speed of a Mooncake-like block-hash trace on a fleet routed by the blocks replicas hold.

The trace is synthetic and made in memory (seeded): sessions that start with one of a few
shared system prompts (Zipf popularity, 1-3 trace blocks of 512 tokens) and resend their whole
context each turn plus 1-4 new blocks (the user's turn and the previous answer), as the
Mooncake FAST'25 conversation trace does (its head is shipped in
``src/servecap/workload/data/mooncake_conversation_head.jsonl``: a shared block 0, ~7k-token
prompts); prompts end inside their last block, answers are log-normal (median ~300 tokens).

Part 1, the same requests in the same process, each printing simulated requests per CPU-second
(``time.process_time``), the hit rate and the peak RSS:

1. the full simulation (``simulate_fleet``), block hashes as key runs (one run per 512-token
   trace block: what the simulator does);
2. reference: the same hashes as one key per 16-token engine block (the cost structure before
   runs; same hits, asserted);
3. reference: the hashes dropped (no prefix caching work at all);
4. the cache-replay fidelity (``servecap.fleet.cache_replay_run.cache_replay``: per-request
   cache, routing and queue bookkeeping, latencies from the step model; docs/workload.md), with
   its speed and hit rate against run 1.

Part 2: cache replays of ``--stream-lengths`` requests drawn as a stream (:func:`mooncake_stream`:
the sessions in progress are its only state), each length in its own process, printing its
speed (the replay's CPU time, the drawing of the synthetic trace counted apart), hit rate, p99
TTFT, the most run keys cached at once and the process's peak RSS: equal at both lengths when
memory is bounded by the caches, not by the trace.

    .venv/bin/python benchmarks/trace_replay_speed.py [--requests 20000] [--replicas 32]
        [--rate-per-replica 2.0] [--seed 0] [--router precise-prefix] [--skip-per-block]
        [--skip-engine] [--stream-lengths 250000,1000000] [--profile]
    .venv/bin/python benchmarks/trace_replay_speed.py --trace mooncake_trace.jsonl [--replicas 32]

KV tiers below GPU memory (``--cpu-kv-gib``, ``--ssd-kv-gib`` per replica, ``--remote-kv-tib`` for
the fleet's shared store; the CLI's flags, the cited default bandwidths of
:mod:`servecap.core.kv_tiers`) are given to every run; the cache replays then print the per-tier
shares of the prompt tokens (gpu, cpu, ssd, remote) and the tiers' blocks held against their
capacities at the end (part 2: memory bounded by the tiers' capacities, not by the trace).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import heapq
import pstats
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import servecap.fleet.cache_replay as cache_replay_core
from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.kv_tiers import KvTier, default_tier
from servecap.core.plan import plan
from servecap.fleet import INSTANT, FleetSpec, Pool, simulate_fleet
from servecap.fleet.cache_replay_run import CacheReplayResult, cache_replay
from servecap.fleet.stream_source import chunked
from servecap.sim import EngineSetup, engine, engine_setup_from_plan
from servecap.specs import RequestShape
from servecap.workload import RequestArrays
from servecap.workload import block_hash as bh
from servecap.workload.trace_stream import iter_trace_chunks

TRACE_BLOCK_TOKENS = 512  # Mooncake FAST'25 README: "The block size is 512 tokens."


def mooncake_like(n: int, rate_per_s: float, rng: np.random.Generator, max_blocks: int = 128) -> RequestArrays:
    """``n`` requests of multi-turn sessions with shared system prompts, as block hashes."""
    n_sys = 8
    sys_len = rng.integers(1, 4, n_sys)
    sys_ids = [list(range(i * 4, i * 4 + int(sys_len[i]))) for i in range(n_sys)]
    zipf = 1.0 / np.arange(1, n_sys + 1)
    zipf /= zipf.sum()
    next_id = n_sys * 4
    arrivals: list[float] = []
    ids_of: list[list[int]] = []
    t = 0.0
    session_rate = rate_per_s / 5.0  # about 5 turns a session
    while len(ids_of) < n:
        t += float(rng.exponential(1.0 / session_rate))
        ctx = list(sys_ids[int(rng.choice(n_sys, p=zipf))])
        turn_t = t
        for _ in range(int(rng.geometric(0.2))):
            new = int(rng.integers(1, 5))
            ctx = ctx + list(range(next_id, next_id + new))
            next_id += new
            if len(ctx) > max_blocks:
                break
            arrivals.append(turn_t)
            ids_of.append(ctx)
            turn_t += float(rng.exponential(20.0))  # the user reads and types
    order = np.argsort(np.asarray(arrivals), kind="stable")[:n]
    rows = [ids_of[i] for i in order]
    lens = np.array([len(r) for r in rows], dtype=np.int64)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    prompt = lens * TRACE_BLOCK_TOKENS - rng.integers(0, TRACE_BLOCK_TOKENS, len(rows))
    output = np.clip(rng.lognormal(np.log(300), 0.8, len(rows)), 1, 2000).astype(np.int64)
    none = np.full(len(rows), -1, dtype=np.int64)
    return RequestArrays(
        arrival_s=np.asarray(arrivals, dtype=np.float64)[order],
        prompt_tokens=prompt.astype(np.int64),
        output_tokens=output,
        prefix_group=none,
        prefix_tokens=np.zeros(len(rows), dtype=np.int64),
        hash_ids=np.fromiter((x for r in rows for x in r), dtype=np.int64, count=int(offsets[-1])),
        hash_offsets=offsets,
        trace_block_tokens=TRACE_BLOCK_TOKENS,
    )


def mooncake_stream(
    n: int, rate_per_s: float, rng: np.random.Generator, chunk: int = 8192, max_blocks: int = 128
) -> Iterator[RequestArrays]:
    """:func:`mooncake_like`'s sessions drawn as a stream in arrival order, ``chunk`` requests at a
    time: the sessions in progress are its only state (a 1M-request trace never in memory)."""
    n_sys = 8
    sys_len = rng.integers(1, 4, n_sys)
    sys_ids = [list(range(i * 4, i * 4 + int(sys_len[i]))) for i in range(n_sys)]
    zipf = 1.0 / np.arange(1, n_sys + 1)
    zipf /= zipf.sum()
    next_id = n_sys * 4
    session_rate = rate_per_s / 5.0  # about 5 turns a session
    pending: list[tuple[float, int, list[int], int]] = []  # (turn time, session, context, turns left)
    t_next_session = float(rng.exponential(1.0 / session_rate))
    sid = 0
    made = 0
    while made < n:
        arrivals: list[float] = []
        rows: list[list[int]] = []
        while len(rows) < min(chunk, n - made):
            if not pending or t_next_session <= pending[0][0]:
                ctx0 = list(sys_ids[int(rng.choice(n_sys, p=zipf))])
                heapq.heappush(pending, (t_next_session, sid, ctx0, int(rng.geometric(0.2))))
                sid += 1
                t_next_session += float(rng.exponential(1.0 / session_rate))
                continue
            t, s, ctx, left = heapq.heappop(pending)
            new = int(rng.integers(1, 5))
            ctx = ctx + list(range(next_id, next_id + new))
            next_id += new
            if len(ctx) > max_blocks:
                continue
            arrivals.append(t)
            rows.append(ctx)
            if left > 1:
                heapq.heappush(pending, (t + float(rng.exponential(20.0)), s, ctx, left - 1))
        made += len(rows)
        yield _arrays(arrivals, rows, rng)


def _arrays(arrivals: list[float], rows: list[list[int]], rng: np.random.Generator) -> RequestArrays:
    lens = np.array([len(r) for r in rows], dtype=np.int64)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    prompt = lens * TRACE_BLOCK_TOKENS - rng.integers(0, TRACE_BLOCK_TOKENS, len(rows))
    output = np.clip(rng.lognormal(np.log(300), 0.8, len(rows)), 1, 2000).astype(np.int64)
    none = np.full(len(rows), -1, dtype=np.int64)
    return RequestArrays(
        arrival_s=np.asarray(arrivals, dtype=np.float64),
        prompt_tokens=prompt.astype(np.int64),
        output_tokens=output,
        prefix_group=none,
        prefix_tokens=np.zeros(len(rows), dtype=np.int64),
        hash_ids=np.fromiter((x for r in rows for x in r), dtype=np.int64, count=int(offsets[-1])),
        hash_offsets=offsets,
        trace_block_tokens=TRACE_BLOCK_TOKENS,
    )


@contextmanager
def per_engine_block() -> Iterator[None]:
    """Hashes keyed one run per engine block (the per-block cost, same cached blocks)."""
    runs = bh.HashBlocks.runs

    def unit(self: bh.HashBlocks, block_size: int, prompt_tokens: int) -> bh.KeyRuns | None:
        keys = self.keys(block_size, prompt_tokens)
        return bh.KeyRuns.unit(keys) if keys else None

    bh.HashBlocks.runs = unit  # type: ignore[method-assign]
    try:
        yield
    finally:
        bh.HashBlocks.runs = runs  # type: ignore[method-assign]


def _setup(args: argparse.Namespace) -> EngineSetup:
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=131072)
    tiers: list[KvTier] = []
    for name, size, unit in (
        ("cpu", args.cpu_kv_gib, 2**30),
        ("ssd", args.ssd_kv_gib, 2**30),
        ("remote", args.remote_kv_tib, 2**40),
    ):
        if size:
            tiers.append(default_tier(name, size * unit))
    return engine_setup_from_plan(plan(dep, request=RequestShape(8192, 256)), kv_tiers=tuple(tiers))


def _tier_text(res: CacheReplayResult) -> str:
    """``; tiers gpu 60.1%, cpu 5.2%, ...; held/capacity cpu 2.1M/2.1M ...`` ('' without tiers)."""
    hits = res.kv_tier_hit_tokens
    if hits is None:
        return ""
    q = res.prefix_cache_query_tokens or 1
    shares = ", ".join(f"{name} {n / q:.2%}" for name, n in hits.items())
    held: dict[str, list[int]] = {}
    for name, n, cap in res.kv_tier_occupancy:
        held.setdefault(name, [0, 0])
        held[name][0] += n
        held[name][1] += cap
    occ = ", ".join(f"{name} {n:,}/{cap:,}" for name, (n, cap) in held.items())
    assert all(n <= cap for _, n, cap in res.kv_tier_occupancy)
    return f"; prompt tokens found: {shares}; tier blocks held/capacity (all replicas): {occ}"


def _peak_rss_mb() -> float:
    """This process's peak resident set (``VmHWM``: reset by ``exec``, unlike ``ru_maxrss``,
    which a child started by the benchmark inherits from it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Timed:
    """A chunk stream whose own CPU time (drawing the synthetic trace) is counted apart."""

    def __init__(self, chunks: Iterator[RequestArrays]) -> None:
        self.chunks = chunks
        self.cpu_s = 0.0

    def __iter__(self) -> Iterator[RequestArrays]:
        while True:
            t0 = time.process_time()
            chunk = next(self.chunks, None)
            self.cpu_s += time.process_time() - t0
            if chunk is None:
                return
            yield chunk


def stream_child(args: argparse.Namespace) -> None:
    """One cache replay of ``--child-stream`` requests drawn as a stream; one line of figures."""
    setup = _setup(args)
    fleet = FleetSpec((Pool("h100", setup, replicas=args.replicas, cold_start=INSTANT),), router=args.router)
    rss0 = _peak_rss_mb()
    n = args.child_stream
    chunks = _Timed(mooncake_stream(n, args.rate_per_replica * args.replicas, np.random.default_rng(args.seed)))
    t0 = time.process_time()
    res = cache_replay(fleet, chunks)
    cpu = time.process_time() - t0 - chunks.cpu_s
    assert res.requests == n, (res.requests, n)
    print(
        f"{n:>10,} requests: {n / cpu:>8,.0f} simulated req/s per CPU-second ({cpu:,.1f} CPU s replay + "
        f"{chunks.cpu_s:,.1f} CPU s drawing the trace), hit rate {res.prefix_cache_hit_rate or 0.0:.2%}, p99 TTFT "
        f"{(res.ttft_s.p99 or 0.0) * 1e3:,.0f} ms, cached runs at most {res.peak_index_keys:,}, peak RSS "
        f"{_peak_rss_mb():,.0f} MB (after set-up {rss0:,.0f} MB){_tier_text(res)}",
        flush=True,
    )


def trace_file(args: argparse.Namespace) -> None:
    """A trace file on disk replayed with the cache replay, read as a stream (reading counted in)."""
    setup = _setup(args)
    fleet = FleetSpec((Pool("h100", setup, replicas=args.replicas, cold_start=INSTANT),), router=args.router)
    t0 = time.process_time()
    res = cache_replay(fleet, iter_trace_chunks(args.trace))
    cpu = time.process_time() - t0
    print(
        f"{args.trace.name}: {res.requests:,} requests, {res.requests / cpu:,.0f} simulated req/s per CPU-second "
        f"(reading and replay, {cpu:,.1f} CPU s), hit rate {res.prefix_cache_hit_rate or 0.0:.2%}, p99 TTFT "
        f"{(res.ttft_s.p99 or 0.0) * 1e3:,.0f} ms, peak RSS {_peak_rss_mb():,.0f} MB{_tier_text(res)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--replicas", type=int, default=32)
    ap.add_argument("--rate-per-replica", type=float, default=2.0)
    ap.add_argument("--router", default="precise-prefix")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-per-block", action="store_true", help="leave out reference 2 (the slowest)")
    ap.add_argument("--skip-engine", action="store_true", help="leave out the full simulations (part 1)")
    ap.add_argument("--profile", action="store_true", help="cProfile the key-run replay (top 15 by own time)")
    ap.add_argument(
        "--stream-lengths",
        default="250000,1000000",
        help="part 2: cache replays of these many streamed requests, each in its own process ('': none)",
    )
    ap.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="replay this mooncake JSONL file (time-ordered) with the cache replay, read chunk by chunk, and stop",
    )
    ap.add_argument("--cpu-kv-gib", type=float, default=0.0, help="a CPU DRAM KV tier per replica (GiB; 0: none)")
    ap.add_argument("--ssd-kv-gib", type=float, default=0.0, help="a local SSD KV tier per replica (GiB; 0: none)")
    ap.add_argument("--remote-kv-tib", type=float, default=0.0, help="the fleet's shared KV store (TiB; 0: none)")
    ap.add_argument("--child-stream", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_stream:
        stream_child(args)
        return
    if args.trace is not None:
        trace_file(args)
        return

    setup = _setup(args)
    compiled = not engine.__file__.endswith(".py")
    print(f"simulator engine: {'compiled by mypyc' if compiled else 'pure Python'}", end="")
    if hasattr(cache_replay_core, "__file__"):
        print(f"; cache replay: {'pure Python' if cache_replay_core.__file__.endswith('.py') else 'compiled'}")
    t0 = time.process_time()
    arrays = mooncake_like(args.requests, args.rate_per_replica * args.replicas, np.random.default_rng(args.seed))
    mb = (arrays.hash_ids.nbytes + arrays.hash_offsets.nbytes) / 2**20
    print(
        f"trace: {len(arrays):,} requests, {len(arrays.hash_ids):,} hash ids ({mb:,.1f} MB), mean prompt "
        f"{arrays.prompt_tokens.mean():,.0f} tokens, made in {time.process_time() - t0:.1f} CPU s; "
        f"{args.replicas} replicas x {setup.num_gpu_blocks:,} KV blocks, router {args.router}"
    )
    rates: dict[str, float] = {}
    hit_rates: dict[str, float] = {}
    first = "key runs (per trace block)"
    if not args.skip_engine:
        print("part 1: the full simulation (fidelity engine) and the cache replay, same requests")
        _engine_runs(args, setup, arrays, rates, hit_rates)
    fleet = FleetSpec((Pool("h100", setup, replicas=args.replicas, cold_start=INSTANT),), router=args.router)
    prof = cProfile.Profile() if args.profile else None
    t0 = time.process_time()
    fast = cache_replay(fleet, chunked(arrays)) if prof is None else prof.runcall(cache_replay, fleet, chunked(arrays))
    cpu = time.process_time() - t0
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    rates["cache replay"] = len(arrays) / cpu
    print(
        f"{'cache replay (fidelity cache-replay)':>34}: {len(arrays) / cpu:>8,.0f} simulated req/s per CPU-second "
        f"({cpu:,.1f} CPU s), hit rate {fast.prefix_cache_hit_rate or 0.0:.2%}, p50/p99 TTFT "
        f"{(fast.ttft_s.p50 or 0.0) * 1e3:,.0f}/{(fast.ttft_s.p99 or 0.0) * 1e3:,.0f} ms, p50 TPOT "
        f"{(fast.tpot_s.p50 or 0.0) * 1e3:,.1f} ms{_tier_text(fast)}"
    )
    if first in rates:
        print(
            f"cache replay / full simulation: {rates['cache replay'] / rates[first]:.1f}x the speed, hit rate "
            f"{(fast.prefix_cache_hit_rate or 0.0) - hit_rates[first]:+.2%} (points)"
        )
    lengths = [int(x) for x in args.stream_lengths.split(",") if x.strip()]
    if lengths:
        print(
            f"part 2: cache replays of a streamed trace ({args.replicas} replicas, {args.router}), each length in "
            "its own process: the peak RSS does not grow with the length"
        )
    for n in lengths:
        cmd = [sys.executable, __file__, "--child-stream", str(n), "--replicas", str(args.replicas)]
        cmd += ["--rate-per-replica", str(args.rate_per_replica), "--router", args.router, "--seed", str(args.seed)]
        cmd += ["--cpu-kv-gib", str(args.cpu_kv_gib), "--ssd-kv-gib", str(args.ssd_kv_gib)]
        cmd += ["--remote-kv-tib", str(args.remote_kv_tib)]
        subprocess.run(cmd, check=True)


def _engine_runs(
    args: argparse.Namespace,
    setup: EngineSetup,
    arrays: RequestArrays,
    rates: dict[str, float],
    hit_rates: dict[str, float],
) -> None:
    empty = np.zeros(0, dtype=np.int64)
    first = "key runs (per trace block)"
    runs: list[tuple[str, RequestArrays, bool]] = [(first, arrays, False)]
    if not args.skip_per_block:
        runs.append(("reference: key per engine block", arrays, True))
    runs.append(("reference: no hashes", dataclasses.replace(arrays, hash_ids=empty, hash_offsets=empty), False))
    for label, a, unit in runs:
        fleet = FleetSpec((Pool("h100", setup, replicas=args.replicas, cold_start=INSTANT),), router=args.router)
        prof = cProfile.Profile() if args.profile and not unit and a is arrays else None
        t0 = time.process_time()
        if unit:
            with per_engine_block():
                res = simulate_fleet(fleet, a, args.seed)
        elif prof is not None:
            res = prof.runcall(simulate_fleet, fleet, a, args.seed)
        else:
            res = simulate_fleet(fleet, a, args.seed)
        cpu = time.process_time() - t0
        s = res.summary
        rates[label] = len(a) / cpu
        hit_rates[label] = s.prefix_cache_hit_rate or 0.0
        print(
            f"{label:>34}: {len(a) / cpu:>8,.0f} simulated req/s per CPU-second ({cpu:,.1f} CPU s; 1M requests: "
            f"{cpu * 1e6 / len(a) / 60:,.0f} CPU min), hit rate {hit_rates[label]:.2%}, p99 TTFT "
            f"{(s.ttft_s.p99 or 0.0) * 1e3:,.0f} ms, peak RSS so far "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB"
        )
        if prof is not None:
            pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    if "reference: key per engine block" in rates:
        ref = "reference: key per engine block"
        assert hit_rates[first] == hit_rates[ref], (hit_rates[first], hit_rates[ref])
        print(f"key runs / key per engine block: {rates[first] / rates[ref]:.2f}x (same hit rate)")
    print(f"{first} / no hashes: {rates[first] / rates['reference: no hashes']:.2f}x")


if __name__ == "__main__":
    main()
