"""One engine replica, modelled on vLLM's V1 scheduler: continuous batching, chunked prefill,
paged KV blocks allocated as requests grow, preemption by recompute, prefix caching.

The scheduler (vLLM ``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``), per step:

1. running requests, in order, each get their remaining tokens (one for a decoding request, the
   rest of the prompt — capped by the token budget — for one being prefilled); when the KV pool
   cannot hold a request's new tokens, the youngest running request (``fcfs``; the lowest
   priority under ``priority``) is preempted: its blocks are freed and it goes back to the front
   of the waiting queue, to be prefilled again later (prompt + the tokens it had produced);
2. if nothing was preempted, waiting requests are admitted in queue order while the token budget
   (``max_num_batched_tokens``), ``max_num_seqs`` and the pool allow; a request's prompt may be
   split across steps (chunked prefill), and prefix-cache hits skip whole leading blocks
   (at most ``(tokens - 1) // block_size`` of them: the last token is always computed);
3. a step that brings a request's computed tokens up to its known tokens emits one output token;
   the request finishes at its ``output_tokens``-th token and frees its blocks (keyed full
   blocks stay cached, evictable in LRU order).

The step's time is :class:`~servecap.sim.step_time.StepTimeModel` (the planner's roofline) of
the step's aggregates. Decoding requests are kept lazily — a request's computed tokens are
``c0 + (D - d0)`` for the engine's decode-step counter ``D`` — with running sums of context
tokens and per-residue counts of who needs a new block on which step, so a step costs O(1) in
the batch size, and :meth:`Engine.advance_decode_run` advances a whole run of decode-only steps
in which the batch does not change (no arrival, completion or admission) in one call.

Tokens are emitted at the end of their step. ``StepOutcome.decoded`` lists every request that
received a token in the step, first tokens included.
"""

from __future__ import annotations

import heapq
from collections import deque

from servecap.core.roofline import prefill_batch
from servecap.errors import ServecapError
from servecap.sim.engine_types import EngineRequest as EngineRequest
from servecap.sim.engine_types import EngineStats as EngineStats
from servecap.sim.engine_types import StepOutcome as StepOutcome
from servecap.sim.kv_pool import KvPool
from servecap.sim.setup import EngineSetup, prefix_caching_supported
from servecap.sim.step_time import StepTimeModel
from servecap.specs.model import AttentionKind

WAITING, PREFILL, DECODING, DONE = 0, 1, 2, 3


class _Req:
    __slots__ = (
        "arrival_s",
        "c0",
        "cached_tokens",
        "computed",
        "d0",
        "end_s",
        "epoch",
        "first_token_s",
        "g0",
        "gen",
        "held",
        "itl_extra",
        "keys",
        "last_token_s",
        "mult",
        "nreg",
        "output",
        "preemptions",
        "prio",
        "prompt",
        "refs",
        "rid",
        "sched_s",
        "segments",
        "seq",
        "state",
        "wsat",
    )

    def __init__(
        self, rid: int, prompt: int, output: int, keys: tuple[int, ...] | None, prio: int, seq: int, arrival_s: float
    ) -> None:
        self.rid = rid
        self.prompt = prompt
        self.output = output
        self.keys = keys
        self.prio = prio
        self.seq = seq
        self.arrival_s = arrival_s
        self.gen = 0  # output tokens produced (materialized; see Engine._materialize)
        self.computed = 0  # tokens whose KV is in the cache
        self.held = 0  # physical blocks held (materialized for decoders)
        self.refs: list[int] = []  # cached block keys this request holds
        self.nreg = 0  # blocks [0, nreg) already looked up / published
        self.c0 = self.d0 = self.g0 = 0
        self.mult = 0
        self.wsat = False
        self.epoch = 0
        self.state = WAITING
        self.first_token_s: float | None = None
        self.last_token_s: float | None = None
        self.end_s: float | None = None
        self.sched_s: float | None = None
        self.preemptions = 0
        self.cached_tokens = 0
        self.segments: list[tuple[int, int]] | None = None
        self.itl_extra: list[float] | None = None


