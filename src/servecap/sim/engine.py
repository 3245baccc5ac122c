"""One engine replica, modelled on vLLM's V1 scheduler: continuous batching, chunked prefill,
paged KV blocks allocated as requests grow, preemption by recompute, prefix caching. This is the
only implementation of a step: the simulator's server (:mod:`servecap.sim.engine_server`) and
the emulator both drive it.

The scheduler (vLLM ``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``), per step:

1. running requests, in order, each get their remaining tokens (one for a decoding request, the
   rest of the prompt — capped by the token budget — for one being prefilled); when the KV pool
   cannot hold a request's new tokens, the waiting queue's policy picks a running request to
   preempt (:meth:`RequestQueue.victim_index`: the youngest under ``fcfs``, the lowest priority
   under ``priority``): its blocks are freed and it goes back to the waiting queue, to be
   prefilled again later (prompt + the tokens it had produced);
2. if nothing was preempted, waiting requests are admitted in queue order while the token budget
   (``max_num_batched_tokens``), ``max_num_seqs`` and the pool allow; a request's prompt may be
   split across steps (chunked prefill), and prefix-cache hits skip whole leading blocks
   (at most ``(tokens - 1) // block_size`` of them: the last token is always computed);
3. a step that brings a request's computed tokens up to its known tokens emits one output token;
   the request finishes at its ``output_tokens``-th token and frees its blocks (keyed full
   blocks stay cached, evictable in LRU order).

The step's time is :class:`~servecap.sim.step_time.StepTimeModel` (the planner's roofline) of
the step's aggregates.

**KV tiers** (:mod:`servecap.sim.kv_tiers`): past its GPU hit, a request's next blocks may be
found in CPU DRAM, an SSD or a shared store. By default (``kv_load`` ``layerwise``/``blocking``)
the step that admits it takes their load. With ``async`` (vLLM's offloading connector,
``Scheduler.schedule`` in ``vllm/v1/core/sched/scheduler.py``) the request takes the blocks of its
cached tokens and leaves the queue while its load runs (``WAITING_FOR_REMOTE_KVS``: no token
budget, no seat) and the next waiting requests are admitted; once the load has ended its blocks
are cached and it is scheduled before the queue from its loaded tokens on
(``_update_waiting_for_remote_kv``); a request meeting a block still being stored or loaded is
passed over for the step ("try later"); a step with nothing else to run waits for the first load
to end. None of this costs a step anything when no tier is configured.

**Lazy decoding.** A step costs O(1) in the number of decoding requests. Each decoding request
advances by exactly one token per step, so the engine keeps one decode-step counter
(``_decode_step``) and, per request, its counts when it joined the decoding batch
(:mod:`servecap.sim.request_state`): its computed tokens are ``computed_at_join +
(_decode_step - step_at_join)``. What a step needs over all decoders comes from running sums:

- context read: ``Σ computed = _join_offset_sum + B x _decode_step`` where ``_join_offset_sum =
  Σ (computed_at_join - step_at_join)``; the step reads one more token each (``+ B``);
- sliding window: the same sum over the requests whose context is still below the window, plus
  ``window`` for each of the others (their reads stopped growing); a request crossing over is
  found in a heap of rate changes keyed by the step at which it happens;
- blocks: a request takes new blocks when its context enters a new block, i.e. every
  ``block_size`` steps at a step fixed by ``(computed_at_join - step_at_join) mod block_size``;
  ``_blocks_due[residue]`` sums the blocks the requests of each residue take then;
- finishes: a heap of the step at which each request produces its last token.

:meth:`Engine.advance_decode_run` advances a whole run of decode-only steps in which the batch
does not change (no arrival, completion or admission) in one call.

Tokens are emitted at the end of their step. ``StepOutcome.decoded`` lists every request that
received a token in the step, first tokens included.

**Speculative decoding** (``setup.spec_acceptance``): a decode step gives each sequence
``1 + accepted`` tokens, the accepted count drawn per sequence and step from the per-position
acceptance (:class:`~servecap.sim.spec_steps.SpecSteps`, its RNG passed in). The draws are
made when a request arrives: the steps its ``N`` output tokens take (the prefill's token, then
bursts until ``N`` are out) become its step count, which the lazy machinery above runs as it
runs any request, so the non-speculative path is unchanged. The step's price has the ``k + 1``
verified tokens and the draft (``StepCost.spec_k``); the records keep the request's ``N``
tokens. What this leaves out: the KV of a burst's extra tokens (the context is counted one token
a step, short by ``N - steps`` tokens at the end) and the token budget the verified tokens take.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from servecap.core.roofline import prefill_batch
from servecap.errors import ServecapError
from servecap.sim.engine_types import EngineRequest as EngineRequest
from servecap.sim.engine_types import EngineStats as EngineStats
from servecap.sim.engine_types import StepOutcome as StepOutcome
from servecap.sim.kv_pool import KvPool
from servecap.sim.kv_tiers import LruTier, TierStore, private_key
from servecap.sim.queues import RequestQueue, make_queue
from servecap.sim.request_state import DECODING, DONE, PREFILLING, WAITING, RequestState
from servecap.sim.scheduler_policy import admission_policy
from servecap.sim.setup import EngineSetup, kv_fit_tokens, prefix_caching_supported
from servecap.sim.spec_steps import SpecSteps
from servecap.sim.step_time import StepTimeModel
from servecap.specs.engines import engine_profile
from servecap.specs.model import AttentionKind
from servecap.workload.block_hash import KeyRuns

_NO_IDS: list[int] = []


def _by_seq(r: RequestState) -> int:
    return r.seq


_NONE_PREEMPTED: list[RequestState] = []

__all__ = ["DECODING", "DONE", "PREFILLING", "WAITING", "Engine", "EngineRequest", "EngineStats", "StepOutcome"]


class Engine:
    """One replica's scheduler, KV block manager, prefix cache and step-time model.

    Drive it by the event loop (:func:`servecap.sim.simulate`) or a wall clock (the emulator):
    ``add_request`` when a request arrives, then while ``has_work()``: ``step(now)`` and wait
    ``duration_s``. The read-only members a router sees (``num_waiting``, ``num_running``,
    ``num_inflight_tokens``, ``kv_usage``, ``prefix_hit_blocks``) cost O(1) (the last O(keys)).
    """

    def __init__(
        self,
        setup: EngineSetup,
        *,
        keep_finished: bool = False,
        record_token_times: bool = False,
        exact_step_time: bool = False,
        step_model: StepTimeModel | None = None,
        spec_rng: np.random.Generator | None = None,
        keep_spec_bursts: bool = False,
        kv_remote: LruTier | None = None,
    ) -> None:
        self.setup = setup
        # speculative decoding: a request's decode steps drawn on arrival (see the module doc)
        self._spec: SpecSteps | None = None
        # each speculative request's bursts, kept for a driver that streams them (the emulator)
        self._keep_spec_bursts = keep_spec_bursts
        self.spec_bursts: dict[int, list[int]] = {}
        self._decode_tokens = 1 + len(setup.spec_acceptance)  # budget a decoding request takes (k + 1 verified)
        if setup.spec_acceptance:
            self._spec = SpecSteps(
                setup.spec_acceptance, spec_rng if spec_rng is not None else np.random.default_rng(0)
            )
        layout = setup.layout
        self.layout = layout
        self.block_size = layout.block_size
        self._blocks_held_fn = layout.blocks_held
        # one block per group every block_size tokens (full attention everywhere): prefix caching
        # works and the blocks of a context are a closed form
        self._uniform_blocks = prefix_caching_supported(layout)
        self._num_groups = len(layout.groups)
        self.caching = setup.enable_prefix_caching and self._uniform_blocks
        self.pool = KvPool(setup.num_gpu_blocks, blocks_per_key=self._num_groups if self.caching else 1)
        # the longest context the whole pool holds: a request whose prompt and output need more can
        # never run (vLLM refuses at startup a max_model_len past it; a setup built by hand may not)
        self.fit_tokens = kv_fit_tokens(setup)
        # KV tiers below GPU memory (sim/kv_tiers.py): fed by the pool's evictions, read on a GPU
        # miss; ``kv_remote`` is the fleet's shared remote store
        self.tiers: TierStore | None = None
        self._step_load_s = 0.0  # loads from the tiers the step being built takes
        # preempted requests' private blocks put in the tiers: id -> (first block, end block)
        self._offloaded: dict[int, tuple[int, int]] = {}
        # vLLM's offloading connector (sim/kv_tiers.py; the module doc, "Asynchronous loads"):
        # loads in flight, id -> (end, request, keys it loads) (vLLM's WAITING_FOR_REMOTE_KVS)
        self._async_load = False
        self._loading: dict[int, tuple[float, RequestState, list[int]]] = {}
        self._next_ready_s = math.inf  # the earliest end of a load in flight
        self._keys_loading: set[int] = set()  # vLLM's _blocks_being_loaded
        self._skipped: list[RequestState] = []  # passed over by this step's admission (step_skipped_waiting)
        self._loaded: list[RequestState] = []  # loads ended, in arrival order: scheduled before the queue
        self._load_blocks = 0  # Σ blocks of the whole prompt over the requests loading or loaded
        self.load_wait = False  # the last step ran nothing: it waited for a load (its end is the load's)
        # store as computed: id -> the next of its keyed blocks to write (vLLM's _next_stored_block_idx)
        self._store_on_compute = False
        self._stored: dict[int, int] = {}
        self._store_at_s = 0.0  # the end of the step being applied: stores start then
        if setup.kv_tiers is not None and self.caching:
            self.tiers = TierStore(setup.kv_tiers, kv_remote)
            self._store_on_compute = setup.kv_tiers.store_on_compute
            if not self._store_on_compute:  # a victim cache: the GPU's evictions feed it
                self.pool.on_evict = self.tiers.demote_range
            self._async_load = setup.kv_tiers.async_load
        # replicas of one setup may share one model (it caches step prices by token count)
        if (
            step_model is None
            or step_model.cost is not setup.step
            or step_model.eff is not setup.efficiency
            or (exact_step_time and not step_model.exact)
        ):
            step_model = StepTimeModel(setup.step, setup.efficiency, exact=exact_step_time)
        self.model = step_model
        self.window = setup.step.window_tokens
        self.max_num_seqs = setup.max_num_seqs
        self.max_num_batched_tokens = setup.max_num_batched_tokens
        self.keep_finished = keep_finished
        self.record_token_times = record_token_times
        thresholds = set()
        for g in layout.groups:
            if g.kind is AttentionKind.SLIDING and g.window_tokens is not None:
                cap = -(-(g.window_tokens - 1) // self.block_size) + 1
                thresholds.add((cap - 1) * self.block_size + 1)
        # contexts past which a sliding-window group stops taking blocks (hybrid layouts)
        self._block_thresholds = sorted(thresholds)
        # decoders whose joins and finishes need no rate-change bookkeeping
        self._simple_decoders = self._uniform_blocks and self.window is None and not self._block_thresholds

        # pricing a step: the roofline's slopes when it has their shape (the same operations as
        # StepTimeModel.time, so the same floats), else the model's own call
        slopes = self.model.roofline_slopes()
        self._kv_slope, self._wkv_slope, self._pairs_slope, self._wpairs_slope, self._seqs_slope = (
            slopes if slopes is not None else (0.0, 0.0, 0.0, 0.0, 0.0)
        )
        self._bases = self.model.bases
        self._price_mode = 0 if slopes is None else (1 if slopes[1] == 0.0 and slopes[3] == 0.0 else 2)

        self.waiting: RequestQueue = make_queue(setup.scheduling_policy)
        # the engine profile's admission rule (vLLM: admit on the next chunk's blocks)
        self.policy = admission_policy(engine_profile(setup.engine))
        self._reserving = self.policy.reserves
        if self._async_load and self._reserving:
            raise ServecapError(
                "kv_load",
                "async",
                f"vLLM's offloading connector's asynchronous loads (engine vllm, not {setup.engine})",
            )
        self._whole_blocks = self.policy.whole_blocks  # exact per-request reservations
        self._ratio_decays = self.policy.decay_per_step > 0.0  # SGLang: the reservation shrinks
        self._separate_prefill = not engine_profile(setup.engine).mixed_prefill_decode
        self._lifetime_blocks = 0  # Σ reserved_blocks over the running requests
        self._requests: dict[int, RequestState] = {}  # every request not finished
        self._decoding: dict[int, RequestState] = {}  # the decoding batch, in scheduling order
        self._prefilling: RequestState | None = None  # a request whose prompt is part-computed
        self._seq = 0
        # the lazy decoding state (see the module doc)
        self._decode_step = 0
        self._join_offset_sum = 0
        self._blocks_due = [0] * self.block_size
        self._join_offset_sum_below_window = 0
        self._num_below_window = 0
        self._num_window_full = 0
        self._output_left_at_join_sum = 0  # Σ (output_tokens - output_at_join + step_at_join)
        self._waiting_tokens = 0  # Σ (prompt + output - produced) over the waiting queue
        # (decode step of the finish, seq, id, epoch) and (decode step of a rate change, ...)
        self._finish_heap: list[tuple[int, int, int, int]] = []
        self._rate_change_heap: list[tuple[int, int, int, int]] = []
        self._admission_blocked = False
        self._last_end_s = 0.0
        # counters
        self.preemptions = 0
        self.hit_tokens = 0
        self.query_tokens = 0
        self.steps = 0
        self.busy_s = 0.0
        self.seq_time = 0.0  # Σ batch size x step time
        self.max_batch = 0
        self.max_waiting = 0  # the longest waiting queue a step started with
        self.itl_durations: list[float] = []
        self.itl_weights: list[int] = []
        self.decode_end_times: list[float] = []  # end of the step that moved the counter to i + 1
        self.finished: list[RequestState] = []
        self._new_finished: list[RequestState] = []
        self.held_blocks = 0  # taken outside any running request (P/D: KV awaiting transfer)

    # ---- public API -------------------------------------------------------------------------

    def add_request(self, req: EngineRequest, now_s: float) -> bool:
        """Queue a request; False when the waiting-queue limit rejects it. Raises
        ServecapError when it can never run (longer than max_model_len)."""
        return self.add(req.request_id, req.prompt_tokens, req.output_tokens, req.prefix_key, req.priority, now_s)

    def add(
        self,
        request_id: int,
        prompt_tokens: int,
        output_tokens: int,
        prefix_key: Sequence[int] | None,
        priority: int,
        now_s: float,
    ) -> bool:
        """:meth:`add_request` without building an EngineRequest (the simulator's path)."""
        if prompt_tokens < 1 or output_tokens < 1:
            raise ServecapError("request", request_id, "needs at least one prompt and one output token")
        if prompt_tokens + output_tokens > self.setup.max_model_len:
            raise ServecapError(
                "request",
                request_id,
                f"{prompt_tokens} prompt + {output_tokens} output tokens exceed max_model_len "
                f"{self.setup.max_model_len}",
            )
        if prompt_tokens + output_tokens - 1 > self.fit_tokens:
            # its last context (the last output token is never computed) has no room even in an empty pool
            raise ServecapError(
                "request",
                request_id,
                f"{prompt_tokens} prompt + {output_tokens} output tokens need a context of "
                f"{prompt_tokens + output_tokens - 1} tokens; the whole KV pool holds {self.fit_tokens} "
                f"({self.setup.num_gpu_blocks} blocks of {self.block_size}): max_model_len "
                f"{self.setup.max_model_len} is past what the pool holds",
            )
        if request_id in self._requests:
            raise ServecapError("request_id", request_id, "already in the engine")
        limit = self.setup.waiting_queue_limit
        if limit is not None and len(self.waiting) >= limit:
            return False
        if self._spec is not None:  # from here on the request counts steps, each its accepted burst
            if self._keep_spec_bursts:
                bursts = self._spec.decode_bursts(output_tokens)
                self.spec_bursts[request_id] = bursts
                output_tokens = 1 + len(bursts)
            else:
                output_tokens = self._spec.decode_steps(output_tokens)
        runs = KeyRuns.unit(prefix_key) if self.caching and prefix_key else None
        r = RequestState(request_id, prompt_tokens, output_tokens, runs, priority, self._seq, now_s)
        self._seq += 1
        if self.record_token_times:
            r.segments = []
            r.itl_extra_s = []
        self._requests[request_id] = r
        self.waiting.add(r)
        self._waiting_tokens += prompt_tokens + output_tokens
        self._admission_blocked = False
        return True

    def add_transferred(self, request_id: int, prompt_tokens: int, output_tokens: int, now_s: float) -> bool:
        """Queue a request whose prompt's KV came from a prefill replica (disaggregated
        prefill/decode). On admission it takes blocks for its whole prompt but computes only the
        last prompt token, whose step samples the first output token, as vLLM's decode instance
        does with a KV connector (``Scheduler._update_waiting_for_remote_kv`` in
        ``vllm/v1/core/sched/scheduler.py`` leaves the last token of a fully loaded prompt to
        compute). A preempted one is recomputed here."""
        if not self.add(request_id, prompt_tokens, output_tokens, None, 0, now_s):
            return False
        self._requests[request_id].external_tokens = prompt_tokens - 1
        return True

    def hold_blocks(self, n: int) -> bool:
        """Take ``n`` blocks outside any running request (a P/D prefill replica keeps a finished
        prompt's KV until it is sent; a decode replica reserves room for one arriving); False
        when the pool cannot give them."""
        if not self.pool.allocate(n):
            return False
        self.held_blocks += n
        return True

    def release_held_blocks(self, n: int) -> None:
        """Give back ``n`` blocks taken by :meth:`hold_blocks`."""
        self.pool.release(n)
        self.held_blocks -= n
        self._admission_blocked = False

    def has_work(self) -> bool:
        return bool(
            self._decoding or self._prefilling is not None or len(self.waiting) or self._loading or self._loaded
        )

    @property
    def num_waiting(self) -> int:
        """Requests waiting, those waiting for their KV's load included (vLLM counts them so)."""
        return len(self.waiting) + len(self._loading) + len(self._loaded)

    @property
    def num_running(self) -> int:
        return len(self._decoding) + (self._prefilling is not None)

    @property
    def num_requests(self) -> int:
        """``num_waiting + num_running`` in one read: every request not finished (a router's load)."""
        return len(self._requests)

    @property
    def num_inflight_tokens(self) -> int:
        """Prompt tokens not yet computed plus output tokens not yet produced, over the requests
        in the engine (a preempted request's prompt counts again; O(1), from running sums)."""
        n = self._waiting_tokens + self._output_left_at_join_sum - len(self._decoding) * self._decode_step
        r = self._prefilling
        if r is not None:
            n += max(0, r.prompt_tokens - r.num_computed_tokens) + r.output_tokens - r.num_output_tokens
        return n

    @property
    def kv_usage(self) -> float:
        """Fraction of the KV blocks in use by running requests, 0..1 (cached idle blocks are
        free to take)."""
        return self.pool.used / self.pool.total if self.pool.total else 0.0

    def drop_cache(self) -> None:
        """Forget the cached prefix blocks of an engine that holds no request (a stopped replica:
        it serves nothing again, and its pod's GPU memory goes with it). Under prefix caching a
        fleet that churns through replicas otherwise kept every stopped one's block index, up to
        ``num_gpu_blocks`` keys each, until the run ended. Its private KV tiers (the pod's DRAM and
        local SSD) go with it; the fleet's shared store keeps what it was given, and the new pool
        feeds the tiers as the old one did."""
        if self._requests or self.pool.used:
            return
        hook = self.pool.on_evict
        self.pool = KvPool(self.pool.total, blocks_per_key=self.pool.per_key)
        self.pool.on_evict = hook
        if self.tiers is not None:
            for t in self.tiers.private:
                t.lru.clear()
            self._offloaded.clear()

    def prefix_hit_blocks(self, block_keys: Sequence[int]) -> int:
        """Leading blocks of ``block_keys`` (:func:`servecap.workload.block_keys`) that the prefix
        cache holds now; 0 when it keeps none. Reads only: the LRU order is left as it is."""
        if not self.caching or not block_keys:
            return 0
        return self.pool.longest_hit_runs(KeyRuns.unit(block_keys), len(block_keys))[0]

    def prefix_tier_blocks(self, block_keys: Sequence[int]) -> tuple[int, int, int, int]:
        """Leading blocks of ``block_keys`` by where this replica would take them from: its GPU
        prefix cache (:meth:`prefix_hit_blocks`), then, for the blocks right after, its CPU tier,
        its SSD tier and the fleet's shared store (each block counted at the fastest tier that
        holds it, up to the first block held nowhere: :meth:`TierStore.find`). Reads only."""
        gpu = self.prefix_hit_blocks(block_keys)
        tiers = self.tiers
        if tiers is None or gpu >= len(block_keys):
            return (gpu, 0, 0, 0)
        by_name = {"cpu": 0, "ssd": 0, "remote": 0}
        for t, n in zip(tiers.levels, tiers.find(block_keys, gpu, len(block_keys)), strict=True):
            by_name[t.tier.name] += n
        return (gpu, by_name["cpu"], by_name["ssd"], by_name["remote"])

    @property
    def stats(self) -> EngineStats:
        return EngineStats(
            num_running=self.num_running,
            num_waiting=self.num_waiting,
            kv_blocks_used=self.pool.used,
            kv_blocks_cached=self.pool.evictable,
            kv_blocks_total=self.pool.total,
            preemptions=self.preemptions,
            prefix_cache_hit_tokens=self.hit_tokens,
            prefix_cache_query_tokens=self.query_tokens,
            steps=self.steps,
            busy_s=self.busy_s,
            tier_hit_tokens=tuple(self.tiers.hit_tokens().items()) if self.tiers is not None else (),
            tier_load_s=self.tiers.load_s if self.tiers is not None else 0.0,
        )

    def step(self, now_s: float) -> StepOutcome:
        """Schedule and run one iteration starting at ``now_s``."""
        out = self._step(now_s, True)
        assert out is not None
        return out

    def run_step(self, now_s: float) -> float:
        """:meth:`step` without building its outcome (the simulator's path); returns its end."""
        self._step(now_s, False)
        return self._last_end_s

    def abort(self, request_id: int) -> bool:
        """Drop a request (client gone); frees its blocks. False if unknown or finished."""
        r = self._requests.get(request_id)
        if r is None or r.state == DONE:
            return False
        if self._stored:
            self._stored.pop(request_id, None)
        if r.state == WAITING:
            loading = self._loading.pop(request_id, None)
            if loading is not None:  # its load is dropped (its blocks freed)
                self._keys_loading.difference_update(loading[2])
                self._next_ready_s = min((e[0] for e in self._loading.values()), default=math.inf)
            elif r in self._loaded:
                self._loaded.remove(r)
            if loading is not None or r.num_computed_tokens:
                self._load_blocks -= self._blocks_for(r.prompt_tokens + r.num_output_tokens)
            else:
                self.waiting.remove(r)
            if r.num_blocks_held:  # a load in flight or ended: it holds its blocks
                self._release_blocks(r)
            self._waiting_tokens -= r.prompt_tokens + r.output_tokens - r.num_output_tokens
        else:
            self._free_running(r)
        r.state = DONE
        del self._requests[request_id]
        self._admission_blocked = False
        return True

    def take_finished(self) -> list[RequestState]:
        """Requests finished since the last call, in finishing order (the servers' hook)."""
        out = self._new_finished
        self._new_finished = []
        return out

    # ---- lazy decoders ----------------------------------------------------------------------

    def _blocks_for(self, tokens: int) -> int:
        """Physical blocks a context of ``tokens`` tokens holds."""
        if self._uniform_blocks:
            return self._num_groups * -(-tokens // self.block_size)
        return self._blocks_held_fn(tokens)

    def _materialize(self, r: RequestState) -> None:
        """Bring a decoder's counters up to the current step counter (the sums are unchanged)."""
        steps = self._decode_step - r.step_at_join
        if steps:
            r.num_computed_tokens = r.computed_at_join + steps
            r.num_output_tokens = r.output_at_join + steps
            if r.segments is not None:
                r.segments.append((r.step_at_join, self._decode_step))
            r.computed_at_join, r.output_at_join = r.num_computed_tokens, r.num_output_tokens
            r.step_at_join = self._decode_step
        # a lazy decoder's stored count may be stale (it only grows); one allocated ahead for
        # this step's token (the request-by-request path) holds one block more
        held = self._blocks_for(r.num_computed_tokens)
        if held > r.num_blocks_held:
            r.num_blocks_held = held

    def _blocks_per_crossing(self, computed: int) -> int:
        """Blocks taken at the next block crossing after ``computed`` tokens."""
        if self._uniform_blocks:
            return self._num_groups
        bs = self.block_size
        t = (computed // bs + 1) * bs + 1 if computed % bs else computed + 1
        return self._blocks_held_fn(t) - self._blocks_held_fn(t - 1)

    def _add_decoder(self, r: RequestState) -> None:
        step = self._decode_step
        r.state = DECODING
        r.computed_at_join, r.output_at_join, r.step_at_join = r.num_computed_tokens, r.num_output_tokens, step
        r.epoch += 1
        offset = r.computed_at_join - step
        self._join_offset_sum += offset
        self._output_left_at_join_sum += r.output_tokens - r.output_at_join + step
        if self._simple_decoders:
            r.blocks_per_crossing = self._num_groups
            self._blocks_due[offset % self.block_size] += self._num_groups
        else:
            r.blocks_per_crossing = self._blocks_per_crossing(r.num_computed_tokens)
            self._blocks_due[offset % self.block_size] += r.blocks_per_crossing
            if self.window is not None:
                if r.num_computed_tokens + 1 >= self.window:
                    r.window_full = True
                    self._num_window_full += 1
                else:
                    r.window_full = False
                    self._join_offset_sum_below_window += offset
                    self._num_below_window += 1
                    heapq.heappush(self._rate_change_heap, (self.window - 1 - offset, r.seq, r.request_id, r.epoch))
            if self._block_thresholds:
                self._push_threshold(r)
        heapq.heappush(self._finish_heap, (step + r.output_tokens - r.num_output_tokens, r.seq, r.request_id, r.epoch))
        self._decoding[r.request_id] = r

    def _push_threshold(self, r: RequestState) -> None:
        computed = r.computed_at_join + self._decode_step - r.step_at_join
        for thr in self._block_thresholds:
            if thr > computed:  # the crossing at ctx = thr still grows; change before thr + 1
                offset = r.computed_at_join - r.step_at_join
                heapq.heappush(self._rate_change_heap, (thr - offset, r.seq, r.request_id, r.epoch))
                return

    def _remove_decoder(self, r: RequestState) -> None:
        """Take a (materialized) decoder out of the batch and the sums."""
        offset = r.computed_at_join - r.step_at_join
        self._join_offset_sum -= offset
        self._output_left_at_join_sum -= r.output_tokens - r.output_at_join + r.step_at_join
        self._blocks_due[offset % self.block_size] -= r.blocks_per_crossing
        if self.window is not None:
            if r.window_full:
                self._num_window_full -= 1
            else:
                self._join_offset_sum_below_window -= offset
                self._num_below_window -= 1
        del self._decoding[r.request_id]

    def _apply_rate_changes(self) -> None:
        """Rate changes due before the step at the current counter: window saturation, block
        growth of hybrid layouts."""
        heap = self._rate_change_heap
        step = self._decode_step
        while heap and heap[0][0] <= step:
            _, _, rid, epoch = heapq.heappop(heap)
            r = self._requests.get(rid)
            if r is None or r.state != DECODING or r.epoch != epoch:
                continue
            offset = r.computed_at_join - r.step_at_join
            computed = offset + step
            if self.window is not None and not r.window_full and computed + 1 >= self.window:
                r.window_full = True
                self._join_offset_sum_below_window -= offset
                self._num_below_window -= 1
                self._num_window_full += 1
            new_blocks = self._blocks_per_crossing(computed)
            if new_blocks != r.blocks_per_crossing:
                self._blocks_due[offset % self.block_size] += new_blocks - r.blocks_per_crossing
                r.blocks_per_crossing = new_blocks
            if self._block_thresholds and any(t > computed for t in self._block_thresholds):
                self._push_threshold(r)

    def _clean_heap_tops(self) -> None:
        """Drop stale entries (a request that left the batch since) from the heaps' tops."""
        for heap in (self._finish_heap, self._rate_change_heap):
            while heap:
                _, _, rid, epoch = heap[0]
                r = self._requests.get(rid)
                if r is not None and r.state == DECODING and r.epoch == epoch:
                    break
                heapq.heappop(heap)

    # ---- freeing ----------------------------------------------------------------------------

    def _free_running(self, r: RequestState) -> None:
        """Release a running request's blocks (its cached blocks become evictable)."""
        if r.state == DECODING:
            self._materialize(r)
            self._remove_decoder(r)
        elif self._prefilling is r:
            self._prefilling = None
        self._release_blocks(r)

    def _release_blocks(self, r: RequestState) -> None:
        pool = self.pool
        if r.reserved_blocks:
            self._lifetime_blocks -= r.reserved_blocks
            r.reserved_blocks = 0
        if r.cached_keys_held:
            pool.release(r.num_blocks_held - pool.per_key * r.cached_blocks_held)
            pool.drop_held(r.cached_keys_held)  # the tail goes first into the LRU list (evicted first)
            r.cached_keys_held = []
            r.cached_blocks_held = 0
        else:
            n = r.num_blocks_held
            pool.used -= n
            pool.free += n
        r.num_blocks_held = 0
        r.num_keys_registered = 0
        self._admission_blocked = False  # room was made: the waiting queue gets another look

    def _publish(self, r: RequestState) -> None:
        """Cache the request's keyed full blocks computed so far."""
        keys = r.block_keys
        if keys is None:
            return
        ends = keys.ends
        upto = r.num_computed_tokens // self.block_size
        n_keyed = ends[-1] if ends else 0
        if n_keyed < upto:
            upto = n_keyed
        b = r.num_keys_registered
        if upto > b:
            r.cached_blocks_held += self.pool.publish_blocks(keys, b, upto, r.cached_keys_held)
            r.num_keys_registered = upto
            self._admission_blocked = False  # new cached content may be the waiting head's prefix
            if self._store_on_compute:
                self._store_computed(r, keys, upto)

    def _store_computed(self, r: RequestState, keys: KeyRuns, upto: int) -> None:
        """vLLM's store as computed (``OffloadingConnectorScheduler._get_reqs_to_store``): the
        request's keyed blocks below ``upto`` not offered yet, from its first (a GPU prefix hit
        is offered again: the tier skips what it holds and refreshes it, ``prepare_store`` and
        ``touch``), written from the end of the step that computed them."""
        b = self._stored.get(r.request_id, 0)
        if upto > b:
            assert self.tiers is not None
            self.tiers.store_computed([keys[i] for i in range(b, upto)], self._store_at_s)
            self._stored[r.request_id] = upto

    def _preempt(self, r: RequestState) -> None:
        if r.state == DECODING:
            r.last_token_s = self._last_end_s
        self._free_running(r)
        if self._stored:
            self._stored.pop(r.request_id, None)
        tiers = self.tiers
        if tiers is not None and tiers.private:  # offloaded instead of recomputed (sim/kv_tiers.py)
            first = len(r.block_keys) if r.block_keys is not None else 0
            end = r.num_computed_tokens // self.block_size
            old = self._offloaded.pop(r.request_id, None)
            if old is not None:
                tiers.discard([private_key(r.request_id, i) for i in range(old[0], old[1])])
            if end > first:
                tiers.offload([private_key(r.request_id, i) for i in range(first, end)])
                self._offloaded[r.request_id] = (first, end)
        r.num_computed_tokens = 0
        r.external_tokens = 0  # recomputed here (P/D decode side)
        r.state = WAITING
        r.preemptions += 1
        self.preemptions += 1
        self.waiting.prepend(r)
        self._waiting_tokens += r.prompt_tokens + r.output_tokens - r.num_output_tokens

    def _finish(self, r: RequestState, end_s: float) -> None:
        """A decoder produced its last token in the step ending at ``end_s``."""
        self._materialize(r)
        self._remove_decoder(r)
        if r.block_keys is not None:
            self._publish(r)
        self._release_blocks(r)
        self._done(r, end_s)

    def _done(self, r: RequestState, end_s: float) -> None:
        if self._stored:
            self._stored.pop(r.request_id, None)
        r.state = DONE
        r.end_s = end_s
        del self._requests[r.request_id]
        if self.keep_finished:
            self.finished.append(r)
        self._new_finished.append(r)

    def _allocate(self, n: int) -> None:
        """Take ``n`` blocks the caller checked are available (free ones first: no eviction)."""
        pool = self.pool
        if n > 0:
            if pool.free >= n:
                pool.free -= n
                pool.used += n
            else:
                pool.allocate(n)

    def _price(
        self, num_tokens: int, num_seqs: int, kv: float, wkv: float, pairs: float, wpairs: float, prompt: int
    ) -> float:
        """:meth:`StepTimeModel.time` of a step, bit for bit (see ``roofline_slopes``)."""
        mode = self._price_mode
        if mode == 0 or num_tokens <= 0:
            return self.model.time(num_tokens, num_seqs, kv, wkv, pairs, wpairs, prompt)
        b = self._bases.get(num_tokens)  # the model's cache of per-token-count bases
        if b is None:
            b = self.model.base(num_tokens)
        if mode == 1:
            mem = b[0] + self._kv_slope * kv
            comp = b[1] + self._seqs_slope * num_seqs + self._pairs_slope * pairs
        else:
            mem = b[0] + self._kv_slope * kv + self._wkv_slope * wkv
            comp = b[1] + self._seqs_slope * num_seqs + self._pairs_slope * pairs + self._wpairs_slope * wpairs
        return (mem if mem > comp else comp) + b[2]

    # ---- one step ---------------------------------------------------------------------------

    def _step(self, now: float, want_ids: bool) -> StepOutcome | None:
        if self.tiers is not None:
            self.tiers.now_s = now  # the tiers' writes start, and their blocks are read, at the step's time
            if self._next_ready_s <= now:
                self._finish_loads(now)
            self.tiers.pending_s = math.inf  # this step's lookups note the blocks they wait for
        if self._rate_change_heap and self._rate_change_heap[0][0] <= self._decode_step:
            self._apply_rate_changes()
        waiting = self.waiting
        n_waiting = len(waiting)
        if n_waiting > self.max_waiting:
            self.max_waiting = n_waiting
        step = self._decode_step
        bs = self.block_size
        pool = self.pool
        decoding = self._decoding
        preempted = _NONE_PREEMPTED  # a new list only in a step that preempts (rare)
        budget = self.max_num_batched_tokens - len(decoding) * self._decode_tokens
        chunks: list[tuple[RequestState, int]] = []  # prefill work of this step: (request, tokens)

        # SGLang (no mixed batches): a step that can prefill runs prefill only, decoders wait
        prefill_only = False
        if self._separate_prefill and decoding and (self._prefilling is not None or n_waiting):
            prefill_only = self._prefill_only(now, chunks)
        if not prefill_only:
            # 1. the running requests: every decoder's token, the prefilling request's next chunk
            need = self._blocks_due[(-step) % bs]
            part = self._prefilling
            part_chunk = part_need = 0
            if part is not None:
                part_chunk = min(part.prompt_tokens + part.num_output_tokens - part.num_computed_tokens, budget)
                part_need = self._blocks_for(part.num_computed_tokens + part_chunk) - part.num_blocks_held
            if need + part_need > pool.free + pool.idle * pool.per_key:
                preempted = []
                self._schedule_running_exact(preempted, chunks)
                budget = self.max_num_batched_tokens - len(decoding) * self._decode_tokens - sum(n for _, n in chunks)
            else:
                self._allocate(need + part_need)
                if part is not None:
                    part.num_blocks_held += part_need
                    chunks.append((part, part_chunk))
                    budget -= part_chunk

            if self._reserving:
                if preempted:
                    self._on_retract()
                elif not decoding and part is None:
                    self.policy.on_idle()  # SGLang resets its reservation ratio when it had no batch

            # 2. admit waiting requests (vLLM skips this in a step that preempted; a step left with
            # nothing to run, the blocks held by requests whose loads ended, goes on to them: vLLM
            # schedules them in its next, empty-batched, step)
            if (
                (not preempted or (self._loaded and not chunks and not decoding))
                and budget > 0
                and (n_waiting or self._loaded)
            ):
                self._admission_blocked = self._admit(now, budget, chunks)
                if self._skipped:
                    self._put_back_skipped()
            else:
                self._admission_blocked = False

        if not chunks and not decoding and self._async_load and (self._loading or self._skipped_pending()):
            return self._wait_for_load(now, want_ids, preempted)

        # 3. the step's shape, from running sums
        B = 0 if prefill_only else len(decoding)
        kv = 0.0 if prefill_only else float(self._join_offset_sum + B * (step + 1))
        window = self.window
        if window is None or prefill_only:
            wkv = kv
        else:
            wkv = float(
                self._join_offset_sum_below_window
                + self._num_below_window * (step + 1)
                + self._num_window_full * window
            )
        pairs, wpairs = kv, wkv
        num_tokens = B
        prompt = 0
        for r, n in chunks:
            s = r.num_computed_tokens
            if window is None:
                p = n * s + n * (n + 1) / 2.0  # causal: query i attends s + i + 1 keys
                kv += s
                wkv += s
                pairs += p
                wpairs += p
            else:
                shape = prefill_batch(n, window, start_tokens=s)
                kv += shape.kv_tokens
                wkv += shape.window_kv_tokens
                pairs += shape.attn_pairs
                wpairs += shape.window_attn_pairs
            num_tokens += n
            prompt += n
        num_seqs = B + len(chunks)
        dur = self._price(num_tokens, num_seqs, kv, wkv, pairs, wpairs, prompt) if num_tokens else 0.0
        if self._step_load_s:
            assert self.tiers is not None
            dur = self.tiers.step_s(self._step_load_s, dur)
            self._step_load_s = 0.0
        end = now + dur
        if self._store_on_compute:
            self._store_at_s = end  # the blocks this step fills are copied out after it

        # 4. apply: decodes advance and finish, prefills progress
        first_ids = decoded_ids = finished_ids = _NO_IDS  # appended to only when want_ids
        if want_ids:
            first_ids, decoded_ids, finished_ids = [], ([] if prefill_only else list(decoding)), []
        if B:
            self._decode_step = step = step + 1
            if self._reserving:
                self.policy.on_decode_steps(1)
            self.itl_durations.append(dur)
            self.itl_weights.append(B)
            if self.record_token_times:
                self.decode_end_times.append(end)
            fin = self._finish_heap
            while fin and fin[0][0] <= step:
                _, _, rid, epoch = heapq.heappop(fin)
                done = self._requests.get(rid)
                if done is None or done.state != DECODING or done.epoch != epoch:
                    continue  # stale: it left the batch since (preempted)
                self._finish(done, end)
                if want_ids:
                    finished_ids.append(rid)
        self._prefilling = None
        for r, n in chunks:
            r.num_computed_tokens += n
            if r.block_keys is not None:
                self._publish(r)
            if r.num_computed_tokens < r.prompt_tokens + r.num_output_tokens:
                self._prefilling = r
                continue
            r.num_output_tokens += 1
            if want_ids:
                decoded_ids.append(r.request_id)
            if r.num_output_tokens == 1:
                r.first_token_s = end
                if want_ids:
                    first_ids.append(r.request_id)
            else:  # the first token after a recompute: its gap spans the preemption
                assert r.last_token_s is not None
                self.itl_durations.append(end - r.last_token_s)
                self.itl_weights.append(1)
                if r.itl_extra_s is not None:
                    r.itl_extra_s.append(end)
            if r.num_output_tokens >= r.output_tokens:
                self._release_blocks(r)  # its blocks were published above
                self._done(r, end)
                if want_ids:
                    finished_ids.append(r.request_id)
            else:
                self._add_decoder(r)
        self._last_end_s = end
        self.steps += 1
        self.busy_s += dur
        self.seq_time += num_seqs * dur
        if num_seqs > self.max_batch:
            self.max_batch = num_seqs
        if not want_ids:
            return None
        return self._outcome(dur, first_ids, decoded_ids, finished_ids, preempted, num_tokens, prompt)

    def _prefill_only(self, now: float, chunks: list[tuple[RequestState, int]]) -> bool:
        """SGLang's order (``get_next_batch_to_run``: a new prefill batch first, else the decode
        batch; ``enable_mixed_chunk`` off by default): the prefilling request's next chunk and
        the admissions the whole token budget allows, no decoder. False (nothing done) when no
        prefill can run now: then the step is an ordinary one."""
        pool = self.pool
        budget = self.max_num_batched_tokens
        part = self._prefilling
        if part is not None:
            chunk = min(part.prompt_tokens + part.num_output_tokens - part.num_computed_tokens, budget)
            need = self._blocks_for(part.num_computed_tokens + chunk) - part.num_blocks_held
            if need > pool.free + pool.idle * pool.per_key:
                return False  # the ordinary step preempts to make room
            self._allocate(need)
            part.num_blocks_held += need
            chunks.append((part, chunk))
            budget -= chunk
        if budget > 0 and len(self.waiting):
            self._admission_blocked = self._admit(now, budget, chunks)
        return bool(chunks)

    def _put_back_skipped(self) -> None:
        """Requests :meth:`_admit` passed over (asynchronous loads: "try later") go back to the
        queue's head in their order, as vLLM puts ``step_skipped_waiting`` back."""
        skipped = self._skipped
        for r in reversed(skipped):
            self.waiting.prepend(r)
        skipped.clear()

    def _finish_loads(self, now: float) -> None:
        """Loads ended by ``now``: their blocks are in GPU memory and cached, and the requests
        wait again with those tokens computed (vLLM's ``Scheduler._update_waiting_for_remote_kv``,
        ``vllm/v1/core/sched/scheduler.py``), ahead of the waiting queue in arrival order (the
        requests passed over wait in ``skipped_waiting``, which FCFS scheduling takes first:
        ``_select_waiting_queue_for_scheduling``)."""
        done = sorted((e[1] for e in self._loading.values() if e[0] <= now), key=_by_seq)
        for r in done:
            keys = self._loading.pop(r.request_id)[2]
            self._keys_loading.difference_update(keys)
            self._publish(r)
        if self._loaded:
            done = sorted(self._loaded + done, key=_by_seq)
        self._loaded = done
        self._next_ready_s = min((e[0] for e in self._loading.values()), default=math.inf)
        self._admission_blocked = False

    def _skipped_pending(self) -> bool:
        """Whether this step's admission passed a request over for a block still being written."""
        return self.tiers is not None and self.tiers.pending_s < math.inf

    def _wait_for_load(self, now: float, want_ids: bool, preempted: list[RequestState]) -> StepOutcome | None:
        """Nothing to run but loads in flight, or blocks being written that a waiting request
        needs: the engine waits until the first ends (vLLM's
        engine keeps stepping empty batches, polling the connector; a request arriving before
        then is scheduled at once: :class:`~servecap.sim.engine_server.EngineServer`)."""
        wake = self._next_ready_s
        if self.tiers is not None and self.tiers.pending_s < wake:
            wake = self.tiers.pending_s  # a block a request was passed over for is written then
        self.load_wait = True
        self._last_end_s = wake
        if not want_ids:
            return None
        return self._outcome(wake - now, _NO_IDS, _NO_IDS, _NO_IDS, preempted, 0, 0)

    def _outcome(
        self,
        duration_s: float,
        first_ids: list[int],
        decoded_ids: list[int],
        finished_ids: list[int],
        preempted: list[RequestState],
        num_tokens: int,
        num_prefill_tokens: int,
    ) -> StepOutcome:
        """A step's :class:`StepOutcome`: its ids and the engine's state after it."""
        pool = self.pool
        return StepOutcome(
            duration_s=duration_s,
            first_tokens=tuple(first_ids),
            decoded=tuple(decoded_ids),
            finished=tuple(finished_ids),
            preempted=tuple(r.request_id for r in preempted),
            num_running=self.num_running,
            num_waiting=self.num_waiting,
            kv_blocks_used=pool.used,
            kv_blocks_total=pool.total,
            prefix_cache_hit_tokens=self.hit_tokens,
            num_tokens=num_tokens,
            num_prefill_tokens=num_prefill_tokens,
        )

    def _admit(self, now: float, budget: int, chunks: list[tuple[RequestState, int]]) -> bool:
        """Admit waiting requests in queue order while budget, seats and blocks allow; True when
        one was left waiting for seats or blocks (not for the token budget). With asynchronous
        loads, the requests whose loads ended go first; the ones passed over are in
        ``_skipped`` for the caller to put back (:meth:`_put_back_skipped`)."""
        waiting = self.waiting
        async_load = self._async_load
        loaded = self._loaded
        while loaded and budget > 0:
            if len(self._decoding) + len(chunks) >= self.max_num_seqs:
                return True
            if not self._admit_loaded(loaded[0], budget, chunks, now):
                return True
            loaded.pop(0)
            budget -= chunks[-1][1]
        pool = self.pool
        bs = self.block_size
        per_key = pool.per_key
        n_running = len(self._decoding) + len(chunks)
        reserved = self._reserved_blocks(chunks) if self._reserving and not self._whole_blocks else 0
        while budget > 0 and len(waiting):
            r = waiting.peek()
            if n_running >= self.max_num_seqs:
                return True
            total = r.prompt_tokens + r.num_output_tokens
            if async_load and len(self._loading) >= self.max_num_seqs:
                # vLLM's backpressure (get_num_new_matched_tokens: at most max_num_seqs loads in
                # flight) answers "try later" to every request it is asked about
                return False
            keys = r.block_keys
            hits = idle = 0
            below = 0  # leading blocks past the GPU's hit found in the tiers below
            if keys is not None:
                hits, idle = pool.longest_hit_runs(keys, (total - 1) // bs)
                tiers = self.tiers
                if tiers is not None:
                    if async_load:
                        found = tiers.lookup(keys, hits, min(len(keys), (total - 1) // bs), self._keys_loading)
                        if found is None:  # a block still being stored, or being loaded: try later
                            self._skipped.append(waiting.pop())
                            continue
                        below = sum(found)
                    else:
                        below = sum(tiers.find(keys, hits, min(len(keys), (total - 1) // bs)))
            own = 0  # a preempted request's own blocks found in the tiers, right after its keyed ones
            off = self._offloaded.get(r.request_id) if self._offloaded else None
            if off is not None and hits + below == off[0]:
                assert self.tiers is not None
                own_keys = [private_key(r.request_id, i) for i in range(off[0], min(off[1], (total - 1) // bs))]
                own = sum(self.tiers.find(own_keys, 0, len(own_keys)))
            cached = (hits + below + own) * bs
            if async_load and below + own:
                if not self._start_load(r, keys, hits, idle, below, own, off, now):
                    return True
                continue
            start = cached if cached >= r.external_tokens else r.external_tokens  # P/D: KV sent over
            chunk = min(total - start, budget)
            held = self._blocks_for(start + chunk)
            new_blocks = held - per_key * hits
            if self._whole_blocks:
                # its blocks to completion beside the running requests' (TensorRT-LLM
                # GUARANTEED_NO_EVICT: ceil((prompt + max output) / block) - held, per request)
                lifetime = self._blocks_for(r.prompt_tokens + r.output_tokens)
                reserved = self._lifetime_blocks - pool.used
                room = pool.free + pool.idle * per_key
                if lifetime - held + new_blocks + idle * per_key + reserved > room and (
                    n_running or new_blocks + idle * per_key > room
                ):
                    return True  # alone in the engine it runs on what it needs now (no deadlock)
                r.reserved_blocks = lifetime
                self._lifetime_blocks += lifetime
            elif self._reserving:
                # the rest of its prompt and its share of the output, beside the running requests'
                future = self._future_blocks(
                    total - start - chunk, r.output_tokens - r.num_output_tokens, self.policy.clip_tokens
                )
                room = pool.free + pool.idle * per_key
                if new_blocks + idle * per_key + future + reserved > room and (
                    n_running or new_blocks + idle * per_key > room
                ):
                    return True
                reserved += future
            elif new_blocks + idle * per_key > pool.free + pool.idle * per_key:
                return True
            waiting.pop()
            self._waiting_tokens -= r.prompt_tokens + r.output_tokens - r.num_output_tokens
            if hits or below or off is not None:
                self._step_load_s += self._take_cached(r, keys, hits, below, own, off)
            r.num_keys_registered = hits
            self._allocate(new_blocks)
            r.num_computed_tokens = start
            r.num_blocks_held = held
            r.state = PREFILLING
            if r.scheduled_s is None:
                r.scheduled_s = now
            if r.preemptions == 0:
                self._count_lookup(r, cached, hits)
            chunks.append((r, chunk))
            budget -= chunk
            n_running += 1
        return False

    def _start_load(
        self,
        r: RequestState,
        keys: KeyRuns | None,
        hits: int,
        idle: int,
        below: int,
        own: int,
        off: tuple[int, int] | None,
        now: float,
    ) -> bool:
        """vLLM's asynchronous load (``get_num_new_matched_tokens`` answers ``(tokens, True)``;
        ``Scheduler.schedule`` allocates the blocks of the computed and loaded tokens, takes no
        token budget and no seat, and parks the request in ``WAITING_FOR_REMOTE_KVS``): the
        request holds the blocks of its GPU hit and of the blocks it loads, its load is booked on
        the read channel from ``now`` and it leaves the queue until the load ends. False (nothing
        done) when the pool cannot give the blocks (vLLM: ``allocate_slots`` fails, admission
        stops). The requests loading or loaded together never need more than the pool (their
        whole prompts' blocks): each can then finish its prefill once the batch has drained, where
        loads holding most of the pool would otherwise wait for each other for ever (servecap's
        rule; vLLM gates an asynchronous load's allocation on ``reserved_blocks``,
        ``KVCacheManager.allocate_slots``, "so their initial allocation cannot consume blocks an
        already in-flight (prefilling) sequence is relying on")."""
        pool = self.pool
        per_key = pool.per_key
        bs = self.block_size
        tiers = self.tiers
        assert tiers is not None
        cached = (hits + below + own) * bs
        held = self._blocks_for(cached)
        new_blocks = held - per_key * hits
        whole = self._blocks_for(r.prompt_tokens + r.num_output_tokens)
        if new_blocks + idle * per_key > pool.free + pool.idle * per_key or self._load_blocks + whole > pool.total:
            return False
        self._load_blocks += whole
        self.waiting.pop()  # its tokens stay in _waiting_tokens: it is still waiting
        load = self._take_cached(r, keys, hits, below, own, off)
        loading: list[int] = []
        if below:
            assert keys is not None
            loading = [keys[i] for i in range(hits, hits + below)]
        ready = tiers.book_load(load, now)
        r.num_keys_registered = hits
        self._allocate(new_blocks)
        r.num_computed_tokens = cached
        r.num_blocks_held = held
        if r.preemptions == 0:
            self._count_lookup(r, cached, hits)
        self._loading[r.request_id] = (ready, r, loading)
        self._keys_loading.update(loading)
        if ready < self._next_ready_s:
            self._next_ready_s = ready
        if self._store_on_compute:
            self._stored[r.request_id] = hits + below  # vLLM: _next_stored_block_idx past the loaded blocks
        return True

    def _take_cached(
        self,
        r: RequestState,
        keys: KeyRuns | None,
        hits: int,
        below: int,
        own: int,
        off: tuple[int, int] | None,
    ) -> float:
        """What an admitted request's lookup found, taken: it holds its ``hits`` GPU blocks, loads
        the ``below`` blocks the tiers hold past them (hits on a first admission only, as the
        GPU's: :meth:`_count_lookup`) and the ``own`` blocks of its offloaded KV (``off``: a load,
        no hit), and drops the rest of its own (recomputed; an inclusive tier drops the loaded
        too). Returns the load's time, before any overlap with compute."""
        load = 0.0
        if hits:
            assert keys is not None
            ranges: list[int] = []
            self.pool.acquire_runs(keys, hits, ranges)
            r.cached_keys_held = ranges
            r.cached_blocks_held = hits
        if below:
            assert keys is not None and self.tiers is not None
            load += self.tiers.promote(keys, hits, below, self.block_size, r.preemptions == 0)
        if off is not None:
            assert self.tiers is not None
            own_keys = [private_key(r.request_id, i) for i in range(off[0], off[1])]
            if own:
                load += self.tiers.promote(own_keys, 0, own, self.block_size, False)
            self.tiers.discard(own_keys)
            del self._offloaded[r.request_id]
        return load

    def _count_lookup(self, r: RequestState, cached: int, hits: int) -> None:
        """Count a request's lookup on its first admission only, as vLLM's
        ``vllm:prefix_cache_queries/hits`` (``KVCacheManager.record_prefix_cache_stats``: a
        preempted one's goes to ``preempted_queries/hits``, which /metrics leaves out; vLLM PR
        #25787): a re-admission finding its own freed blocks is no reuse. The GPU's hits only (the
        tiers count their own)."""
        r.cached_prompt_tokens = cached
        self.hit_tokens += hits * self.block_size
        self.query_tokens += r.prompt_tokens + r.num_output_tokens - r.external_tokens

    def _admit_loaded(self, r: RequestState, budget: int, chunks: list[tuple[RequestState, int]], now: float) -> bool:
        """A request whose load ended (vLLM: ``WAITING`` with ``num_computed_tokens > 0``, no
        lookup): its next chunk from the loaded tokens on; False when the pool cannot give the
        chunk's blocks."""
        pool = self.pool
        start = r.num_computed_tokens
        chunk = min(r.prompt_tokens + r.num_output_tokens - start, budget)
        held = self._blocks_for(start + chunk)
        new_blocks = held - r.num_blocks_held
        if new_blocks > pool.free + pool.idle * pool.per_key:
            return False
        self._load_blocks -= self._blocks_for(r.prompt_tokens + r.num_output_tokens)
        self._waiting_tokens -= r.prompt_tokens + r.output_tokens - r.num_output_tokens
        self._allocate(new_blocks)
        r.num_blocks_held = held
        r.state = PREFILLING
        if r.scheduled_s is None:
            r.scheduled_s = now
        chunks.append((r, chunk))
        return True

    def _future_blocks(self, prompt_left: int, output_left: int, clip: int) -> int:
        """Blocks the ``reserve`` rule (a share of the output) holds back for requests with
        ``prompt_left`` prompt tokens still to compute and ``output_left`` output tokens still to
        produce (``clip`` caps the output counted; :mod:`servecap.sim.scheduler_policy`)."""
        out = output_left if output_left < clip else clip
        tokens = prompt_left + self.policy.ratio * out
        if tokens <= 0:
            return 0
        return self._num_groups * math.ceil(tokens / self.block_size)

    def _reserved_blocks(self, chunks: list[tuple[RequestState, int]]) -> int:
        """Blocks the running requests (and those scheduled this step) still hold back under the
        ``reserve`` rule: the rest of their prompts and their share of the output to come."""
        out_left = self._output_left_at_join_sum - len(self._decoding) * self._decode_step
        prompt_left = 0
        for r, n_chunk in chunks:
            prompt_left += r.prompt_tokens + r.num_output_tokens - r.num_computed_tokens - n_chunk
            out_left += r.output_tokens - r.num_output_tokens
        return self._future_blocks(prompt_left, out_left, 1 << 62)

    def _on_retract(self) -> None:
        """Tell the policy requests were preempted, with the batch left running (rare: O(batch))."""
        decoded = max_new = 0
        for r in self._decoding.values():
            decoded += r.output_at_join + self._decode_step - r.step_at_join
            max_new += r.output_tokens
        part = self._prefilling
        n = len(self._decoding)
        if part is not None:
            decoded += part.num_output_tokens
            max_new += part.output_tokens
            n += 1
        self.policy.on_retract(decoded, max_new, n)

    def _schedule_running_exact(self, preempted: list[RequestState], chunks: list[tuple[RequestState, int]]) -> None:
        """The running requests one by one, preempting when the pool runs out (rare)."""
        pool = self.pool
        running: list[RequestState] = list(self._decoding.values())
        for r in running:
            self._materialize(r)
        if self._prefilling is not None:
            running.append(self._prefilling)
        budget = self.max_num_batched_tokens
        scheduled: dict[int, int] = {}
        i = 0
        while i < len(running):
            r = running[i]
            n = 1 if r.state == DECODING else min(r.prompt_tokens + r.num_output_tokens - r.num_computed_tokens, budget)
            need = self._blocks_for(r.num_computed_tokens + n) - r.num_blocks_held
            ok = True
            while need > pool.available():
                vi = self.waiting.victim_index(running)
                victim = running.pop(vi)
                if vi < i:
                    i -= 1
                if victim.request_id in scheduled:  # undo what the victim got this step
                    budget += scheduled.pop(victim.request_id)
                self._preempt(victim)
                preempted.append(victim)
                if victim is r:
                    ok = False
                    break
            if not ok:
                continue  # r was removed; running[i] is now the next request
            pool.allocate(need)
            r.num_blocks_held += need  # a decoder's token itself is counted by the lazy sums
            scheduled[r.request_id] = n
            budget -= n
            i += 1
        # decoders that stayed keep their lazy state (materialized: sums unchanged)
        part = self._prefilling
        if part is not None and part.request_id in scheduled:
            chunks.append((part, scheduled[part.request_id]))
        elif part is not None and part.state == WAITING:
            self._prefilling = None

    # ---- runs of decode-only steps ----------------------------------------------------------

    def can_fast_forward(self) -> bool:
        """True when the next steps are decode-only with an unchanging batch until an event:
        no prefill in flight and nobody the scheduler could admit."""
        if self._prefilling is not None or not self._decoding or self._loading or self._loaded:
            return False
        if not len(self.waiting):
            return True
        # a reservation that shrinks step by step may let the waiting head in without a finish
        return self._admission_blocked and not (self._ratio_decays and self.policy.decaying)

    def advance_decode_run(self, now_s: float, until_s: float, max_steps: int = 1 << 62) -> tuple[int, float]:
        """Run consecutive decode-only steps, the first starting at ``now_s``, while each starts
        before ``until_s``, nobody finishes or changes rate, and the pool has blocks; returns
        (steps run, end time of the last). Every step is priced, and every counter accumulated,
        by the same operations as :meth:`step` would use, so a run equals its steps taken one at
        a time, bit for bit."""
        if not self.can_fast_forward():
            return 0, now_s
        if self._rate_change_heap and self._rate_change_heap[0][0] <= self._decode_step:
            return 0, now_s
        self._clean_heap_tops()
        step0 = self._decode_step
        kmax = max_steps
        if self._finish_heap:
            kmax = min(kmax, self._finish_heap[0][0] - 1 - step0)
        if self._rate_change_heap:
            kmax = min(kmax, self._rate_change_heap[0][0] - step0)
        if kmax <= 0:
            return 0, now_s
        n_waiting = len(self.waiting)
        if n_waiting > self.max_waiting:
            self.max_waiting = n_waiting
        B = len(self._decoding)
        offsets = self._join_offset_sum
        window = self.window
        offsets_below, n_below, n_full = (
            self._join_offset_sum_below_window,
            self._num_below_window,
            self._num_window_full,
        )
        blocks_due = self._blocks_due
        bs = self.block_size
        # an eviction may shorten the prefix hits of the request waiting at the head and let it
        # in (fewer hits, fewer idle blocks to take back): with requests waiting, a run takes
        # free blocks only, and the step that evicts is taken on its own
        avail = self.pool.free if n_waiting and self.caching else self.pool.available()
        durs = self.itl_durations
        weights = self.itl_weights
        ends = self.decode_end_times if self.record_token_times else None
        busy_s, seq_time = self.busy_s, self.seq_time
        t = now_s
        k = 0
        taken = 0
        while k < kmax and t < until_s:
            need = blocks_due[(-(step0 + k)) % bs]
            if need > avail:
                break
            c = step0 + k + 1
            kv = float(offsets + B * c)
            wkv = kv if window is None else float(offsets_below + n_below * c + n_full * window)
            dur = self._price(B, B, kv, wkv, kv, wkv, 0)
            avail -= need
            taken += need
            t = t + dur
            busy_s += dur
            seq_time += B * dur
            durs.append(dur)
            weights.append(B)
            if ends is not None:
                ends.append(t)
            k += 1
        if k == 0:
            return 0, now_s
        self._allocate(taken)
        self._decode_step = step0 + k
        if self._reserving:
            self.policy.on_decode_steps(k)
        self.steps += k
        self.busy_s, self.seq_time = busy_s, seq_time
        if self.max_batch < B:
            self.max_batch = B
        self._last_end_s = t
        return k, t

    # ---- checks -----------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Raise AssertionError unless every block is accounted for: the pool's counts add up,
        each running request holds exactly the blocks its context needs, and the blocks in use
        are those requests' private blocks plus the cached blocks they share; and unless the
        running sums equal their definitions."""
        pool = self.pool
        pool.check()
        running = list(self._decoding.values())
        if self._prefilling is not None:
            running.append(self._prefilling)
        # requests loading their KV, or waiting with it loaded, hold blocks too
        running += [r for r in self._requests.values() if r.state == WAITING and r.num_blocks_held]
        private = 0
        holders: dict[tuple[int, int], int] = {}
        for r in running:
            if r.state == DECODING:
                computed = r.computed_at_join + self._decode_step - r.step_at_join
                held = self._blocks_for(computed)
            else:
                computed = r.num_computed_tokens
                held = r.num_blocks_held
                assert held >= self._blocks_for(computed), (r.request_id, held, computed)
            private += held - (pool.per_key * r.cached_blocks_held if self.caching else 0)
            ranges = r.cached_keys_held
            assert r.cached_blocks_held == sum(ranges[p + 2] - ranges[p + 1] for p in range(0, len(ranges), 3))
            for p in range(0, len(ranges), 3):
                for i in range(ranges[p + 1], ranges[p + 2]):
                    holders[(ranges[p], i)] = holders.get((ranges[p], i), 0) + 1
        active = pool.held_blocks()
        assert holders == active, "cached-block reference counts disagree with running requests"
        in_use = private + pool.per_key * len(active) + self.held_blocks
        assert in_use == pool.used, (private, len(active), self.held_blocks, pool.used)
        decoders = self._decoding.values()
        assert sum(r.computed_at_join - r.step_at_join for r in decoders) == self._join_offset_sum
        assert sum(self._blocks_due) == sum(r.blocks_per_crossing for r in decoders), "growth sums"
        assert self.max_num_seqs >= len(self._decoding)
        left = 0
        for r in self._requests.values():
            if r.state == DECODING:
                left += r.output_tokens - (r.output_at_join + self._decode_step - r.step_at_join)
            elif r.state == WAITING:  # a loaded prompt counts as waiting work until it is scheduled
                left += r.prompt_tokens + r.output_tokens - r.num_output_tokens
            else:
                left += max(0, r.prompt_tokens - r.num_computed_tokens) + r.output_tokens - r.num_output_tokens
        assert left == self.num_inflight_tokens, (left, self.num_inflight_tokens)
