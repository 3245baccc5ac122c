"""Self-checks that refuse to let a run report silently wrong numbers.

Each check returns a :class:`Check` (name, ok, measured value, limit, message):

- **rate**: achieved vs target request rate. Target = the schedule's own rate,
  ``(n - 1) / (last scheduled - first scheduled)`` (so Poisson noise is not counted as error);
  achieved = the same over actual send times. Fails beyond ``rate_tolerance`` (default 5%).
- **dispatch_lag**: how far behind its schedule the client sent requests (``sent - scheduled``),
  p99 against ``lag_limit_s`` (default 10 ms). A lagging client under-loads the server and
  hides queueing (coordinated omission).
- **littles_law**: L = λW (Little 1961). L is the client's time-averaged number of requests in
  flight, integrated live from its in-flight counter; λW is computed from the stored records
  (completed+failed per second x mean time in system). They must agree within 5%: a mismatch
  means lost or double-counted records, or timestamps on two clocks.
- **prefix_cache**: prompt tokens the server reports as cached (``usage.prompt_tokens_details.
  cached_tokens``) beyond what the workload itself shares (a request's shared-prefix tokens;
  the whole prompt for a chat turn after the first, which resends the conversation). Prompts
  carry a per-run nonce, so any more than ``tolerance`` (default 5%) of the run's prompt
  tokens means the server's cache was primed by another run or client: the TTFTs are lower
  than fresh prompts would get.
- **client_bottleneck**: the client's event loop was late (p99 lateness of a 5 ms timer above
  ``loop_lag_limit_s``, default 5 ms) or its process used more than 90% of a core: the timings
  measure the client, not the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from servecap.measure.loadgen import ClientStats
from servecap.measure.trace import ClientTrace
from servecap.results.stats import percentile


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    value: float | None
    limit: float | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def rate_check(traces: Sequence[ClientTrace], tolerance: float = 0.05) -> Check:
    sched = sorted(t.scheduled_s for t in traces)
    sent = sorted(t.sent_s for t in traces if t.sent_s is not None)
    if len(sched) < 3 or len(sent) < 3 or sched[-1] <= sched[0]:
        return Check("rate", True, None, tolerance, "too few requests to compare rates")
    target = (len(sched) - 1) / (sched[-1] - sched[0])
    achieved = (len(sent) - 1) / (sent[-1] - sent[0]) if sent[-1] > sent[0] else float("inf")
    err = achieved / target - 1.0
    ok = abs(err) <= tolerance and len(sent) == len(sched)
    # the schedule's own rate, not the requested one: Poisson draws of --rate 10 may schedule
    # 10.05 req/s, which the client should send (issue 20: "target 10.05 req/s" read as a bug)
    msg = f"achieved {achieved:.2f} req/s vs {target:.2f} req/s as scheduled ({err:+.2%})"
    if len(sent) != len(sched):
        msg += f"; {len(sched) - len(sent)} requests never sent"
    return Check("rate", ok, achieved, target, msg)


def lag_check(traces: Sequence[ClientTrace], limit_s: float = 0.010) -> Check:
    lags = [t.sent_s - t.scheduled_s for t in traces if t.sent_s is not None]
    if not lags:
        return Check("dispatch_lag", True, None, limit_s, "no requests sent")
    p99 = percentile(lags, 99)
    ok = p99 <= limit_s
    msg = f"dispatch lag p50 {percentile(lags, 50) * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms, max {max(lags) * 1e3:.2f} ms"
    if not ok:
        msg += ": the client fell behind its schedule (the server saw less load than intended)"
    return Check("dispatch_lag", ok, p99, limit_s, msg)


def littles_law_check(
    traces: Sequence[ClientTrace], client: ClientStats, wall_s: float, tolerance: float = 0.05
) -> Check:
    done = [t for t in traces if t.sent_s is not None and t.end_s is not None]
    if not done or wall_s <= 0:
        return Check("littles_law", True, None, tolerance, "no completed requests")
    lam = len(done) / wall_s
    w = sum(t.end_s - t.sent_s for t in done if t.end_s is not None and t.sent_s is not None) / len(done)
    l_live = client.in_flight_area / wall_s
    lw = lam * w
    err = (l_live - lw) / lw if lw > 0 else 0.0
    ok = abs(err) <= tolerance
    msg = f"L (live) {l_live:.3f} vs λW (records) {lw:.3f} ({err:+.2%})"
    if not ok:
        msg += ": records and live counts disagree (lost records or clock trouble)"
    return Check("littles_law", ok, l_live, lw, msg)


def client_check(client: ClientStats, loop_lag_limit_s: float = 0.005, cpu_limit: float = 0.9) -> Check:
    busy = client.loop_lag_p99_s > loop_lag_limit_s or client.cpu_fraction > cpu_limit
    msg = (
        f"client event-loop lateness p99 {client.loop_lag_p99_s * 1e3:.2f} ms, CPU {client.cpu_fraction:.0%} of a core"
    )
    if busy:
        msg += ": the client, not the server, may be the bottleneck (timings include client delay)"
    return Check("client_bottleneck", not busy, client.loop_lag_p99_s, loop_lag_limit_s, msg)


def expected_cached_tokens(t: ClientTrace) -> int:
    """The most prompt tokens of ``t`` the workload itself lets a prefix cache hold."""
    if t.turn > 1 or t.hash_ids is not None:  # a later turn, or a trace's shared blocks: any of it
        return t.measured_prompt_tokens
    return t.prefix_tokens if t.prefix_group is not None else 0


def prefix_cache_check(traces: Sequence[ClientTrace], tolerance: float = 0.05) -> Check:
    reported = [t for t in traces if t.cached_prompt_tokens is not None and t.sent_s is not None]
    if not reported:
        return Check(
            "prefix_cache",
            True,
            None,
            tolerance,
            "the server reported no cached-token counts (usage.prompt_tokens_details); hit rate unknown",
        )
    prompt = sum(t.measured_prompt_tokens for t in reported)
    cached = sum(t.cached_prompt_tokens or 0 for t in reported)
    extra = [max(0, (t.cached_prompt_tokens or 0) - expected_cached_tokens(t)) for t in reported]
    unexpected = sum(extra) / prompt if prompt else 0.0
    ok = unexpected <= tolerance
    rate = cached / prompt if prompt else 0.0
    msg = f"prefix-cache hit rate {rate:.1%} ({cached:,} of {prompt:,} prompt tokens cached)"
    if not ok:
        msg += (
            f"; {sum(1 for e in extra if e):,} requests found {sum(extra):,} tokens cached that this run's "
            "workload does not share: another run or client primed the server's cache, so TTFT is lower "
            "than for fresh prompts"
        )
    return Check("prefix_cache", ok, unexpected, tolerance, msg)


def run_checks(traces: Sequence[ClientTrace], client: ClientStats, wall_s: float, *, open_loop: bool) -> list[Check]:
    out = []
    if open_loop:
        out += [rate_check(traces), lag_check(traces)]
    out += [littles_law_check(traces, client, wall_s), prefix_cache_check(traces), client_check(client)]
    return out
