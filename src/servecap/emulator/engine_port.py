"""What the emulator's driver calls on an engine, typed: :class:`EmulatedEngine`.

Two engines have it: the simulator's (:class:`servecap.emulator.server.SimEngineAdapter` over
:class:`servecap.sim.Engine`, stepped back to back) and the fixed-latency reference
(:class:`servecap.emulator.fixed.FixedDelayEngine`, event-driven: it says when its next token is
due and the driver sleeps until then). Every method is required; an engine without a prefix
cache, or that schedules every request on arrival, answers with empty mappings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

PrefixKey = Sequence[int] | None
"""The keys of a request's shareable KV blocks, in order (None: none); see
:class:`servecap.sim.engine_types.EngineRequest`."""


class EmulatedStep(Protocol):
    """One step's outcome as the driver reads it: its tokens come ``duration_s`` after it began.
    ``decoded`` may list the ``first_tokens`` ids again (the driver counts each token once)."""

    @property
    def duration_s(self) -> float: ...

    @property
    def first_tokens(self) -> Sequence[int]: ...

    @property
    def decoded(self) -> Sequence[int]: ...

    @property
    def finished(self) -> Sequence[int]: ...

    @property
    def preempted(self) -> Sequence[int]: ...


class EngineGauges(Protocol):
    """The engine's counters the driver exports (``vllm:num_requests_running`` and the rest)."""

    @property
    def num_running(self) -> int: ...

    @property
    def num_waiting(self) -> int: ...

    @property
    def kv_blocks_used(self) -> int: ...

    @property
    def kv_blocks_total(self) -> int: ...

    @property
    def prefix_cache_hit_tokens(self) -> int: ...

    @property
    def prefix_cache_query_tokens(self) -> int: ...


class EmulatedEngine(Protocol):
    """An engine the driver steps in real time."""

    def add(self, request_id: int, prompt_tokens: int, output_tokens: int, prefix_key: PrefixKey, now_s: float) -> bool:
        """Admit a request at engine time ``now_s``; False when the engine refuses it (its
        waiting queue is full)."""
        ...

    def add_transferred(self, request_id: int, prompt_tokens: int, output_tokens: int, now_s: float) -> bool:
        """Admit a request whose prompt's KV came from a prefill server (disaggregated
        serving, :mod:`servecap.emulator.pd`); False when refused."""
        ...

    def has_work(self) -> bool: ...

    def step(self, now_s: float) -> EmulatedStep:
        """Run the step that begins at ``now_s``."""
        ...

    def next_event_s(self) -> float | None:
        """When the engine's next token is due, for an engine that times its own tokens (the
        driver sleeps until then, and an arrival wakes it); None, always, for an engine the
        driver steps back to back."""
        ...

    def abort(self, request_id: int) -> bool:
        """Drop a request whose client left, freeing what it holds; False if it is not there."""
        ...

    @property
    def stats(self) -> EngineGauges: ...

    def cached_tokens(self) -> Mapping[int, int]:
        """Prompt tokens found in the prefix cache by each request that finished in the last
        step (``usage.prompt_tokens_details.cached_tokens``)."""
        ...

    def scheduled_times(self) -> Mapping[int, float]:
        """Engine time each request that finished in the last step was first scheduled (the
        queue, prefill and inference histograms); a request left out counts as scheduled on
        arrival."""
        ...
