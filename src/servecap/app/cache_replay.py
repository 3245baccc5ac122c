"""``fleet simulate --fidelity cache-replay``: a block-hash trace on a one-pool fleet, streamed
through the cache-replay fidelity (:mod:`servecap.fleet.cache_replay_run`: each replica's prefix
cache, the router's choice and the admission limits exactly; latencies from the step model at
admission). It answers hit rates and latency percentiles for traces of millions of requests in
bounded memory, and is asked for by name, never substituted for the full simulation."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from servecap.errors import ServecapError
from servecap.fleet.cache_replay_run import cache_replay, cache_replay_refusal
from servecap.fleet.file_schema import FleetFile, build_fleet
from servecap.fleet.spec import FleetSpec
from servecap.policy.routers import make_router
from servecap.progress import Progress, ProgressFn
from servecap.results.summary import kv_tiers_json
from servecap.sim.setup import EngineSetup, kv_fit_tokens
from servecap.workload import RequestArrays
from servecap.workload.samples import trace_path
from servecap.workload.spec_parts import TraceArrival
from servecap.workload.trace_stream import iter_trace_chunks

NOT_READ = "not read at --fidelity cache-replay (it replays --trace FILE as it is)"
"""What the replay says of a load setting beside the trace (a flag in the CLI, a workload key in
the API): it replays the trace as it is."""

NO_TRACE = "replays a block-hash trace: give --trace FILE"
"""What it says without a trace (the API adds where its trace goes)."""


class CacheReplayResponse(BaseModel):
    """What a cache replay answers (latencies in seconds: p50, p90, p95, p99, mean, max, count)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fidelity: str = "cache-replay"
    router: str
    replicas: int
    requests: int
    prefix_cache_hit_rate: float | None
    prefix_cache_hit_tokens: int
    prefix_cache_query_tokens: int
    ttft_s: dict[str, float | int | None]
    tpot_s: dict[str, float | int | None]
    e2e_s: dict[str, float | int | None]
    requests_per_replica: list[int]
    horizon_s: float
    throughput_req_s: float | None
    peak_index_keys: int
    too_long: int = 0  # requests longer than max_model_len: refused, as the full simulation's too_long
    # per KV tier (gpu, cpu, ssd, remote): prompt tokens found there and their share of the prompt
    # tokens looked up, the full simulation's ``kv_tiers`` (results.summary.kv_tiers_json); None: no tiers
    kv_tiers: dict[str, Any] | None = None
    notes: list[str]


class _Lengths:
    """The replay's length rule, as the full simulation's: a request longer than ``max_model_len``
    is refused (``too_long``: counted, and left out of the caches and the latencies), one whose
    context the whole KV pool cannot hold is an error naming it (a hand-built setup's; the planner
    refuses such a ``max_model_len``). The core has no refused requests: it served both before."""

    def __init__(self, setup: EngineSetup) -> None:
        self.max_len = setup.max_model_len
        self.fit = kv_fit_tokens(setup)
        self.too_long = 0

    def kept(self, chunk: RequestArrays, first: int) -> RequestArrays:
        total = chunk.prompt_tokens + chunk.output_tokens
        long = total > self.max_len
        past_pool = np.flatnonzero(~long & (total - 1 > self.fit))
        if len(past_pool):
            i = int(past_pool[0])
            raise ServecapError(
                "--trace",
                f"request {first + i:,} (0-based, in file order)",
                f"{int(chunk.prompt_tokens[i]):,} prompt + {int(chunk.output_tokens[i]):,} output tokens need a "
                f"context the whole KV pool ({self.fit:,} tokens) cannot hold",
            )
        n = int(long.sum())
        if not n:
            return chunk
        self.too_long += n
        return chunk.take(np.flatnonzero(~long))


def _scaled(
    chunks: Iterator[RequestArrays],
    time_scale: float,
    progress: ProgressFn | None,
    lengths: _Lengths | None = None,
) -> Iterator[RequestArrays]:
    """The chunks with their arrival times multiplied by ``time_scale``, reporting requests read;
    with ``lengths``, the requests it refuses left out."""
    done = 0
    for chunk in chunks:
        read = len(chunk)
        if lengths is not None and read:
            chunk = lengths.kept(chunk, done)
        if time_scale != 1.0:
            chunk = dataclasses.replace(chunk, arrival_s=chunk.arrival_s * time_scale)
        done += read
        if progress is not None and len(chunk):
            progress(Progress(stage="cache replay", done=done, sim_time_s=float(chunk.arrival_s[-1])))
        yield chunk


