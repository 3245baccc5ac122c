"""The engine's public value types: a request handed to it, one step's outcome, its counters.

They live apart from :mod:`servecap.sim.engine` (which re-exports them) because that module may
be compiled by mypyc (see setup.py), and these plain frozen dataclasses must behave the same
either way (pickling, ``dataclasses.replace``, ``__dict__``-less slots); nothing here is hot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """A request handed to the engine.

    ``prefix_key``: keys of the request's shareable KV blocks in order, one per ``block_size``
    tokens of prompt-then-output, each standing for all tokens up to the block's end (vLLM's
    chained block hash); equal keys mean equal content. Build them with
    :func:`servecap.workload.prefix_block_keys`. Blocks past the tuple are private.
    ``priority``: lower is served first under the ``priority`` policy.
    """

    request_id: int
    prompt_tokens: int
    output_tokens: int
    prefix_key: Sequence[int] | None = None
    priority: int = 0


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """One iteration that started at the ``now_s`` given to :meth:`Engine.step`; its tokens are
    emitted at ``now_s + duration_s``. ``decoded`` includes the ``first_tokens`` ids."""

    duration_s: float
    first_tokens: tuple[int, ...]
    decoded: tuple[int, ...]
    finished: tuple[int, ...]
    preempted: tuple[int, ...]
    num_running: int
    num_waiting: int
    kv_blocks_used: int
    kv_blocks_total: int
    prefix_cache_hit_tokens: int
    num_tokens: int = 0  # query tokens computed in the step (prefill + decode)
    num_prefill_tokens: int = 0


@dataclass(frozen=True, slots=True)
class EngineStats:
    num_running: int
    num_waiting: int
    kv_blocks_used: int
    kv_blocks_cached: int  # evictable blocks holding cached prefixes
    kv_blocks_total: int
    preemptions: int
    # prompt tokens found in GPU memory / looked up, on each request's first admission only
    # (vLLM's vllm:prefix_cache_hits / queries; sim/engine.py Engine._admit)
    prefix_cache_hit_tokens: int
    prefix_cache_query_tokens: int
    steps: int
    busy_s: float
    # tokens loaded back from each KV tier below GPU memory (cpu, ssd, remote; sim/kv_tiers.py)
    # on first admissions, the requests' tier hits (a re-admitted request's loads are not hits)
    tier_hit_tokens: tuple[tuple[str, int], ...] = ()
    tier_load_s: float = 0.0  # the time of all loads, re-admissions' too, before any overlap with compute

    @property
    def kv_utilization(self) -> float:
        return self.kv_blocks_used / self.kv_blocks_total if self.kv_blocks_total else 0.0

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        if not self.prefix_cache_query_tokens:
            return None
        return self.prefix_cache_hit_tokens / self.prefix_cache_query_tokens
