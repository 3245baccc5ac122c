"""One benchmark run end to end: workload -> requests -> load generator -> checks -> summary.

The request stream is :func:`servecap.workload.generate_requests` (open loop) or
:class:`servecap.workload.ClosedLoopUsers` (chat users) with ``numpy.random.default_rng(seed)``
— the same calls ``servecap simulate`` makes, so one spec and seed give the same requests.
``concurrency`` turns an open-loop spec into a closed loop of that many workers (lengths from
the same stream, arrival times ignored).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from servecap.measure.checks import Check, run_checks
from servecap.measure.loadgen import (
    LoadConfig,
    OnDone,
    RunResult,
    run_chat_users,
    run_closed_loop,
    run_open_loop,
)
from servecap.measure.records import error_counts, to_records
from servecap.measure.trace import ClientTrace
from servecap.measure.transport import Transport
from servecap.results import RunSummary, summarize
from servecap.results.measured import MeasuredRequest
from servecap.specs.perf import Slo
from servecap.workload import ClosedLoopUsers, WorkloadSpec, generate_requests


@dataclass(frozen=True, slots=True)
class BenchOutcome:
    result: RunResult
    summary: RunSummary  # the shared schema (as `servecap simulate`), over the kept requests
    checks: list[Check]
    errors: dict[str, int]
    measured_window_s: float

    @property
    def traces(self) -> list[ClientTrace]:
        return self.result.traces

    def requests(self) -> list[MeasuredRequest]:
        """The run's requests as the stored, immutable records."""
        return [t.freeze() for t in self.result.traces]

    @property
    def multi_token_chunk_requests(self) -> int:
        return sum(1 for t in self.result.traces if t.multi_token_chunks)

    @property
    def failed(self) -> int:
        """Requests the server (or the network) failed: errors other than ``interrupted``."""
        return sum(1 for t in self.result.traces if t.error is not None and t.error != "interrupted")

    def first_error(self) -> ClientTrace | None:
        """The first failed request (by send time): its detail holds the server's error body."""
        bad = [t for t in self.result.traces if t.error is not None and t.error != "interrupted"]
        return min(bad, key=lambda t: t.sent_s if t.sent_s is not None else t.scheduled_s, default=None)


def planned_requests(spec: WorkloadSpec, seed: int) -> int | None:
    """How many requests an open-loop run will send (for the progress bar)."""
    if spec.closed_loop:
        return spec.num_requests
    return len(generate_requests(spec, np.random.default_rng(seed)))


def settle_cached_counts(traces: Sequence[ClientTrace]) -> None:
    """A server that reports cached tokens for some requests of a run (the emulator; vLLM with
    ``--enable-prompt-tokens-details``) had none for the completed ones whose usage omits them
    (the emulator leaves ``prompt_tokens_details`` out at 0): those read 0, not unknown."""
    if any(t.cached_prompt_tokens is not None for t in traces):
        for t in traces:
            if t.cached_prompt_tokens is None and t.usage_prompt_tokens is not None:
                t.cached_prompt_tokens = 0


def measured_hit_rate(traces: Sequence[ClientTrace | MeasuredRequest]) -> float | None:
    """Cached prompt tokens / prompt tokens over the requests whose usage reported cached
    tokens (``usage.prompt_tokens_details.cached_tokens``); None when none did."""
    reported = [t for t in traces if t.cached_prompt_tokens is not None]
    prompt = sum(t.measured_prompt_tokens for t in reported)
    if not reported or prompt <= 0:
        return None
    return sum(t.cached_prompt_tokens or 0 for t in reported) / prompt


def summarize_traces(traces: Sequence[ClientTrace], slo: Slo | None) -> tuple[RunSummary, float]:
    """The shared summary over the kept (untrimmed) requests; the window runs from the first
    kept request's scheduled time to the last one's end. The prefix-cache hit rate is the
    server's own count (:func:`measured_hit_rate`)."""
    kept = [t for t in traces if not t.trimmed]
    if not kept:
        return summarize([], duration_s=0.0, slo=slo), 0.0
    start = min(t.scheduled_s for t in kept)
    end = max((t.end_s for t in kept if t.end_s is not None), default=start)
    window = max(end - start, 1e-9)
    s = summarize(to_records(kept), duration_s=window, slo=slo)
    return replace(s, prefix_cache_hit_rate=measured_hit_rate(kept)), window


async def run_bench(
    cfg: LoadConfig,
    spec: WorkloadSpec,
    *,
    seed: int,
    concurrency: int | None = None,
    slo: Slo | None = None,
    transport: Transport | None = None,
    on_done: OnDone | None = None,
) -> BenchOutcome:
    rng = np.random.default_rng(seed)
    if spec.closed_loop:
        users = ClosedLoopUsers(spec, rng)
        result = await run_chat_users(cfg, users, transport=transport, on_done=on_done)
    else:
        requests = generate_requests(spec, rng)
        if concurrency is not None:
            result = await run_closed_loop(
                cfg, requests, concurrency, duration_s=spec.duration_s, transport=transport, on_done=on_done
            )
        else:
            result = await run_open_loop(cfg, requests, transport=transport, on_done=on_done)
    settle_cached_counts(result.traces)
    summary, window = summarize_traces(result.traces, slo)
    checks = run_checks(result.traces, result.client, result.wall_duration_s, open_loop=result.mode == "open")
    return BenchOutcome(result, summary, checks, error_counts(result.traces), window)
