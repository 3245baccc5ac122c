"""Routers: which ready replica a request goes to, from a read-only view of each replica.

Every router is a small class with one method, ``choose(request, replicas, now_s) -> index``
(into ``replicas``, the ready replicas in id order), registered in :data:`ROUTERS`. The random
generator (``random.Random``) is passed in; nothing here does I/O. ``needs_state`` tells the
fleet whether the router reads the replicas' gauges (a fleet may skip bringing replicas up to
date for the routers that do not).

The rules, with their sources:

- ``least-outstanding``: fewest requests in the replica (waiting + running), vidur's global
  scheduler and vLLM's production-stack "least loaded" rule; ties go to the lowest index.
- ``least-tokens``: fewest in-flight tokens (prompt not yet computed + output not yet made).
- ``least-kv``: lowest KV-cache usage.
- ``power-of-two``: two distinct replicas drawn at random, the less loaded wins (Mitzenmacher,
  "The Power of Two Choices in Randomized Load Balancing", IEEE TPDS 2001).
- ``session``: consistent hashing of the session (user/conversation) id on a ring with
  ``virtual_nodes`` points per replica (Karger et al., STOC 1997); requests without a session
  hash their request id.
- ``prefix-affinity``: SGLang's cache-aware router (sgl-router, ``policies/cache_aware.rs``): the
  router keeps an approximate index of the prefixes it sent to each replica; the system is
  *imbalanced* when ``max_load - min_load > balance_abs_threshold`` **and**
  ``max_load > balance_rel_threshold * min_load`` (load = requests in the replica), and then the
  request goes to the least loaded replica; otherwise to the replica with the longest indexed
  prefix match if ``matched / prompt blocks >= cache_threshold``, else to the replica whose
  index is smallest (the most room in its cache). Defaults as sgl-router's ``launch_router``:
  ``cache_threshold`` 0.5, ``balance_abs_threshold`` 32, ``balance_rel_threshold`` 1.0001.
  ``balance_abs_threshold=None`` turns the gate off (pure prefix routing).
- ``weighted``: llm-d's inference scheduler shape: each replica gets
  ``w_prefix x prefix score + w_queue x queue score + w_kv x kv score`` with prefix score =
  matched fraction of the request's blocks (router index), queue score =
  ``(max_q - q) / (max_q - min_q)`` (1 when all equal), kv score = ``1 - kv_usage``; highest wins.
- ``precise-prefix``: the same weighted sum with llm-d's *precise* prefix-cache scorer
  (llm-d.ai, "KV-Cache Indexer": the router subscribes to the engines' KV events and knows the
  blocks each one actually holds): the prefix score is the fraction of the request's blocks the
  replica's prefix cache holds now (``prefix_hit_blocks``), not what the router once sent it,
  so evictions and other routers' traffic are seen; ties go to the lowest index. Blocks held
  below GPU memory count with a tier's weight: the leading run is walked block by block, each
  block at the fastest tier of the replica holding it (``prefix_tier_blocks``), and scored
  ``(gpu + cpu_weight x cpu + ssd_weight x ssd + remote_weight x remote) / blocks``. llm-d's
  KV-cache indexer tags each block with the medium its KV event names and weighs the media
  (llm-d-kv-cache-manager's ``kvCacheBackendConfigs``: ``gpu`` 1.0, ``cpu`` 0.8); Dynamo's KV
  router likewise credits overlap per tier (device, host, disk: its routing-concepts page).
  Defaults: ``cpu_weight`` 0.8 (llm-d's); ``ssd_weight`` 0.8 (llm-d weighs every medium below
  GPU memory as its one ``cpu`` backend); ``remote_weight`` 0.5, servecap's choice with no
  source: a block in the shared store is there for every replica sharing it, so it cannot tell
  them apart; it only keeps a replica that can fetch the rest of a prompt above one that
  cannot (a replica reading another store, or none) and below any replica holding the block
  itself.
"""

from __future__ import annotations

import bisect
import random
from collections import OrderedDict
from collections.abc import Sequence
from typing import ClassVar

from servecap.errors import ServecapError, did_you_mean
from servecap.policy.view import ReplicaView


