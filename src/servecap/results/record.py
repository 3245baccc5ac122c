"""One request's outcome, the same record for simulated and measured runs.

All times are seconds on one clock whose zero is the start of the run (the workload's time axis):
``arrival_s`` is when the request was scheduled to arrive, ``sent_s`` when a load generator
actually sent it (``None`` in a simulation, where the two are the same).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """A finished (or failed) request.

    - ``first_token_s`` / ``end_s``: first and last output token (``None`` when it failed first);
    - ``token_times_s``: every output token's time, in order, when recorded (a simulation records
      them only on request: it reports ITL from its step times instead) — the first element, if
      any, equals ``first_token_s``;
    - ``cached_prompt_tokens``: prompt tokens served from the prefix cache;
    - ``queue_time_s``: arrival to first being scheduled (``None`` when unknown, e.g. measured);
    - ``error``: ``None``, or a short kind: ``"rejected"`` (waiting-queue limit), ``"too_long"``,
      ``"http_503"``, ``"timeout"``, ``"broken_stream"``, ...
    """

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    first_token_s: float | None = None
    end_s: float | None = None
    sent_s: float | None = None
    token_times_s: tuple[float, ...] = ()
    cached_prompt_tokens: int = 0
    preemptions: int = 0
    queue_time_s: float | None = None
    error: str | None = None
    user_id: int | None = None
    turn: int = 1

    @property
    def ok(self) -> bool:
        return self.error is None and self.end_s is not None

    @property
    def ttft_s(self) -> float | None:
        """Time to first token, from the scheduled arrival."""
        if self.first_token_s is None:
            return None
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float | None:
        """End-to-end latency: scheduled arrival to last token."""
        if self.end_s is None:
            return None
        return self.end_s - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: ``(end - first) / (output_tokens - 1)``
        (vLLM's benchmark definition); ``None`` for one-token answers."""
        if self.first_token_s is None or self.end_s is None or self.output_tokens < 2:
            return None
        return (self.end_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def itl_s(self) -> tuple[float, ...]:
        """Inter-token latencies from ``token_times_s`` (empty when not recorded)."""
        t = self.token_times_s
        return tuple(t[i + 1] - t[i] for i in range(len(t) - 1))
