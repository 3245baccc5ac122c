"""The emulator in a P/D role, speaking what SGLang's router sends in PD mode.

SGLang's router (``--pd-disaggregation --prefill URL BOOTSTRAP_PORT --decode URL``) sends each
request to the chosen prefill and decode servers at once, adding ``bootstrap_host`` (the
prefill server's host), ``bootstrap_port`` and ``bootstrap_room`` (a random id pairing the two)
to the JSON body, and streams the decode server's answer (SGLang docs,
advanced_features/pd_disaggregation.md; the fields are visible in what reaches a server). The
emulator plays both sides on the wall clock with the simulator's arithmetic:

- ``prefill``: the request runs with one output token (as SGLang's and vLLM's prefill servers
  do); when it finishes, the prompt's KV blocks stay held in the engine under its room;
  ``GET /servecap/pd/kv/{room}`` (served on the bootstrap port, which is the server's own)
  waits for the room's prefill, then holds the request for the transfer — first come, first
  served on this server's link: ``latency + pieces x overhead + bytes / (bandwidth x channels)
  + re-layout`` (:mod:`servecap.core.kv_transfer`, the same functions the fleet simulator
  uses) — releases the blocks and answers;
- ``decode``: a request carrying the bootstrap fields first reserves room for its prompt in the
  engine (beyond one block per running request, as the simulated decode replica does), then
  asks the prefill server's bootstrap endpoint for the KV; when that answers, the reservation
  becomes the request's blocks and the engine computes the last prompt token and decodes
  (:meth:`servecap.sim.engine.Engine.add_transferred`). TTFT as the client sees it is therefore
  prefill + transfer + the decode server's first step, as in the simulation.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from servecap.core.kv_transfer import KvFootprint, occupancy_s, transfer_shape
from servecap.fleet.pd_spec import KvLinkSpec

if TYPE_CHECKING:
    from servecap.sim.engine import Engine

WAIT_S = 120.0  # the longest a room waits for its other side
POLL_S = 0.002  # how often a decode request looks for room in the engine


class PdRole:
    def __init__(self, role: str, engine: Engine, kv: KvFootprint, link: KvLinkSpec) -> None:
        if role not in ("prefill", "decode"):
            raise ValueError(f"role must be prefill or decode, not {role!r}")
        self.role = role
        self.engine = engine
        self.kv = kv
        self.link = link
        self._rooms: dict[int, asyncio.Future[int]] = {}  # room -> prompt tokens, once prefilled
        self._held: dict[int, int] = {}  # room -> blocks held for it
        self._link_free_at = 0.0  # perf_counter time this server's link frees
        self.transfers = 0

    def _room(self, room: int) -> asyncio.Future[int]:
        fut = self._rooms.get(room)
        if fut is None:
            fut = self._rooms[room] = asyncio.get_running_loop().create_future()
        return fut

    # -- prefill side -----------------------------------------------------------------------------

    def prefilled(self, room: int, prompt_tokens: int) -> None:
        """The room's prefill finished: keep its blocks until they are sent."""
        blocks = self.engine.layout.blocks_held(prompt_tokens)
        if self.engine.hold_blocks(blocks):
            self._held[room] = blocks
        fut = self._room(room)
        if not fut.done():
            fut.set_result(prompt_tokens)

    async def send(
        self, room: int, decode_tp: int, decode_bytes_per_token_per_gpu: int, decode_hbm: float
    ) -> dict[str, Any]:
        """Wait for the room's prefill, hold the link for the transfer, let the blocks go."""
        prompt = await asyncio.wait_for(self._room(room), WAIT_S)
        kv = self.kv
        shape = transfer_shape(
            kv.bytes_per_gpu(prompt),
            kv.tp,
            decode_tp,
            float(decode_bytes_per_token_per_gpu * prompt),
            decode_hbm,
            shared=self.link.scope == "shared",
        )
        occ = occupancy_s(shape.bytes, shape, self.link.bandwidth, self.link.overhead)
        now = time.perf_counter()
        start = max(now, self._link_free_at)
        self._link_free_at = start + occ
        done = start + occ + self.link.latency + shape.relayout_s
        await asyncio.sleep(max(0.0, done - now))
        blocks = self._held.pop(room, 0)
        if blocks:
            self.engine.release_held_blocks(blocks)
        self._rooms.pop(room, None)
        self.transfers += 1
        return {"prompt_tokens": prompt, "bytes": shape.bytes, "transfer_s": done - now}

    # -- decode side ------------------------------------------------------------------------------

    async def receive(self, client: Any, host: str, port: int, room: int, prompt_tokens: int) -> None:
        """Reserve room for the prompt, then fetch its KV from the prefill server's bootstrap
        endpoint; the reservation is released for the engine to take on admission."""
        eng = self.engine
        need = eng.layout.blocks_held(prompt_tokens)
        deadline = time.perf_counter() + WAIT_S
        while eng.pool.available() - need < eng.num_running or not eng.hold_blocks(need):
            if time.perf_counter() > deadline:
                raise TimeoutError("no KV room on the decode server")
            await asyncio.sleep(POLL_S)
        try:
            params = {
                "tp": self.kv.tp,
                "bytes_per_token_per_gpu": self.kv.bytes_per_token_per_gpu,
                "hbm": self.kv.hbm_bytes_s,
            }
            r = await client.get(f"http://{host}:{port}/servecap/pd/kv/{room}", params=params, timeout=WAIT_S)
            r.raise_for_status()
        finally:
            eng.release_held_blocks(need)
