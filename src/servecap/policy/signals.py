"""The autoscaling signals, computed once for the simulated fleet and the live monitor.

:func:`signal_value` reads a pool's replicas through the narrow
:class:`~servecap.policy.view.ReplicaView` (the fleet's engines, or the monitor's scraped
``/metrics``) plus what only the caller knows: the requests waiting in front of the pool for a
ready replica (the fleet's router queue; 0 for a live monitor, which cannot see it) and the
pool's p99 TTFT or ITL over its window (asked for only when the signal is ``p99_ttft_s`` or
``p99_itl_s``).

- ``num_requests_waiting``: the sum of the ready replicas' waiting requests, plus ``pending``
  (vLLM's ``vllm:num_requests_waiting``, the gauge KEDA scales vLLM on);
- ``inflight``: the sum of running + waiting, plus ``pending`` (Ray Serve's ongoing requests);
- ``kv_usage``: the mean KV usage of the ready replicas (1.0 when none is ready and work waits);
- ``p99_ttft_s``: the p99 TTFT over the window (0 when no first token came in it);
- ``p99_itl_s``: the p99 inter-token latency over the window (0 when no request finished in
  it) — the signal NVIDIA Dynamo's planner scales decode workers on. The live monitor reads
  vLLM's ``vllm:inter_token_latency_seconds`` histogram (every gap between two tokens); the
  fleet simulator takes each request that finished in the window at its mean gap,
  ``(last token - first token) / (output tokens - 1)`` (its TPOT), which under steady decode
  batches is the same figure.

Queue, KV usage, TTFT and ITL are the four a P/D fleet's pools scale on (one autoscaler per
pool: a prefill pool on its queue or TTFT, a decode pool on its KV usage or ITL).

The additive signals (:data:`ADDITIVE_SIGNALS`) are fleet sums; an autoscaler divides by the
replica count where it wants a per-replica value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from servecap.policy.view import ReplicaView

SIGNALS: tuple[str, ...] = ("num_requests_waiting", "inflight", "kv_usage", "p99_ttft_s", "p99_itl_s")
WINDOWED_SIGNALS: tuple[str, ...] = ("p99_ttft_s", "p99_itl_s")  # over the autoscaler's ``window_s``
ADDITIVE_SIGNALS: tuple[str, ...] = ("num_requests_waiting", "inflight")


def signal_value(
    name: str,
    replicas: Iterable[ReplicaView],
    p99_ttft_s: Callable[[], float | None],
    pending: int = 0,
    p99_itl_s: Callable[[], float | None] | None = None,
) -> float | None:
    """The value of signal ``name`` over the ready ``replicas``; ``None`` when it cannot be told
    yet (``p99_ttft_s`` or ``p99_itl_s`` answered ``None``: a live monitor before its first
    window; a caller that gives no ``p99_itl_s`` cannot tell the ITL)."""
    live = [r for r in replicas if r.is_ready]
    if name == "num_requests_waiting":
        return float(sum(r.num_waiting for r in live) + pending)
    if name == "inflight":
        return float(sum(r.num_waiting + r.num_running for r in live) + pending)
    if name == "kv_usage":
        if live:
            return sum(r.kv_usage for r in live) / len(live)
        return 1.0 if pending else 0.0
    if name == "p99_itl_s":
        return None if p99_itl_s is None else p99_itl_s()
    return p99_ttft_s()
