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

Hardening (the decode side is a client of whatever a request body names, so it is a target):

- a decode server connects only to its ``--bootstrap-peer`` servers when it was started with
  some, else to a host that is a DNS name or an IP address and a port 1-65535, given as an
  integer; the URL is assembled from those parts, never from the body's text
  (:func:`bootstrap_target`); anything else is a one-line 400;
- the bootstrap endpoints need the pair's shared secret (``--pd-secret``, ``Authorization:
  Bearer``): without it a room's KV (and its size) is anyone's to ask for;
- waits are bounded in count and time: a decode request waits for its room's prefill holding
  no KV (``/servecap/pd/ready/{room}``), then reserves room and fetches; at most
  ``MAX_WAITING`` requests wait on a peer at once (the next is refused at once, 503), each for at
  most ``WAIT_S``, with a short connect timeout; a prefill server keeps at most ``MAX_WAITING``
  rooms nobody prefilled, each for ``WAIT_S``. Six bootstraps that never answer hold no KV, so
  the next request is served.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import secrets
import time
from typing import TYPE_CHECKING, Any

from servecap.core.kv_transfer import KvFootprint, occupancy_s, transfer_shape
from servecap.fleet.pd_spec import KvLinkSpec

if TYPE_CHECKING:
    from servecap.sim.engine import Engine

WAIT_S = 30.0  # the longest a room waits for its other side
CONNECT_S = 2.0  # the longest a decode server waits to connect to a bootstrap peer
MAX_WAITING = 64  # requests (decode) or rooms (prefill) waiting on the other side at once
POLL_S = 0.002  # how often a decode request looks for room in the engine
MAX_TP = 1024  # a decode peer's TP past this is no deployment
MAX_ROOM = 2**63 - 1  # SGLang's rooms are random 63-bit integers

PROCESS_SECRET = secrets.token_urlsafe(24)
"""The shared secret of P/D emulators built in one process without one (tests, in-process pairs);
``servecap emulate --role`` takes it from ``--pd-secret`` so separate processes share it."""

_DNS_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]{0,252})")


