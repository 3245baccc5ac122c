"""One replica of a P/D fleet: an engine in the ``prefill`` or ``decode`` role, its NIC links, and
the KV blocks it holds for transfers.

- A **prefill** replica runs each request with one output token (vLLM's proxy sends the prefill
  instance ``max_tokens=1``; SGLang's prefill server stops after the first token) and, when it
  finishes, keeps the prompt's blocks (:meth:`Engine.hold_blocks`) until the KV has crossed the
  link: the blocks the prefill side holds are what backpressure from a full decode side costs it.
- A **decode** replica keeps a queue of requests whose KV waits for room (SGLang's decode
  "prealloc" queue; vLLM's decode instance allocates blocks for the remote KV before it pulls
  them): a request's blocks are reserved when the pool has them beyond one block per running
  request (room for the running requests' next tokens), then the transfer starts; when it
  lands the reservation becomes the request's own (:meth:`Engine.add_transferred`).

The replica steps its engine itself (the loop of :class:`~servecap.sim.engine_server.EngineServer`,
with runs of decode-only steps) because an engine whose every block is held for transfers has
waiting work it cannot start: it then **stalls** (no next event) until a hold is released.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from servecap.core.kv_transfer import KvFootprint
from servecap.fleet.pd.link import KvLink
from servecap.fleet.pools import DRAINING, FAILED, READY, STARTING, STOPPED, PoolReplica
from servecap.sim.engine import Engine
from servecap.sim.request_state import RequestState
from servecap.sim.setup import prefix_caching_supported

__all__ = ["DRAINING", "FAILED", "READY", "STARTING", "STOPPED", "PdReplica"]

_INF: Final = float("inf")


class PdReplica(PoolReplica):
    """A replica of a prefill or a decode pool: the core's lifecycle and view
    (:class:`~servecap.fleet.pools.PoolReplica`; its ``num_waiting`` counts the requests
    waiting for room, ``prealloc``), plus its link, the blocks it holds for transfers and its
    own stepping."""

    def __init__(
        self,
        replica_id: int,
        pool: str,
        pool_index: int,
        role: str,
        engine: Engine,
        kv: KvFootprint,
        link: KvLink,
        requested_s: float,
    ) -> None:
        super().__init__(replica_id, pool, pool_index, role, engine, requested_s)
        self.is_prefill = role == "prefill"
        self.kv = kv
        self.link = link
        self.inflight: dict[int, float] = {}  # in the engine: id -> time added
        self.held: dict[int, int] = {}  # id -> blocks held for its transfer (or reserved for it)
        self._busy = False
        self._end_s = 0.0
        self._start_s = 0.0
        self._step_s = 0.0
        self.stalled = False
        self._blocks: dict[int, int] = {}
        layout = engine.layout
        self._uniform_groups = len(layout.groups) if prefix_caching_supported(layout) else 0
        self._block_size = layout.block_size

    # -- serving ----------------------------------------------------------------------------------

    def _count(self, t_s: float) -> None:
        self.area_s += len(self.inflight) * (t_s - self.t_last_s)
        self.t_last_s = t_s

    def add(
        self, request_id: int, prompt: int, output: int, keys: Sequence[int] | None, priority: int, now_s: float
    ) -> bool:
        """A prefill request (``output`` 1) into the engine at ``now_s``; False when refused."""
        if not self.engine.add(request_id, prompt, output, keys, priority, now_s):
            return False
        self._entered(request_id, now_s)
        return True

    def add_transferred(self, request_id: int, prompt: int, output: int, now_s: float) -> bool:
        """A request whose KV just landed, into the decode engine; False when refused."""
        if not self.engine.add_transferred(request_id, prompt, output, now_s):
            return False
        self._entered(request_id, now_s)
        return True

    def _entered(self, request_id: int, now_s: float) -> None:
        self._count(now_s)
        self.inflight[request_id] = now_s
        self.routed += 1
        self._wake(now_s)

    def _wake(self, now_s: float) -> None:
        self.stalled = False
        if not self._busy and now_s > self._start_s:
            self._start_s = now_s
        self._note()

    def blocks_for(self, tokens: int) -> int:
        """Blocks a context of ``tokens`` tokens holds in this engine: one per group every
        ``block_size`` tokens where every group is full attention (the engine's own closed
        form), else the layout's count (memoised per length)."""
        groups = self._uniform_groups
        if groups:
            return groups * -(-tokens // self._block_size)
        n = self._blocks.get(tokens)
        if n is None:
            n = self._blocks[tokens] = self.engine.layout.blocks_held(tokens)
        return n

    def hold(self, request_id: int, blocks: int) -> bool:
        if not self.engine.hold_blocks(blocks):
            return False
        self.held[request_id] = blocks
        return True

    def release(self, request_id: int, now_s: float) -> None:
        """Give back the blocks held for ``request_id`` (none: nothing)."""
        n = self.held.pop(request_id, 0)
        if n:
            self.engine.release_held_blocks(n)
            self._wake(now_s)

    def drop(self, request_id: int, now_s: float) -> None:
        """Forget ``request_id`` (its try was abandoned): its held blocks, its place in the queue
        for room, its place in the engine."""
        self.release(request_id, now_s)
        if request_id in self.prealloc:
            self.prealloc.remove(request_id)
        if request_id in self.inflight:
            self._count(now_s)
            self.engine.abort(request_id)
            self.sojourn_s += now_s - self.inflight.pop(request_id)
            self._wake(now_s)

    def _note(self) -> None:
        if self._busy:
            self.next_s = self._end_s
        elif self.engine.has_work() and not self.stalled:
            self.next_s = self._start_s
        else:
            self.next_s = _INF

    def advance(self, t_s: float, *, early: bool) -> list[RequestState]:
        """Run the engine up to ``t_s`` (the seam's tie rule: work ending at ``t_s`` is done, work
        starting then waits); the requests that finished, in order. With ``early``, stop right
        after the first step that finished requests."""
        engine = self.engine
        out: list[RequestState] = []
        while True:
            if self._busy:
                end = self._end_s
                if end > t_s:
                    break
                self._busy = False
                self._start_s = end
                done = engine.take_finished()
                if done:
                    for r in done:
                        e = r.end_s
                        assert e is not None
                        self._count(e)
                        added = self.inflight.pop(r.request_id)
                        self.sojourn_s += e - added
                        self.completed += 1
                        self.last_finish_s = e
                    out.extend(done)
                    if early:
                        break
                continue
            start = self._start_s
            if start >= t_s or self.stalled or not engine.has_work():
                break
            if t_s - start > 8.0 * self._step_s and engine.can_fast_forward():
                k, end = engine.advance_decode_run(start, t_s)
                if k:
                    self._busy, self._end_s = True, end
                    continue
            end = engine.run_step(start)
            if end <= start:  # nothing could start: its blocks are held for transfers
                self.stalled = True
                break
            self._step_s = end - start
            self._busy, self._end_s = True, end
        self._note()
        return out

    def has_work(self) -> bool:
        return self._busy or self.engine.has_work() or bool(self.held) or bool(self.prealloc)

    def close(self, t_s: float, state: str) -> list[int]:
        """Stop (or fail) at ``t_s``; the ids of the requests it still held, in the engine or not."""
        self._count(t_s)
        self.state = state
        self.stopped_s = t_s
        ids = list(self.inflight) + [i for i in self.held if i not in self.inflight] + list(self.prealloc)
        for added in self.inflight.values():
            self.sojourn_s += t_s - added
        self.inflight.clear()
        self.held.clear()
        self.prealloc.clear()
        self.next_s = _INF
        return list(dict.fromkeys(ids))
