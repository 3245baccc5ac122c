"""One request's state inside the engine (vLLM's ``Request``): what it asked for, how far it got,
what it holds, and the times the results are made of.

A decoding request is kept lazily (see :mod:`servecap.sim.engine`): while it decodes, its
``num_computed_tokens`` and ``num_output_tokens`` are those it had when it joined the decoding
batch (``*_at_join``) plus the decode steps run since (the engine's step counter minus
``step_at_join``); the engine brings the fields up to date (``Engine._materialize``) only when
it needs them — a preemption, a finish.

Compiled by mypyc with the engine (setup.py); it also satisfies the loop's
:class:`~servecap.sim.server.FinishedRequest` view once finished.
"""

from __future__ import annotations

from servecap.workload.block_hash import KeyRuns

WAITING, PREFILLING, DECODING, DONE = 0, 1, 2, 3


class RequestState:
    __slots__ = (
        "arrival_s",
        "block_keys",
        "blocks_per_crossing",
        "cached_blocks_held",
        "cached_keys_held",
        "cached_prompt_tokens",
        "computed_at_join",
        "end_s",
        "epoch",
        "external_tokens",
        "first_token_s",
        "itl_extra_s",
        "last_token_s",
        "num_blocks_held",
        "num_computed_tokens",
        "num_keys_registered",
        "num_output_tokens",
        "output_at_join",
        "output_tokens",
        "preemptions",
        "priority",
        "prompt_tokens",
        "request_id",
        "reserved_blocks",
        "scheduled_s",
        "segments",
        "seq",
        "state",
        "step_at_join",
        "window_full",
    )

    def __init__(
        self,
        request_id: int,
        prompt_tokens: int,
        output_tokens: int,
        block_keys: KeyRuns | None,
        priority: int,
        seq: int,
        arrival_s: float,
    ) -> None:
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.block_keys = block_keys  # keys of its shareable blocks (None: caching off or none)
        self.priority = priority  # lower first under the "priority" policy
        self.seq = seq  # arrival order in the engine (ties in the queues)
        self.arrival_s = arrival_s
        self.state = WAITING
        self.num_output_tokens = 0  # produced so far (stale while decoding: see the module doc)
        self.num_computed_tokens = 0  # tokens whose KV is in the cache (stale while decoding)
        self.num_blocks_held = 0  # physical blocks held (may be stale, never above, while decoding)
        # the cached blocks it holds, in order: flat (run key, lo, hi) ranges (servecap.sim.kv_pool)
        self.cached_keys_held: list[int] = []
        self.cached_blocks_held = 0  # how many blocks those ranges hold
        self.num_keys_registered = 0  # its blocks [0, n) were already looked up or published
        # the lazy decoding state, set when it joins the decoding batch
        self.computed_at_join = 0
        self.output_at_join = 0
        self.step_at_join = 0
        self.blocks_per_crossing = 0  # blocks it takes each time its context enters a new block
        self.window_full = False  # its context reached the sliding window (reads stop growing)
        self.epoch = 0  # times it joined the decoding batch (stale heap entries carry an old one)
        self.first_token_s: float | None = None
        self.last_token_s: float | None = None  # the last token before a preemption
        self.end_s: float | None = None
        self.scheduled_s: float | None = None  # first scheduled
        self.preemptions = 0
        self.reserved_blocks = 0  # blocks its whole prompt + output take (reserving engines)
        self.cached_prompt_tokens = 0  # prompt tokens found in the prefix cache on admission
        self.external_tokens = 0  # prompt tokens whose KV arrived from another replica (P/D)
        # with token times recorded: (first, last) decode-step counters of each decoding stretch,
        # and the times of tokens made by prefill steps after a recompute
        self.segments: list[tuple[int, int]] | None = None
        self.itl_extra_s: list[float] | None = None

    @property
    def queue_time_s(self) -> float | None:
        """Arrival to first being scheduled."""
        return None if self.scheduled_s is None else self.scheduled_s - self.arrival_s

    @property
    def error(self) -> str | None:
        """Always None: a request refused at the door never becomes engine state."""
        return None
