"""One engine replica behind the loop's :class:`~servecap.sim.server.Server` seam.

It starts a step as soon as the engine has work — at the end of the previous step, or at the
arrival that brought work to an idle engine — and, per the seam's tie rule, not before every
request arriving at that instant was added. :meth:`EngineServer.advance_to` runs the steps in a
tight loop up to the time the loop asks for, returning after each step that finished requests.
With ``decode_runs`` a step that would be one of a run of decode-only steps with an unchanging
batch starts the whole run instead (:meth:`Engine.advance_decode_run`, bounded by the time asked
for) when the time asked for is more than eight steps away: identical results, fewer iterations.
An engine whose only work is asynchronous loads from its KV tiers (:mod:`servecap.sim.kv_tiers`)
is idle until the first ends, or until a request arrives.
"""

from __future__ import annotations

from collections.abc import Sequence

from servecap.results.record import RequestRecord
from servecap.sim.engine import Engine
from servecap.sim.server import ArrivingRequest, FinishedRequest
from servecap.sim.traffic import OpenLoopRequest
from servecap.workload.block_hash import HashBlocks
from servecap.workload.request import block_keys

_INF = float("inf")


class EngineServer:
    """:class:`~servecap.sim.server.Server` over one :class:`Engine`."""

    def __init__(
        self,
        engine: Engine,
        *,
        decode_runs: bool = True,
        check_invariants: bool = False,
        stop_at_finishes: bool = True,
    ) -> None:
        self.engine = engine
        # return from advance_to after each step that finished requests (the seam's rule, which a
        # closed-loop source needs); an open-loop source does not, and the loop runs faster
        self.stop_at_finishes = stop_at_finishes
        self.decode_runs = decode_runs
        self.check_invariants = check_invariants
        self.num_decode_runs = 0  # runs of decode-only steps started as one
        self.num_decode_run_steps = 0
        self._max_model_len = engine.setup.max_model_len
        self._caching = engine.caching
        self._busy = False  # a step (or a run of steps) is in flight
        self._end_s = 0.0  # ... ending then
        self._start_s = 0.0  # when idle: the earliest time the next step may start
        self._out: list[FinishedRequest] = []
        self._step_s = 0.0  # the last single step's duration
        # asynchronous loads from KV tiers (vLLM's offloading connector): an engine with nothing to
        # run but loads in flight waits for the first to end, or for an arrival before then
        tiers = engine.setup.kv_tiers
        self._load_waits = tiers is not None and tiers.async_load

    def add(self, request: ArrivingRequest, now_s: float) -> bool:
        if type(request) is OpenLoopRequest:  # the open-loop source's own: fields read directly (compiled)
            return self._add(
                request,
                request.request_id,
                request.prompt_tokens,
                request.output_tokens,
                request.prefix_group,
                request.prefix_tokens,
                None,
                request.priority,  # a traffic mix's class priority (0 without one)
                now_s,
                request.hash_blocks,
            )
        return self._add(
            request,
            request.request_id,
            request.prompt_tokens,
            request.output_tokens,
            request.prefix_group,
            request.prefix_tokens,
            request.conversation_id,
            request.priority,
            now_s,
            request.hash_blocks,
        )

    def _add(
        self,
        request: ArrivingRequest,
        request_id: int,
        prompt: int,
        output: int,
        group: int | None,
        prefix_tokens: int,
        conversation: int | None,
        priority: int,
        now_s: float,
        hash_blocks: HashBlocks | None = None,
    ) -> bool:
        if prompt + output > self._max_model_len:
            self._refuse(request, "too_long")
            return False
        keys: Sequence[int] | None = None
        if hash_blocks is not None:
            if self._caching:
                keys = hash_blocks.runs(self.engine.block_size, prompt)
        elif self._caching and (group is not None or conversation is not None):
            keys = block_keys(
                prefix_group=group,
                prefix_tokens=prefix_tokens,
                conversation_id=conversation,
                total_tokens=prompt + output,
                block_size=self.engine.block_size,
            )
        if not self.engine.add(request_id, prompt, output, keys, priority, now_s):
            self._refuse(request, "rejected")
            return False
        if not self._busy and (now_s > self._start_s or self._load_waits):
            self._start_s = now_s  # (waiting for a load: a request arriving first is scheduled now)
        return True

    def _refuse(self, request: ArrivingRequest, error: str) -> None:
        self._out.append(
            RequestRecord(
                request_id=request.request_id,
                arrival_s=request.arrival_s,
                prompt_tokens=request.prompt_tokens,
                output_tokens=request.output_tokens,
                error=error,
                user_id=request.user_id,
                turn=request.turn,
            )
        )

    def next_event_s(self) -> float:
        if self._busy:
            return self._end_s
        return self._start_s if self.engine.has_work() else _INF

    def has_work(self) -> bool:
        return self._busy or self.engine.has_work()

    def take_finished(self) -> Sequence[FinishedRequest]:
        out = self._out
        if out:
            self._out = []
        return out

    def advance_to(self, t_s: float) -> None:
        engine = self.engine
        while True:
            if self._busy:
                end = self._end_s
                if end > t_s:
                    return
                self._busy = False
                self._start_s = end
                if self.check_invariants:
                    engine.check_invariants()
                done = engine.take_finished()
                if done:
                    self._out.extend(done)
                    if self.stop_at_finishes:
                        return
                continue
            start = self._start_s
            if start >= t_s or not engine.has_work():
                return
            # a run pays off when it can be a few steps long (the results are the same either way)
            if self.decode_runs and t_s - start > 8.0 * self._step_s and engine.can_fast_forward():
                k, end = engine.advance_decode_run(start, t_s)
                if k:
                    self.num_decode_runs += 1
                    self.num_decode_run_steps += k
                    self._busy, self._end_s = True, end
                    continue
            end = engine.run_step(start)
            if end <= start:
                raise RuntimeError("the engine has work but scheduled nothing")  # a bug, not input
            if self._load_waits and engine.load_wait:
                engine.load_wait = False
                self._start_s = end  # idle until the load ends (next_event_s), unless a request comes
                continue
            self._step_s = end - start
            self._busy, self._end_s = True, end