class RouteRequest:
    """What a router knows of a request: lengths, a session id, its shareable block keys.

    Read-only by convention (a plain class: built once per routed request, it must be cheap; a
    frozen dataclass's ``__init__`` costs several times more)."""

    __slots__ = ("block_keys", "block_tokens", "output_tokens", "prompt_tokens", "request_id", "session_id")

    def __init__(
        self,
        request_id: int,
        prompt_tokens: int,
        output_tokens: int,
        session_id: int | None = None,
        block_keys: Sequence[int] | None = None,
        block_tokens: int = 16,  # tokens per key of ``block_keys``
    ) -> None:
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.session_id = session_id
        self.block_keys = block_keys
        self.block_tokens = block_tokens

    def __repr__(self) -> str:
        return (
            f"RouteRequest(request_id={self.request_id}, prompt_tokens={self.prompt_tokens}, "
            f"output_tokens={self.output_tokens}, session_id={self.session_id})"
        )

    @property
    def prompt_blocks(self) -> int:
        return max(1, -(-self.prompt_tokens // max(1, self.block_tokens)))


class Router:
    """Base class: ``choose`` returns an index into ``replicas`` (never empty)."""

    name: ClassVar[str] = ""
    needs_state: ClassVar[bool] = False
    uses_prefix: ClassVar[bool] = False
    uses_load: ClassVar[bool] = False  # reads each replica's requests in it (waiting + running): ``loads``

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        """``loads``, when the caller has them (a router with ``uses_load``), are each replica's
        waiting + running requests as ``replicas`` would report them (read from them otherwise)."""
        raise NotImplementedError

    def forget(self, replica_id: int) -> None:
        """The replica left the fleet (failed or stopped): drop what the router kept of it."""
        return None


def _outstanding(r: ReplicaView) -> int:
    return r.num_waiting + r.num_running


def _loads(replicas: Sequence[ReplicaView], loads: list[int] | None) -> list[int]:
    return [_outstanding(r) for r in replicas] if loads is None else loads


# Two typed copies on purpose: compiled by mypyc, a list[int] compares native integers, about ten
# times faster than boxed values through a Sequence (2 us for 32 replicas), and the load-reading
# routers call this on every request.
def _argmin_int(values: list[int]) -> int:
    """Index of the smallest value, the first on ties."""
    best = 0
    low = values[0]
    for i in range(1, len(values)):
        v = values[i]
        if v < low:
            best, low = i, v
    return best


def _argmin_float(values: list[float]) -> int:
    """Index of the smallest value, the first on ties."""
    best = 0
    low = values[0]
    for i in range(1, len(values)):
        v = values[i]
        if v < low:
            best, low = i, v
    return best


class RoundRobin(Router):
    name: ClassVar[str] = "round-robin"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self._next = 0

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        i = self._next % len(replicas)
        self._next = i + 1
        return i


class RandomRouter(Router):
    name: ClassVar[str] = "random"

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        return self.rng.randrange(len(replicas))


class LeastOutstanding(Router):
    name: ClassVar[str] = "least-outstanding"
    needs_state: ClassVar[bool] = True
    uses_load: ClassVar[bool] = True

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        return _argmin_int(_loads(replicas, loads))


class LeastTokens(Router):
    name: ClassVar[str] = "least-tokens"
    needs_state: ClassVar[bool] = True

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        return _argmin_int([r.num_inflight_tokens for r in replicas])


class LeastKv(Router):
    name: ClassVar[str] = "least-kv"
    needs_state: ClassVar[bool] = True

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        return _argmin_float([r.kv_usage for r in replicas])


class PowerOfTwo(Router):
    name: ClassVar[str] = "power-of-two"
    needs_state: ClassVar[bool] = True
    uses_load: ClassVar[bool] = True

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        n = len(replicas)
        if n == 1:
            return 0
        a, b = self.rng.sample(range(n), 2)
        if loads is not None:
            return a if loads[a] <= loads[b] else b
        return a if _outstanding(replicas[a]) <= _outstanding(replicas[b]) else b


_MASK64 = 0xFFFFFFFFFFFFFFFF


def mix64(x: int) -> int:
    """SplitMix64's finaliser (Steele et al., OOPSLA 2014): a stable integer hash."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


class Session(Router):
    """Consistent hashing: a session keeps its replica while the set of replicas is unchanged,
    and only the sessions of a replica that leaves move."""

    name: ClassVar[str] = "session"

    def __init__(self, rng: random.Random, virtual_nodes: int = 64) -> None:
        super().__init__(rng)
        if virtual_nodes < 1:
            raise ServecapError("virtual_nodes", virtual_nodes, "must be >= 1")
        self.virtual_nodes = virtual_nodes
        self._ring_ids: tuple[int, ...] = ()
        self._points: list[int] = []
        self._owners: list[int] = []

    def _build(self, ids: tuple[int, ...]) -> None:
        # ring points hash even numbers and keys odd ones (mix64 is a bijection on 64-bit words,
        # so a key never lands exactly on a point: small session ids would otherwise hash to the
        # very points of replica 0, ``rid * 1_000_003 + v`` for rid 0, and all go there)
        pts = sorted(
            (mix64(2 * (rid * 1_000_003 + v) & _MASK64), rid) for rid in ids for v in range(self.virtual_nodes)
        )
        self._points = [p for p, _ in pts]
        self._owners = [o for _, o in pts]
        self._ring_ids = ids

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        ids = tuple(r.replica_id for r in replicas)
        if ids != self._ring_ids:
            self._build(ids)
        key = request.session_id if request.session_id is not None else request.request_id
        i = bisect.bisect_left(self._points, mix64((2 * key + 1) & _MASK64)) % len(self._points)
        return ids.index(self._owners[i])


class PrefixIndex:
    """The router's approximate record of which block keys each replica holds: the keys it sent
    there, at most ``capacity_blocks`` per replica, least recently routed evicted first (as
    sgl-router's approximate radix tree, evicted by LRU when over its size). Like a tree's
    leaf-first eviction, a sequence's deepest keys go before its first ones (an insert touches
    them deepest first), so an evicted replica keeps the shared start of a prefix.

    Besides each replica's keys in LRU order it keeps, per key, the set of replicas holding it
    (a bit mask by replica id), so :meth:`match_all` walks a request's keys once for all the
    replicas (O(keys + replicas)) rather than once per replica."""

    def __init__(self, capacity_blocks: int) -> None:
        if capacity_blocks < 1:
            raise ServecapError("index_blocks_per_replica", capacity_blocks, "must be >= 1")
        self.capacity_blocks = capacity_blocks
        self._by_replica: dict[int, OrderedDict[int, None]] = {}
        self._holders: dict[int, int] = {}  # key -> bit mask of the replica ids holding it

    def match(self, replica_id: int, keys: Sequence[int]) -> int:
        """Leading keys of ``keys`` indexed for the replica."""
        held = self._by_replica.get(replica_id)
        if not held:
            return 0
        n = 0
        for k in keys:
            if k not in held:
                break
            n += 1
        return n

    def match_all(self, replica_ids: list[int], keys: Sequence[int]) -> list[int]:
        """:meth:`match` of each of ``replica_ids`` (distinct), in one walk of ``keys``."""
        n = len(replica_ids)
        out = [-1] * n
        alive = 0
        for rid in replica_ids:
            alive |= 1 << rid
        holders = self._holders
        depth = 0
        for k in keys:
            still = holders.get(k, 0) & alive
            if still != alive:  # some replicas' matches end here
                gone = alive & ~still
                for j in range(n):
                    if out[j] < 0 and (gone >> replica_ids[j]) & 1:
                        out[j] = depth
                alive = still
                if not alive:
                    return out
            depth += 1
        for j in range(n):
            if out[j] < 0:
                out[j] = depth
        return out

    def size(self, replica_id: int) -> int:
        held = self._by_replica.get(replica_id)
        return len(held) if held else 0

    def insert(self, replica_id: int, keys: Sequence[int]) -> None:
        held = self._by_replica.setdefault(replica_id, OrderedDict())
        holders = self._holders
        bit = 1 << replica_id
        for k in reversed(keys):  # the first key ends most recent: evicted last
            if k in held:
                held.move_to_end(k)
            else:
                held[k] = None
                holders[k] = holders.get(k, 0) | bit
        while len(held) > self.capacity_blocks:
            k, _ = held.popitem(last=False)
            self._drop(k, bit)

    def _drop(self, key: int, bit: int) -> None:
        left = self._holders.get(key, 0) & ~bit
        if left:
            self._holders[key] = left
        else:
            self._holders.pop(key, None)

    def forget(self, replica_id: int) -> None:
        held = self._by_replica.pop(replica_id, None)
        if held:
            bit = 1 << replica_id
            for k in held:
                self._drop(k, bit)


def _flat_keys(keys: Sequence[int] | None) -> tuple[int, ...]:
    """A request's per-block keys as one tuple, read once: the approximate prefix index walks them
    key by key for every replica, and a block-hash prompt's keys come as runs
    (:class:`servecap.workload.block_hash.KeyRuns`), whose per-block reads cost a lookup each."""
    if not keys:
        return ()
    return keys if isinstance(keys, tuple) else tuple(keys)


class PrefixAffinity(Router):
    name: ClassVar[str] = "prefix-affinity"
    needs_state: ClassVar[bool] = True
    uses_prefix: ClassVar[bool] = True
    uses_load: ClassVar[bool] = True

    def __init__(
        self,
        rng: random.Random,
        cache_threshold: float = 0.5,
        balance_abs_threshold: int | None = 32,
        balance_rel_threshold: float = 1.0001,
        index_blocks_per_replica: int = 1 << 20,
    ) -> None:
        super().__init__(rng)
        if not 0.0 <= cache_threshold <= 1.0:
            raise ServecapError("cache_threshold", cache_threshold, "must be within 0..1")
        if balance_abs_threshold is not None and balance_abs_threshold < 0:
            raise ServecapError("balance_abs_threshold", balance_abs_threshold, "must be >= 0")
        if balance_rel_threshold < 1.0:
            raise ServecapError("balance_rel_threshold", balance_rel_threshold, "must be >= 1")
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self.index = PrefixIndex(index_blocks_per_replica)

    def is_imbalanced(self, loads: Sequence[int]) -> bool:
        """sgl-router's gate: both the absolute and the relative spread exceed their thresholds."""
        if self.balance_abs_threshold is None:
            return False
        hi, lo = max(loads), min(loads)
        return hi - lo > self.balance_abs_threshold and hi > self.balance_rel_threshold * lo

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        keys = _flat_keys(request.block_keys)
        loads = _loads(replicas, loads)
        if self.is_imbalanced(loads):
            i = _argmin_int(loads)
        else:
            matches = self.index.match_all([r.replica_id for r in replicas], keys)
            best = 0  # the longest match, then the least loaded, then the lowest index
            for j in range(1, len(matches)):
                if matches[j] > matches[best] or (matches[j] == matches[best] and loads[j] < loads[best]):
                    best = j
            if keys and matches[best] / request.prompt_blocks >= self.cache_threshold:
                i = best
            else:
                i = _argmin_int([self.index.size(r.replica_id) for r in replicas])
        if keys:
            self.index.insert(replicas[i].replica_id, keys)
        return i

    def forget(self, replica_id: int) -> None:
        self.index.forget(replica_id)


class Weighted(Router):
    name: ClassVar[str] = "weighted"
    needs_state: ClassVar[bool] = True
    uses_prefix: ClassVar[bool] = True

    def __init__(
        self,
        rng: random.Random,
        prefix_weight: float = 2.0,
        queue_weight: float = 1.0,
        kv_weight: float = 1.0,
        index_blocks_per_replica: int = 1 << 20,
    ) -> None:
        super().__init__(rng)
        for name, w in (("prefix_weight", prefix_weight), ("queue_weight", queue_weight), ("kv_weight", kv_weight)):
            if w < 0:
                raise ServecapError(name, w, "must be >= 0")
        self.prefix_weight = prefix_weight
        self.queue_weight = queue_weight
        self.kv_weight = kv_weight
        self.index = PrefixIndex(index_blocks_per_replica)

    def scores(self, request: RouteRequest, replicas: Sequence[ReplicaView]) -> list[float]:
        keys = _flat_keys(request.block_keys)
        queues = [r.num_waiting for r in replicas]
        q_hi, q_lo = max(queues), min(queues)
        matches = self.index.match_all([r.replica_id for r in replicas], keys) if keys else [0] * len(replicas)
        out = []
        for r, q, m in zip(replicas, queues, matches, strict=True):
            prefix = m / len(keys) if keys else 0.0
            queue = 1.0 if q_hi == q_lo else (q_hi - q) / (q_hi - q_lo)
            kv = 1.0 - r.kv_usage
            out.append(self.prefix_weight * prefix + self.queue_weight * queue + self.kv_weight * kv)
        return out

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        s = self.scores(request, replicas)
        i = max(range(len(s)), key=lambda j: (s[j], -j))
        if request.block_keys:
            self.index.insert(replicas[i].replica_id, _flat_keys(request.block_keys))
        return i

    def forget(self, replica_id: int) -> None:
        self.index.forget(replica_id)


class PrecisePrefix(Weighted):
    """``weighted`` scored off each replica's real prefix cache (llm-d's precise scorer)."""

    name: ClassVar[str] = "precise-prefix"

    def __init__(
        self,
        rng: random.Random,
        prefix_weight: float = 2.0,
        queue_weight: float = 1.0,
        kv_weight: float = 1.0,
        index_blocks_per_replica: int = 1 << 20,
        cpu_weight: float = 0.8,
        ssd_weight: float = 0.8,
        remote_weight: float = 0.5,
    ) -> None:
        super().__init__(rng, prefix_weight, queue_weight, kv_weight, index_blocks_per_replica)
        for name, w in (("cpu_weight", cpu_weight), ("ssd_weight", ssd_weight), ("remote_weight", remote_weight)):
            if not 0.0 <= w <= 1.0:  # a block in GPU memory counts 1: a tier below it counts no more
                raise ServecapError(f"router_settings.{name}", w, "must be within 0..1 (a GPU block counts 1)")
        self.tier_weights = (1.0, cpu_weight, ssd_weight, remote_weight)

    def prefix_score(self, r: ReplicaView, keys: Sequence[int]) -> float:
        """The tier-weighted matched fraction of ``keys`` on ``r`` (module doc)."""
        n = len(keys)
        if not n:
            return 0.0
        gpu, cpu, ssd, remote = r.prefix_tier_blocks(keys)
        _, wc, ws, wr = self.tier_weights
        return (gpu + wc * cpu + ws * ssd + wr * remote) / n

    def scores(self, request: RouteRequest, replicas: Sequence[ReplicaView]) -> list[float]:
        keys = request.block_keys or ()
        queues = [r.num_waiting for r in replicas]
        q_hi, q_lo = max(queues), min(queues)
        out = []
        for r, q in zip(replicas, queues, strict=True):
            prefix = self.prefix_score(r, keys)
            queue = 1.0 if q_hi == q_lo else (q_hi - q) / (q_hi - q_lo)
            out.append(self.prefix_weight * prefix + self.queue_weight * queue + self.kv_weight * (1.0 - r.kv_usage))
        return out

    def choose(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        s = self.scores(request, replicas)
        return max(range(len(s)), key=lambda j: (s[j], -j))

    def forget(self, replica_id: int) -> None:
        return None


ROUTERS: dict[str, type[Router]] = {
    "round-robin": RoundRobin,
    "random": RandomRouter,
    "least-outstanding": LeastOutstanding,
    "least-tokens": LeastTokens,
    "least-kv": LeastKv,
    "power-of-two": PowerOfTwo,
    "session": Session,
    "prefix-affinity": PrefixAffinity,
    "weighted": Weighted,
    "precise-prefix": PrecisePrefix,
}

# The one default router, read by the fleet file, the CLI, the HTTP API, the web pages and the
# fleet planner. vllm-router 0.1.17 and sglang-router 0.3.2 default to ``--policy cache_aware``
# (their ``--help``; servecap's ``prefix-affinity``), which falls back to the least loaded
# replica once the load is imbalanced; with no shared prefixes to follow, least-outstanding is
# the load rule they and vLLM's production-stack ("least loaded") use, and vidur's default.
DEFAULT_ROUTER = "least-outstanding"


def make_router(name: str, rng: random.Random, settings: dict[str, float | int | None] | None = None) -> Router:
    """The router registered as ``name`` with ``settings`` (its constructor's keywords)."""
    cls = ROUTERS.get(name)
    if cls is None:
        raise ServecapError(
            "router", name, f"unknown router; one of {', '.join(ROUTERS)}" + did_you_mean(name, ROUTERS)
        )
    try:
        return cls(rng, **(settings or {}))
    except TypeError as e:
        raise ServecapError("router_settings", dict(settings or {}), f"not settings of {name}: {e}") from None