def _inputs(fleet: FleetFile, trace: TraceArrival, base_dir: Path | None) -> tuple[FleetSpec, list[str], Path]:
    """The fleet built, its notes and the trace's file; raises the first refusal (ServecapError)."""
    if trace.format not in ("auto", "mooncake"):
        raise ServecapError("--trace-format", trace.format, "the cache-replay fidelity reads mooncake block-hash JSONL")
    if trace.start_s != 0.0 or trace.end_s is not None:
        raise ServecapError(
            "--trace-start-s" if trace.start_s != 0.0 else "--trace-end-s",
            trace.start_s if trace.start_s != 0.0 else trace.end_s,
            "a window is not read at the cache-replay fidelity (it streams the file whole); cut the file instead",
        )
    spec, notes = build_fleet(fleet, base_dir)
    reason = cache_replay_refusal(spec)
    if reason is not None:
        raise ServecapError("--fidelity", "cache-replay", reason)
    return spec, notes, trace_path(trace.path, "--trace")


def fleet_cache_replay_refusal(
    fleet: FleetFile,
    trace: TraceArrival | None,
    *,
    unread: Mapping[str, object] | None = None,
    base_dir: Path | None = None,
) -> ServecapError | None:
    """Why :func:`fleet_cache_replay` refuses ``trace`` on ``fleet`` (None: it runs), as the
    one-line error it raises, without replaying a request: a load setting given beside the trace
    (``unread``: its name, as the caller's interface spells it, and its value; None: not given),
    no trace, a format or a window it does not read, a fleet it does not model (P/D, an
    autoscaler, ...), router settings the router refuses, a trace file it cannot open or whose
    first chunk of requests it cannot read (the rest is read as the replay goes). The CLI and the
    API refuse with it before they start."""
    for name, value in (unread or {}).items():
        if value is not None:
            return ServecapError(name, value, NOT_READ)
    if trace is None:
        return ServecapError("--fidelity", "cache-replay", NO_TRACE)
    try:
        spec, _notes, path = _inputs(fleet, trace, base_dir)
        make_router(spec.router, random.Random(0), spec.router_settings)  # its settings' checks
        # the first chunk read (its file closed as the generator is dropped)
        next(iter_trace_chunks(path, trace_block_tokens=trace.trace_block_tokens), None)
    except ServecapError as err:
        return err
    return None


def fleet_cache_replay(
    fleet: FleetFile,
    trace: TraceArrival,
    *,
    base_dir: Path | None = None,
    progress: ProgressFn | None = None,
) -> CacheReplayResponse:
    """Replay ``trace`` (a Mooncake/Bailian block-hash JSONL, read chunk by chunk) on ``fleet`` at
    the cache-replay fidelity. A fleet or trace setting it does not model is refused by name
    (:func:`fleet_cache_replay_refusal` says so before the run)."""
    spec, notes, path = _inputs(fleet, trace, base_dir)
    chunks = iter_trace_chunks(path, trace_block_tokens=trace.trace_block_tokens)
    lengths = _Lengths(spec.pools[0].setup)
    res = cache_replay(spec, _scaled(chunks, trace.time_scale, progress, lengths))
    if lengths.too_long:
        notes.append(
            f"{lengths.too_long:,} requests longer than max_model_len {lengths.max_len:,} refused (too_long) and "
            "left out, as the full simulation does"
        )
    notes = [
        *notes,
        "fidelity cache-replay: prefix caches, routing and admission exact; each request's latency fixed "
        "at admission from the step model (later arrivals do not slow it) -- docs/simulator.md",
    ]
    return CacheReplayResponse(
        router=spec.router,
        replicas=spec.pools[0].replicas,
        requests=res.requests,
        prefix_cache_hit_rate=res.prefix_cache_hit_rate,
        prefix_cache_hit_tokens=res.prefix_cache_hit_tokens,
        prefix_cache_query_tokens=res.prefix_cache_query_tokens,
        ttft_s=res.ttft_s.to_dict(),
        tpot_s=res.tpot_s.to_dict(),
        e2e_s=res.e2e_s.to_dict(),
        requests_per_replica=list(res.requests_per_replica),
        horizon_s=res.horizon_s,
        throughput_req_s=res.requests / res.horizon_s if res.horizon_s > 0 else None,
        peak_index_keys=res.peak_index_keys,
        too_long=lengths.too_long,
        kv_tiers=None
        if res.kv_tier_hit_tokens is None
        else kv_tiers_json(res.kv_tier_hit_tokens, res.prefix_cache_query_tokens),
        notes=notes,
    )