class Engine:
    """One replica's scheduler, KV block manager, prefix cache and step-time model.

    Drive it by a discrete-event loop (:func:`servecap.sim.simulate`) or a wall clock (the
    emulator): ``add_request`` when a request arrives, then while ``has_work()``: ``step(now)``
    and wait ``duration_s``.
    """

    def __init__(
        self,
        setup: EngineSetup,
        *,
        keep_finished: bool = False,
        record_token_times: bool = False,
        exact_step_time: bool = False,
    ) -> None:
        self.setup = setup
        layout = setup.layout
        self.layout = layout
        self.bs = layout.block_size
        self._blocks_held = layout.blocks_held
        self._linear = prefix_caching_supported(layout)
        self._g = len(layout.groups)
        self.caching = setup.enable_prefix_caching and self._linear
        self.pool = KvPool(setup.num_gpu_blocks, blocks_per_key=self._g if self.caching else 1)
        self.model = StepTimeModel(setup.step, setup.efficiency, exact=exact_step_time)
        self.window = setup.step.window_tokens
        self.max_seqs = setup.max_num_seqs
        self.max_tokens = setup.max_num_batched_tokens
        self.fcfs = setup.scheduling_policy == "fcfs"
        self.keep_finished = keep_finished
        self.record_token_times = record_token_times
        thresholds = set()
        for g in layout.groups:
            if g.kind is AttentionKind.SLIDING and g.window_tokens is not None:
                cap = -(-(g.window_tokens - 1) // self.bs) + 1
                thresholds.add((cap - 1) * self.bs + 1)
        self._thresholds = sorted(thresholds)

        self._waiting: deque[_Req] = deque()
        self._wheap: list[tuple[int, int, _Req]] = []
        self._reqs: dict[int, _Req] = {}
        self._decoders: dict[int, _Req] = {}
        self._partial: _Req | None = None
        self._seq = 0
        self._D = 0
        self._A = 0  # Σ (c0 - d0) over decoders
        self._grow = [0] * self.bs  # blocks decoders of each residue class take at a crossing
        self._A_un = 0  # the same over decoders whose context is still below the window
        self._n_un = 0
        self._n_sat = 0
        self._fin: list[tuple[int, int, int, int]] = []  # (D at finish, seq, rid, epoch)
        self._chg: list[tuple[int, int, int, int]] = []  # (D of a rate change, seq, rid, epoch)
        self._admission_blocked = False
        self._last_end = 0.0
        # counters
        self.preemptions = 0
        self.hit_tokens = 0
        self.query_tokens = 0
        self.steps = 0
        self.busy_s = 0.0
        self.seq_time = 0.0  # Σ batch size x step time
        self.max_batch = 0
        self.itl_durations: list[float] = []
        self.itl_weights: list[int] = []
        self.decode_end_times: list[float] = []  # end of the step that moved D to i + 1
        self.finished: list[_Req] = []
        self._new_finished: list[_Req] = []

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
        prefix_key: tuple[int, ...] | None,
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
        if request_id in self._reqs:
            raise ServecapError("request_id", request_id, "already in the engine")
        limit = self.setup.waiting_queue_limit
        if limit is not None and self.num_waiting >= limit:
            return False
        r = _Req(
            request_id, prompt_tokens, output_tokens, prefix_key if self.caching else None, priority, self._seq, now_s
        )
        self._seq += 1
        if self.record_token_times:
            r.segments = []
            r.itl_extra = []
        self._reqs[request_id] = r
        if self.fcfs:
            self._waiting.append(r)
        else:
            heapq.heappush(self._wheap, (priority, r.seq, r))
        self._admission_blocked = False
        return True

    def has_work(self) -> bool:
        return bool(self._decoders or self._partial is not None or self._waiting or self._wheap)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting) if self.fcfs else len(self._wheap)

    @property
    def num_running(self) -> int:
        return len(self._decoders) + (self._partial is not None)

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
        )

    def step(self, now_s: float) -> StepOutcome:
        """Schedule and run one iteration starting at ``now_s``."""
        out = self._step(now_s, True)
        assert out is not None
        return out

    def abort(self, request_id: int) -> bool:
        """Drop a request (client gone); frees its blocks. False if unknown or finished."""
        r = self._reqs.get(request_id)
        if r is None or r.state == DONE:
            return False
        if r.state == WAITING:
            if self.fcfs:
                self._waiting.remove(r)
            else:
                self._wheap = [e for e in self._wheap if e[2] is not r]
                heapq.heapify(self._wheap)
        else:
            self._free_running(r)
        r.state = DONE
        del self._reqs[request_id]
        self._admission_blocked = False
        return True

    def take_finished(self) -> list[_Req]:
        """Requests finished since the last call (the simulator's hook)."""
        out = self._new_finished
        self._new_finished = []
        return out

    # ---- lazy decoders ----------------------------------------------------------------------

    def _bh(self, tokens: int) -> int:
        if self._linear:
            return self._g * -(-tokens // self.bs)
        return self._blocks_held(tokens)

    def _materialize(self, r: _Req) -> None:
        """Bring a decoder's counters up to the current step counter (aggregates unchanged)."""
        steps = self._D - r.d0
        if steps:
            r.computed = r.c0 + steps
            r.gen = r.g0 + steps
            if r.segments is not None:
                r.segments.append((r.d0, self._D))
            r.c0, r.g0, r.d0 = r.computed, r.gen, self._D
        # a lazy decoder's stored count may be stale (it only grows); one allocated ahead for
        # this step's token (the request-by-request path) holds one block more
        held = self._bh(r.computed)
        if held > r.held:
            r.held = held

    def _crossing_mult(self, computed: int) -> int:
        """Blocks taken at the next block crossing after ``computed`` tokens."""
        if self._linear:
            return self._g
        bs = self.bs
        t = (computed // bs + 1) * bs + 1 if computed % bs else computed + 1
        return self._blocks_held(t) - self._blocks_held(t - 1)

    def _add_decoder(self, r: _Req) -> None:
        D = self._D
        r.state = DECODING
        r.c0, r.g0, r.d0 = r.computed, r.gen, D
        r.epoch += 1
        off = r.c0 - D
        self._A += off
        r.mult = self._crossing_mult(r.computed)
        self._grow[off % self.bs] += r.mult
        if self.window is not None:
            if r.computed + 1 >= self.window:
                r.wsat = True
                self._n_sat += 1
            else:
                r.wsat = False
                self._A_un += off
                self._n_un += 1
                heapq.heappush(self._chg, (self.window - 1 - off, r.seq, r.rid, r.epoch))
        if self._thresholds:
            self._push_threshold(r)
        heapq.heappush(self._fin, (D + r.output - r.gen, r.seq, r.rid, r.epoch))
        self._decoders[r.rid] = r

    def _push_threshold(self, r: _Req) -> None:
        computed = r.c0 + self._D - r.d0
        for thr in self._thresholds:
            if thr > computed:  # the crossing at ctx = thr still grows; change before thr + 1
                heapq.heappush(self._chg, (thr - (r.c0 - r.d0), r.seq, r.rid, r.epoch))
                return

    def _remove_decoder(self, r: _Req) -> None:
        off = r.c0 - r.d0
        self._A -= off
        self._grow[off % self.bs] -= r.mult
        if self.window is not None:
            if r.wsat:
                self._n_sat -= 1
            else:
                self._A_un -= off
                self._n_un -= 1
        del self._decoders[r.rid]

    def _apply_changes(self) -> None:
        """Rate changes due before the step with counter D: window saturation, block growth."""
        chg = self._chg
        D = self._D
        while chg and chg[0][0] <= D:
            _, _, rid, epoch = heapq.heappop(chg)
            r = self._reqs.get(rid)
            if r is None or r.state != DECODING or r.epoch != epoch:
                continue
            off = r.c0 - r.d0
            computed = off + D
            if self.window is not None and not r.wsat and computed + 1 >= self.window:
                r.wsat = True
                self._A_un -= off
                self._n_un -= 1
                self._n_sat += 1
            new_mult = self._crossing_mult(computed)
            if new_mult != r.mult:
                self._grow[off % self.bs] += new_mult - r.mult
                r.mult = new_mult
            if self._thresholds and any(t > computed for t in self._thresholds):
                self._push_threshold(r)

    def _clean_heap_tops(self) -> None:
        for heap in (self._fin, self._chg):
            while heap:
                _, _, rid, epoch = heap[0]
                r = self._reqs.get(rid)
                if r is not None and r.state == DECODING and r.epoch == epoch:
                    break
                heapq.heappop(heap)

    # ---- freeing ----------------------------------------------------------------------------

    def _free_running(self, r: _Req) -> None:
        """Release a running request's blocks (its cached blocks become evictable)."""
        if r.state == DECODING:
            self._materialize(r)
            self._remove_decoder(r)
        elif self._partial is r:
            self._partial = None
        self._release_blocks(r)

    def _release_blocks(self, r: _Req) -> None:
        pool = self.pool
        private = r.held - pool.per_key * len(r.refs) if self.caching else r.held
        pool.release(private)
        for key in reversed(r.refs):  # the tail goes first into the LRU list (evicted first)
            pool.drop(key)
        r.refs = []
        r.held = 0
        r.nreg = 0
        self._admission_blocked = False  # room was made: the waiting queue gets another look

    def _publish(self, r: _Req) -> None:
        """Cache the request's keyed full blocks computed so far."""
        keys = r.keys
        if keys is None:
            return
        upto = min(len(keys), r.computed // self.bs)
        pool = self.pool
        for i in range(r.nreg, upto):
            if pool.publish(keys[i]):
                r.refs.append(keys[i])
        if upto > r.nreg:
            r.nreg = upto

    def _preempt(self, r: _Req, now_s: float) -> None:
        if r.state == DECODING:
            r.last_token_s = self._last_end
        self._free_running(r)
        r.computed = 0
        r.state = WAITING
        r.preemptions += 1
        self.preemptions += 1
        if self.fcfs:
            self._waiting.appendleft(r)
        else:
            heapq.heappush(self._wheap, (r.prio, r.seq, r))

    def _finish(self, r: _Req, end_s: float) -> None:
        self._materialize(r)
        self._remove_decoder(r)
        self._publish(r)
        self._release_blocks(r)
        r.state = DONE
        r.end_s = end_s
        del self._reqs[r.rid]
        if self.keep_finished:
            self.finished.append(r)
        self._new_finished.append(r)

    # ---- one step ---------------------------------------------------------------------------

    def _step(self, now: float, want_ids: bool) -> StepOutcome | None:
        if self._chg:
            self._apply_changes()
        D = self._D
        bs = self.bs
        pool = self.pool
        decoders = self._decoders
        preempted: list[_Req] = []
        budget = self.max_tokens - len(decoders)
        chunks: list[tuple[_Req, int]] = []  # prefill work of this step: (request, tokens)

        need = self._grow[(-D) % bs]
        part = self._partial
        part_chunk = part_need = 0
        if part is not None:
            part_chunk = min(part.prompt + part.gen - part.computed, budget)
            part_need = self._bh(part.computed + part_chunk) - part.held
        if need + part_need > pool.available():
            self._schedule_running_exact(now, preempted, chunks)
            budget = self.max_tokens - len(decoders) - sum(n for _, n in chunks)
        else:
            pool.allocate(need + part_need)
            if part is not None:
                part.held += part_need
                chunks.append((part, part_chunk))
                budget -= part_chunk

        # admit waiting requests (vLLM skips this in a step that preempted)
        n_running = len(decoders) + len(chunks)
        blocked = False
        if not preempted:
            while budget > 0:
                if self.fcfs:
                    if not self._waiting:
                        break
                    r = self._waiting[0]
                else:
                    if not self._wheap:
                        break
                    r = self._wheap[0][2]
                if n_running >= self.max_seqs:
                    blocked = True
                    break
                total = r.prompt + r.gen
                hits = idle = 0
                if r.keys is not None:
                    hits, idle = pool.longest_hit(r.keys, (total - 1) // bs)
                start = hits * bs
                chunk = min(total - start, budget)
                new_blocks = self._bh(start + chunk) - pool.per_key * hits
                if new_blocks + idle * pool.per_key > pool.available():
                    blocked = True
                    break
                if self.fcfs:
                    self._waiting.popleft()
                else:
                    heapq.heappop(self._wheap)
                if hits:
                    keys = r.keys
                    assert keys is not None
                    for i in range(hits):
                        pool.acquire(keys[i])
                    r.refs = list(keys[:hits])
                r.nreg = hits
                pool.allocate(new_blocks)
                r.computed = start
                r.held = self._bh(start + chunk)
                r.state = PREFILL
                if r.sched_s is None:
                    r.sched_s = now
                if r.preemptions == 0:
                    r.cached_tokens = start
                self.hit_tokens += start
                self.query_tokens += total
                chunks.append((r, chunk))
                budget -= chunk
                n_running += 1
        self._admission_blocked = blocked

        # the step's shape, from running sums
        B = len(decoders)
        kv = float(self._A + B * (D + 1))
        wkv = float(self._A_un + self._n_un * (D + 1) + self._n_sat * self.window) if self.window else kv
        pairs, wpairs = kv, wkv
        num_tokens = B
        prompt = 0
        for r, n in chunks:
            s = r.computed
            if self.window is None:
                p = n * s + n * (n + 1) / 2.0  # causal: query i attends s + i + 1 keys
                kv += s
                wkv += s
                pairs += p
                wpairs += p
            else:
                shape = prefill_batch(n, self.window, start_tokens=s)
                kv += shape.kv_tokens
                wkv += shape.window_kv_tokens
                pairs += shape.attn_pairs
                wpairs += shape.window_attn_pairs
            num_tokens += n
            prompt += n
        num_seqs = B + len(chunks)
        dur = self.model.time(num_tokens, num_seqs, kv, wkv, pairs, wpairs, prompt) if num_tokens else 0.0
        end = now + dur

        # apply: decodes advance, finishes, prefill progress
        first_ids: list[int] = []
        decoded_ids: list[int] = list(decoders) if want_ids else []
        finished_ids: list[int] = []
        if B:
            self._D = D = D + 1
            self.itl_durations.append(dur)
            self.itl_weights.append(B)
            if self.record_token_times:
                self.decode_end_times.append(end)
            fin = self._fin
            while fin and fin[0][0] <= D:
                _, _, rid, epoch = heapq.heappop(fin)
                done = self._reqs.get(rid)
                if done is None or done.state != DECODING or done.epoch != epoch:
                    continue
                self._finish(done, end)
                if want_ids:
                    finished_ids.append(rid)
        self._partial = None
        for r, n in chunks:
            r.computed += n
            if r.keys is not None:
                self._publish(r)
            if r.computed < r.prompt + r.gen:
                self._partial = r
                continue
            r.gen += 1
            if want_ids:
                decoded_ids.append(r.rid)
            if r.gen == 1:
                r.first_token_s = end
                if want_ids:
                    first_ids.append(r.rid)
            else:  # the first token after a recompute: its gap spans the preemption
                assert r.last_token_s is not None
                gap = end - r.last_token_s
                self.itl_durations.append(gap)
                self.itl_weights.append(1)
                if r.itl_extra is not None:
                    r.itl_extra.append(end)
            if r.gen >= r.output:
                self._finish_after_prefill(r, end)
                if want_ids:
                    finished_ids.append(r.rid)
            else:
                self._add_decoder(r)
        self._last_end = end
        self.steps += 1
        self.busy_s += dur
        self.seq_time += num_seqs * dur
        if num_seqs > self.max_batch:
            self.max_batch = num_seqs
        if not want_ids:
            return None
        return StepOutcome(
            duration_s=dur,
            first_tokens=tuple(first_ids),
            decoded=tuple(decoded_ids),
            finished=tuple(finished_ids),
            preempted=tuple(r.rid for r in preempted),
            num_running=self.num_running,
            num_waiting=self.num_waiting,
            kv_blocks_used=pool.used,
            kv_blocks_total=pool.total,
            prefix_cache_hit_tokens=self.hit_tokens,
            num_tokens=num_tokens,
            num_prefill_tokens=prompt,
        )

    def _finish_after_prefill(self, r: _Req, end: float) -> None:
        """A request whose last token came out of a prefill step (one-token answers, or the
        last token right after a recompute)."""
        self._publish(r)
        self._release_blocks(r)
        r.state = DONE
        r.end_s = end
        del self._reqs[r.rid]
        if self.keep_finished:
            self.finished.append(r)
        self._new_finished.append(r)

    def _schedule_running_exact(self, now: float, preempted: list[_Req], chunks: list[tuple[_Req, int]]) -> None:
        """The running loop request by request, preempting when the pool runs out (rare)."""
        pool = self.pool
        running: list[_Req] = list(self._decoders.values())
        for r in running:
            self._materialize(r)
        if self._partial is not None:
            running.append(self._partial)
        budget = self.max_tokens
        scheduled: dict[int, int] = {}
        i = 0
        while i < len(running):
            r = running[i]
            n = 1 if r.state == DECODING else min(r.prompt + r.gen - r.computed, budget)
            need = self._bh(r.computed + n) - r.held
            ok = True
            while need > pool.available():
                if self.fcfs:
                    vi = len(running) - 1
                else:
                    vi = max(range(len(running)), key=lambda j: (running[j].prio, running[j].seq))
                victim = running.pop(vi)
                if vi < i:
                    i -= 1
                if victim.rid in scheduled:  # undo what the victim got this step
                    budget += scheduled.pop(victim.rid)
                self._preempt(victim, now)
                preempted.append(victim)
                if victim is r:
                    ok = False
                    break
            if not ok:
                continue  # r was removed; running[i] is now the next request
            pool.allocate(need)
            r.held += need  # a decoder's token itself is counted by the lazy sums
            scheduled[r.rid] = n
            budget -= n
            i += 1
        # decoders that stayed keep their lazy state (materialized: sums unchanged)
        part = self._partial
        if part is not None and part.rid in scheduled:
            chunks.append((part, scheduled[part.rid]))
        elif part is not None and part.state == WAITING:
            self._partial = None

    # ---- runs of decode-only steps ----------------------------------------------------------

    def can_fast_forward(self) -> bool:
        """True when the next steps are decode-only with an unchanging batch until an event:
        no prefill in flight and nobody the scheduler could admit."""
        if self._partial is not None or not self._decoders:
            return False
        return not (self._waiting or self._wheap) or self._admission_blocked

    def advance_decode_run(self, now_s: float, until_s: float, max_steps: int = 1 << 62) -> tuple[int, float]:
        """Run consecutive decode-only steps, the first starting at ``now_s``, while each starts
        before ``until_s``, nobody finishes or changes rate, and the pool has blocks; returns
        (steps run, end time of the last). Every step is priced by the same call, with the same
        arguments, as :meth:`step` would make, so a run equals its steps taken one at a time."""
        if not self.can_fast_forward():
            return 0, now_s
        if self._chg and self._chg[0][0] <= self._D:
            return 0, now_s
        self._clean_heap_tops()
        D = self._D
        kmax = max_steps
        if self._fin:
            kmax = min(kmax, self._fin[0][0] - 1 - D)
        if self._chg:
            kmax = min(kmax, self._chg[0][0] - D)
        if kmax <= 0:
            return 0, now_s
        B = len(self._decoders)
        A = self._A
        W = self.window
        A_un, n_un, n_sat = self._A_un, self._n_un, self._n_sat
        grow = self._grow
        bs = self.bs
        avail = self.pool.available()
        time = self.model.time
        durs = self.itl_durations
        weights = self.itl_weights
        ends = self.decode_end_times if self.record_token_times else None
        t = now_s
        k = 0
        taken = 0
        while k < kmax and t < until_s:
            need = grow[(-(D + k)) % bs]
            if need > avail:
                break
            c = D + k + 1
            kv = float(A + B * c)
            wkv = float(A_un + n_un * c + n_sat * W) if W else kv
            dur = time(B, B, kv, wkv, kv, wkv, 0)
            avail -= need
            taken += need
            t += dur
            durs.append(dur)
            weights.append(B)
            if ends is not None:
                ends.append(t)
            k += 1
        if k == 0:
            return 0, now_s
        self.pool.allocate(taken)
        self._D = D + k
        self.steps += k
        self.busy_s += t - now_s
        self.seq_time += B * (t - now_s)
        if self.max_batch < B:
            self.max_batch = B
        self._last_end = t
        return k, t

    # ---- checks -----------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Raise AssertionError unless every block is accounted for: the pool's counts add up,
        each running request holds exactly the blocks its context needs, and the blocks in use
        are those requests' private blocks plus the cached blocks they share."""
        pool = self.pool
        pool.check()
        running = list(self._decoders.values())
        if self._partial is not None:
            running.append(self._partial)
        private = 0
        holders: dict[int, int] = {}
        for r in running:
            computed = r.c0 + self._D - r.d0 if r.state == DECODING else r.computed
            held = self._bh(computed) if r.state == DECODING else r.held
            if r.state == DECODING:
                assert held == self._bh(computed)
            else:
                assert held >= self._bh(computed), (r.rid, held, computed)
            private += held - (pool.per_key * len(r.refs) if self.caching else 0)
            for key in r.refs:
                holders[key] = holders.get(key, 0) + 1
        active = {k: c for k, c in pool.refs.items() if c > 0}
        assert holders == active, "cached-block reference counts disagree with running requests"
        assert private + pool.per_key * len(active) == pool.used, (private, len(active), pool.used)
        B = len(self._decoders)
        assert sum(r.c0 - r.d0 for r in self._decoders.values()) == self._A
        assert sum(self._grow) == sum(r.mult for r in self._decoders.values()), "growth sums"
        assert self.max_seqs >= B