class PdRefused(Exception):
    """A decode request's bootstrap fields refused: ``status`` (400 or 503) and a one-line reason
    that carries no exception text."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


def bootstrap_target(host: object, port: object, peers: frozenset[tuple[str, int]] | None) -> tuple[str, int]:
    """The peer a decode request may fetch from: ``(host, port)`` validated (a DNS name or an IP
    address; an integer port 1-65535, not a string, not a bool), and one of ``peers`` when the
    server was started with some. Raises :class:`PdRefused` (400) naming the field."""
    if not isinstance(host, str) or not host:
        raise PdRefused(400, "bootstrap_host must be a host name or an IP address", "bootstrap_host")
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        name = str(ipaddress.ip_address(name))
    except ValueError:
        if _DNS_NAME.fullmatch(name) is None:
            raise PdRefused(
                400, "bootstrap_host must be a host name or an IP address (no port, path or scheme)", "bootstrap_host"
            ) from None
    if isinstance(port, bool) or not isinstance(port, int):
        raise PdRefused(400, "bootstrap_port must be an integer port 1-65535", "bootstrap_port")
    if not 1 <= port <= 65535:
        raise PdRefused(400, f"bootstrap_port {port} is not a port (1-65535)", "bootstrap_port")
    name = name.lower()
    if peers is not None and (name, port) not in peers:
        raise PdRefused(
            400, f"bootstrap {name}:{port} is not one of this server's --bootstrap-peer servers", "bootstrap_host"
        )
    return name, port


def parse_peer(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``) of a ``--bootstrap-peer`` flag, as :func:`bootstrap_target` checks it."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{text!r} is not HOST:PORT")
    try:
        return bootstrap_target(host, int(port), None)
    except PdRefused as err:
        raise ValueError(f"{text!r}: {err.message}") from None


class PdRole:
    def __init__(
        self,
        role: str,
        engine: Engine,
        kv: KvFootprint,
        link: KvLinkSpec,
        *,
        secret: str = PROCESS_SECRET,
        peers: frozenset[tuple[str, int]] | None = None,
        wait_s: float = WAIT_S,
        max_waiting: int = MAX_WAITING,
    ) -> None:
        if role not in ("prefill", "decode"):
            raise ValueError(f"role must be prefill or decode, not {role!r}")
        self.role = role
        self.engine = engine
        self.kv = kv
        self.link = link
        self.secret = secret
        self.peers = peers
        self.wait_s = wait_s
        self.max_waiting = max_waiting
        self._rooms: dict[int, asyncio.Future[int]] = {}  # room -> prompt tokens, once prefilled
        self._held: dict[int, int] = {}  # room -> blocks held for it
        self._link_free_at = 0.0  # perf_counter time this server's link frees
        self._waiting = 0  # decode requests waiting on a peer
        self.transfers = 0

    def authorized(self, authorization: str | None) -> bool:
        """Whether a bootstrap request carries the pair's secret (``Authorization: Bearer``)."""
        given = (authorization or "")[7:] if (authorization or "")[:7].lower() == "bearer " else ""
        return secrets.compare_digest(given.strip().encode("utf-8", "surrogatepass"), self.secret.encode())

    def _room(self, room: int) -> asyncio.Future[int]:
        fut = self._rooms.get(room)
        if fut is None:
            if sum(1 for f in self._rooms.values() if not f.done()) >= self.max_waiting:
                raise PdRefused(503, f"{self.max_waiting} rooms are already waiting for their prefill; retry later")
            fut = self._rooms[room] = asyncio.get_running_loop().create_future()
        return fut

    # -- prefill side -----------------------------------------------------------------------------

    def prefilled(self, room: int, prompt_tokens: int) -> None:
        """The room's prefill finished: keep its blocks until they are sent."""
        blocks = self.engine.layout.blocks_held(prompt_tokens)
        if self.engine.hold_blocks(blocks):
            self._held[room] = blocks
        # a room whose decode side never comes lets its blocks go after the wait
        asyncio.get_running_loop().call_later(self.wait_s, self._expire, room)
        try:
            fut = self._room(room)
        except PdRefused:  # no one asked yet and too many are waiting: keep it anyway (it is done)
            fut = self._rooms[room] = asyncio.get_running_loop().create_future()
        if not fut.done():
            fut.set_result(prompt_tokens)

    def _expire(self, room: int) -> None:
        fut = self._rooms.get(room)
        if fut is not None and fut.done():
            del self._rooms[room]
            blocks = self._held.pop(room, 0)
            if blocks:
                self.engine.release_held_blocks(blocks)

    async def ready(self, room: int) -> int:
        """Wait (at most ``wait_s``) for the room's prefill; its prompt tokens. A room nobody
        prefilled is forgotten when its wait ends."""
        fut = self._room(room)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.wait_s)
        except TimeoutError:
            if not fut.done() and self._rooms.get(room) is fut:
                del self._rooms[room]
            raise PdRefused(504, f"room {room} was not prefilled within {self.wait_s:g} s") from None

    async def send(
        self, room: int, decode_tp: int, decode_bytes_per_token_per_gpu: int, decode_hbm: float
    ) -> dict[str, Any]:
        """Wait for the room's prefill, hold the link for the transfer, let the blocks go."""
        prompt = await self.ready(room)
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

    async def receive(self, client: Any, host: object, port: object, room: object, prompt_tokens: int) -> None:
        """Wait for the room's prefill on its peer (holding nothing), reserve room for the prompt,
        then fetch its KV; the reservation is released for the engine to take on admission.
        Raises :class:`PdRefused` (400: the fields; 503/504: the peer or the wait) in one line."""
        import httpx

        host_name, port_num = bootstrap_target(host, port, self.peers)
        if isinstance(room, bool) or not isinstance(room, int) or not 0 <= room <= MAX_ROOM:
            raise PdRefused(400, "bootstrap_room must be an integer 0-2^63", "bootstrap_room")
        if self._waiting >= self.max_waiting:
            raise PdRefused(503, f"{self.max_waiting} requests already wait on their prefill servers; retry later")
        auth = {"authorization": f"Bearer {self.secret}"}
        timeout = httpx.Timeout(self.wait_s + 5.0, connect=CONNECT_S)
        where = f"{host_name}:{port_num}"

        def url(kind: str) -> Any:  # assembled from validated parts, never from the body's text
            return httpx.URL(scheme="http", host=host_name, port=port_num, path=f"/servecap/pd/{kind}/{room}")

        async def get(kind: str, params: dict[str, Any] | None = None) -> None:
            try:
                r = await client.get(url(kind), params=params, headers=auth, timeout=timeout)
            except httpx.ConnectTimeout:
                raise PdRefused(504, f"KV transfer failed: the prefill server {where} did not accept in time") from None
            except httpx.TimeoutException:
                raise PdRefused(504, f"KV transfer failed: the prefill server {where} did not answer in time") from None
            except httpx.ConnectError:  # the body named a peer where no server listens: the body's error
                raise PdRefused(400, f"bootstrap {where}: no prefill server listens there", "bootstrap_port") from None
            except httpx.HTTPError:
                raise PdRefused(503, f"KV transfer failed: the prefill server {where} could not be reached") from None
            if r.status_code != 200:
                raise PdRefused(503, f"KV transfer failed: the prefill server {where} answered {r.status_code}")

        self._waiting += 1
        try:
            await get("ready")  # holding no KV while the prefill runs
        finally:
            self._waiting -= 1
        eng = self.engine
        need = eng.layout.blocks_held(prompt_tokens)
        deadline = time.perf_counter() + self.wait_s
        while eng.pool.available() - need < eng.num_running or not eng.hold_blocks(need):
            if time.perf_counter() > deadline:
                raise PdRefused(503, "no KV room on the decode server")
            await asyncio.sleep(POLL_S)
        try:
            params = {
                "tp": self.kv.tp,
                "bytes_per_token_per_gpu": self.kv.bytes_per_token_per_gpu,
                "hbm": self.kv.hbm_bytes_s,
            }
            await get("kv", params)
        finally:
            eng.release_held_blocks(need)
