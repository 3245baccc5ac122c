"""KV tiers below one engine's GPU pool: CPU DRAM, local SSD, a shared remote store.

The GPU pool (:mod:`servecap.sim.kv_pool`) stays as it is; this module is consulted on a GPU
miss and fed on eviction (``KvPool.on_evict``):

- **Demotion.** A block the GPU pool evicts goes to the first private tier (CPU DRAM) at its
  most-recently-used end; a tier over its capacity demotes its least-recently-used block to the
  next private tier (local SSD); what falls off the last private tier is gone. The private
  tiers are exclusive (a block is in one of them at most), as a victim cache below HBM.
- **The shared remote store** (Mooncake store, LMCache's remote backends) is written with every
  block a replica's GPU evicts and is read by every replica of the fleet (one
  :class:`LruTier` object shared by the engines: reuse across replicas). It is inclusive: a
  read leaves the block there for the other replicas (LRU order refreshed).
- **Promotion.** On admission, past the GPU's prefix hit, the request's next blocks are looked
  up tier by tier; the leading run found below is loaded back into GPU memory instead of being
  computed (a private tier gives the block up: it is in GPU memory again and demoted again when
  evicted). The load is ``latency + bytes / bandwidth`` per tier
  (:func:`servecap.core.kv_tiers.load_s`), over one GPU's link with its shard of the KV (a
  tensor-parallel replica's GPUs load their shards in parallel, each over its own PCIe link or
  NIC).
- **Overlap.** The engine's step that admits the request takes the load: LMCache's vLLM
  connector loads synchronously before the forward pass (``start_load_kv``), or layer by layer
  overlapped with the compute when ``use_layerwise`` is set, which is the default here
  (:func:`servecap.core.kv_tiers.with_load_s`). vLLM's own ``OffloadingConnector`` loads
  asynchronously instead: its scheduler side
  (``vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py``,
  ``get_num_new_matched_tokens``) answers ``(tokens, True)``, the request waits in
  ``WAITING_FOR_REMOTE_KVS`` while the batch runs on and is scheduled again once the worker
  reports the load finished (``_update_waiting_for_remote_kv`` in
  ``vllm/v1/core/sched/scheduler.py``); a lookup meeting a block still being stored, or blocks
  another request is loading, answers "try later" and the request stays waiting (it does not
  recompute them). It also stores every block as it is computed (``_get_reqs_to_store``: a
  write-through copy), where this module by default writes the GPU's victims. These are the
  ``async_load`` and ``store_on_compute`` modes below.

- **Preemption.** vLLM's offloading connector stores every computed block to CPU DRAM and, from
  vLLM 0.14 ("Enabling preempted requests to be loaded back from the CPU", PR #29870, named in
  vLLM's offloading-connector post), loads a preempted request's blocks back instead of
  recomputing them. A preempted request's full blocks that no prefix key names (its output, a
  private prompt tail) are put in the private tiers under keys of its own
  (:func:`private_key`); when it is admitted again, the run of them still there is loaded like
  any tier hit. Its keyed blocks take the ordinary way (GPU LRU list, then demotion).

- **Writes take the tier's write bandwidth.** Each replica writes into each of its tiers over
  one channel (its PCIe link into DRAM, its SSD, its NIC into the store): a run of ``n`` blocks
  written at ``t`` starts when the channel is free (``max(t, free_s)``) and takes
  ``n x block_bytes_per_gpu / write_bw`` (:func:`servecap.core.kv_tiers.store_s`, the GPUs
  writing their shards in parallel); a block is readable once its write has ended (its
  ``ready_s``, kept as the LRU's value), so a tier written faster than its bandwidth serves its
  blocks later, never more bytes a second than it takes (vLLM's offloading connector and
  LMCache store asynchronously after the forward pass; a block is only loadable once stored).
  The engine sets ``now_s`` at each step; a block pushed down from the CPU tier is written to
  the SSD tier then.

**vLLM's offloading connector** (``TierSetup.store_on_compute`` and ``async_load``; the engine's
``kv_store on-compute`` / ``kv_load async``, :mod:`servecap.sim.engine`):

- **Stored as computed** (``OffloadingConnectorScheduler._get_reqs_to_store`` in
  ``vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py``: each step, the
  request's blocks that become full in it, from ``_next_stored_block_idx`` on; the worker copies
  them out on its own CUDA stream after the forward pass, so the copy overlaps the next steps'
  compute). :meth:`TierStore.store_computed` writes a request's newly full keyed blocks into the
  first private tier (and the remote store) from the end of the step that computed them, at the
  tier's write bandwidth; a block already there is only refreshed (``prepare_store`` skips
  blocks already offloaded and ``touch`` moves them to the LRU's recent end). The GPU's evictions
  then write nothing: the tier is a write-through copy, its LRU victims cascading to the SSD.
- **Inclusive**: a load leaves the block in the tier (``CPUOffloadingManager.prepare_load`` /
  ``complete_load`` in ``vllm/v1/kv_offload/cpu/manager.py`` only count references).
- **Asynchronous loads**: the lookup (:meth:`TierStore.lookup`) answers "try later" (None) when
  the leading run meets a block whose store has not ended (the manager's ``HIT_PENDING``:
  ``get_num_new_matched_tokens`` returns ``None``) or a block another request is loading
  (``_blocks_being_loaded``: "hit blocks are being loaded, delay request"); a load is booked on
  the replica's one read channel (:meth:`TierStore.book_load`: it starts when the channel is
  free, the worker's transfers running one after another) and the request waits for it outside
  the batch (the engine).

Hit counts are kept per tier in tokens (``hit_tokens``), beside the engine's GPU hits, on a
request's first admission only, as the engine counts its own (:meth:`TierStore.promote`).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from servecap.core.kv_tiers import TIER_NAMES, KvTier, load_s, store_s, with_load_s
from servecap.errors import ServecapError

PRIVATE_KEY_BASE = -(1 << 62)
"""A preempted request's own blocks are keyed below this (request ids below 2^40, 2^22 blocks
each): a block hash lands there with probability about 2^-2 x (blocks / 2^62), never in practice."""


def private_key(request_id: int, block: int) -> int:
    """The tier key of block ``block`` of request ``request_id``'s private (unkeyed) KV."""
    return PRIVATE_KEY_BASE - request_id * (1 << 22) - block


@dataclass(frozen=True, slots=True)
class TierSetup:
    """One replica's tiers (a subset of cpu, ssd, remote, in that order) and what a load costs:
    ``key_bytes_per_gpu`` is one logical block's KV on one GPU (every layer, every KV-cache
    group), ``gpus`` the replica's GPUs (the capacity holds every GPU's shard), ``num_layers``
    the layers a layer-wise load pipelines over. ``async_load`` and ``store_on_compute``: vLLM's
    offloading connector's behaviour (the module doc); both False: a victim cache whose loads
    the admitting step takes (``layerwise`` or not)."""

    tiers: tuple[KvTier, ...]
    key_bytes_per_gpu: int
    gpus: int
    num_layers: int
    layerwise: bool = True
    async_load: bool = False  # vLLM's connector: the request waits outside the batch for its load
    store_on_compute: bool = False  # vLLM's connector: every computed block written (write-through)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tiers]
        if names != [n for n in TIER_NAMES if n in names]:
            raise ServecapError("kv_tiers", names, "one tier of each kind at most, in the order cpu, ssd, remote")
        if self.key_bytes_per_gpu <= 0 or self.gpus < 1 or self.num_layers < 1:
            raise ServecapError(
                "kv_tiers", (self.key_bytes_per_gpu, self.gpus, self.num_layers), "block bytes, GPUs, layers >= 1"
            )

    def tier(self, name: str) -> KvTier | None:
        for t in self.tiers:
            if t.name == name:
                return t
        return None

    def capacity_keys(self, tier: KvTier) -> int:
        """Logical blocks ``tier`` holds: its bytes over a block's bytes on every GPU."""
        return int(tier.capacity_bytes // (self.key_bytes_per_gpu * self.gpus))


class LruTier:
    """One tier's blocks in LRU order (oldest first), each with the time its write ends (from
    then on it is readable: :meth:`holds`)."""

    def __init__(self, tier: KvTier, capacity_keys: int) -> None:
        self.tier = tier
        self.capacity = capacity_keys
        self.lru: OrderedDict[int, float] = OrderedDict()

    def put(self, key: int, ready_s: float = 0.0) -> int | None:
        """Insert ``key`` as most recently used, readable from ``ready_s`` (a block already there
        keeps its earlier time); returns the key it pushed out (None: none)."""
        lru = self.lru
        old = lru.get(key)
        if old is not None:
            lru.move_to_end(key)
            if ready_s < old:
                lru[key] = ready_s
            return None
        if self.capacity <= 0:
            return key
        lru[key] = ready_s
        if len(lru) > self.capacity:
            return lru.popitem(last=False)[0]
        return None

    def holds(self, key: int, now_s: float) -> bool:
        """Whether ``key`` is there and written by ``now_s``."""
        ready = self.lru.get(key)
        return ready is not None and ready <= now_s


def shared_remote(setup: TierSetup) -> LruTier | None:
    """The fleet-wide remote store of ``setup`` (None when it has no remote tier)."""
    t = setup.tier("remote")
    return None if t is None else LruTier(t, setup.capacity_keys(t))


class TierStore:
    """The tiers below one engine's GPU pool (see the module doc). ``remote``: the fleet's
    shared store object (a new private one when None and the setup has a remote tier)."""

    def __init__(self, setup: TierSetup, remote: LruTier | None = None) -> None:
        self.setup = setup
        self.private: list[LruTier] = [LruTier(t, setup.capacity_keys(t)) for t in setup.tiers if t.name != "remote"]
        if remote is None:
            remote = shared_remote(setup)
        self.remote = remote
        self.levels: list[LruTier] = self.private + ([remote] if remote is not None else [])
        self.hits = [0] * len(self.levels)  # tokens loaded from each level by this engine
        self.load_s = 0.0  # total load time charged
        self.loads = 0
        self.now_s = 0.0  # the engine's clock (set at each step): writes start from it
        self.write_free_s = [0.0] * len(self.levels)  # when each level's write channel is free
        # seconds one block's write takes on each level (every GPU's shard in parallel)
        self._write_block_s = [store_s(t.tier, setup.key_bytes_per_gpu) for t in self.levels]
        self.written_blocks = [0] * len(self.levels)
        self.pending_s = math.inf  # the earliest write end a lookup met ("try later")
        self.read_free_s = 0.0  # when the replica's read channel (its loads, one after another) is free
        self.inclusive = setup.store_on_compute  # a load leaves the block in its private tier

    def _write(self, level: int, n: int) -> float:
        """Book ``n`` blocks' write on ``level``'s channel from now; returns when it ends."""
        return self._write_at(level, n, self.now_s)

    def _write_at(self, level: int, n: int, at_s: float) -> float:
        """Book ``n`` blocks' write on ``level``'s channel from ``at_s``; returns when it ends."""
        start = at_s if at_s > self.write_free_s[level] else self.write_free_s[level]
        end = start + n * self._write_block_s[level]
        self.write_free_s[level] = end
        self.written_blocks[level] += n
        return end

    def _put(self, level: int, keys: Sequence[int], at_s: float = -1.0) -> list[int]:
        """``keys`` into ``level``, the ones it lacks written there from ``at_s`` (now when
        negative; a block it holds is only refreshed); returns the keys it pushed out."""
        t = self.levels[level]
        lru = t.lru
        if at_s < 0.0:
            at_s = self.now_s
        new = sum(1 for k in keys if k not in lru)
        ready = self._write_at(level, new, at_s) if new else at_s
        out = []
        for k in keys:
            pushed = t.put(k, ready)
            if pushed is not None:
                out.append(pushed)
        return out

    def _put_private(self, keys: Sequence[int], at_s: float = -1.0) -> None:
        """``keys`` into the first private tier, each level's push-outs written one level down
        (from ``at_s``, now when negative)."""
        for level in range(len(self.private)):
            if not keys:
                return
            keys = self._put(level, keys, at_s)

    def store_computed(self, keys: Sequence[int], at_s: float) -> None:
        """vLLM's store as computed (module doc): blocks a request computed, written from
        ``at_s`` (the end of the step that computed them) into the first private tier, cascading
        down, and into the remote store; the ones a tier holds are only refreshed."""
        if self.private:
            self._put_private(keys, at_s)
        if self.remote is not None:
            self._put(len(self.levels) - 1, keys, at_s)

    def demote(self, key: int) -> None:
        """A block the GPU evicted: into the first private tier (cascading down) and the
        remote store."""
        self.demote_range(key, 0, 1)

    def demote_range(self, key: int, lo: int, hi: int) -> None:
        """The pool's eviction hook (``KvPool.on_evict``): blocks ``[lo, hi)`` of the run ``key``
        left GPU memory, last first (the pool evicts a run from its end); block ``i``'s key is
        ``key + i``. The run is written as one (one booking per tier it reaches)."""
        keys = range(key + hi - 1, key + lo - 1, -1)
        if self.private:
            self._put_private(keys)
        if self.remote is not None:
            self._put(len(self.levels) - 1, keys)

    def offload(self, keys: Sequence[int]) -> None:
        """A preempted request's private blocks: into the private tiers only (cascading down)."""
        if self.private:
            self._put_private(keys)

    def discard(self, keys: Sequence[int]) -> None:
        """Drop ``keys`` from the private tiers (a request's own blocks it no longer needs)."""
        for key in keys:
            for t in self.private:
                t.lru.pop(key, None)

    def find(self, keys: Sequence[int], start: int, stop: int) -> list[int]:
        """Blocks found per level (private tiers, then remote) for the leading run of
        ``keys[start:stop]`` held below GPU memory (reads only)."""
        found = [0] * len(self.levels)
        levels = self.levels
        now = self.now_s
        for i in range(start, stop):
            k = keys[i]
            for j, t in enumerate(levels):
                ready = t.lru.get(k)
                if ready is not None and ready <= now:
                    found[j] += 1
                    break
            else:
                break
        return found

    def lookup(self, keys: Sequence[int], start: int, stop: int, loading: set[int]) -> list[int] | None:
        """:meth:`find` as vLLM's connector answers an asynchronous lookup: None ("try later")
        when the leading run meets a block a tier holds whose write has not ended (the CPU
        manager's ``HIT_PENDING``) or, among the blocks found, one in ``loading`` (another
        request's load in flight: ``_blocks_being_loaded``); else the blocks found per level.
        A pending block's write end is kept in ``pending_s`` (the engine retries then)."""
        found = [0] * len(self.levels)
        levels = self.levels
        now = self.now_s
        for i in range(start, stop):
            k = keys[i]
            held = False
            for j, t in enumerate(levels):
                ready = t.lru.get(k)
                if ready is not None:
                    if ready > now:
                        if ready < self.pending_s:
                            self.pending_s = ready
                        return None
                    if k in loading:
                        return None
                    found[j] += 1
                    held = True
                    break
            if not held:
                break
        return found

    def book_load(self, load: float, at_s: float) -> float:
        """Book a load of ``load`` seconds on the replica's read channel, asked for at ``at_s``:
        it starts when the channel is free (the worker's transfers one after another); returns
        when it ends."""
        start = at_s if at_s > self.read_free_s else self.read_free_s
        self.read_free_s = start + load
        return self.read_free_s

    def promote(self, keys: Sequence[int], start: int, n: int, block_size: int, count_hits: bool = True) -> float:
        """Load ``keys[start:start + n]`` (found by :meth:`find`) back into GPU memory: private
        tiers give them up (keep them when ``inclusive``: vLLM's connector), the remote store
        keeps them; returns the load's time (its tiers' loads in sequence over the GPU's links),
        before any overlap with compute. The blocks count as hits only with ``count_hits`` (a
        request's first admission: a preempted request's loads are vLLM's ``preempted_hits``,
        left out of its hit-rate counters)."""
        levels = self.levels
        per_level = [0] * len(levels)
        now = self.now_s
        inclusive = self.inclusive
        for i in range(start, start + n):
            k = keys[i]
            for j, t in enumerate(levels):
                ready = t.lru.get(k)
                if ready is not None and ready <= now:
                    per_level[j] += 1
                    if inclusive or t is self.remote:
                        t.lru.move_to_end(k)
                    else:
                        del t.lru[k]
                    break
        total = 0.0
        for j, (t, m) in enumerate(zip(levels, per_level, strict=True)):
            if m:
                if count_hits:
                    self.hits[j] += m * block_size
                total += load_s(t.tier, m * self.setup.key_bytes_per_gpu)
        self.load_s += total
        self.loads += 1
        return total

    def step_s(self, load: float, compute_s: float) -> float:
        """A step's time when ``load`` seconds of loads feed ``compute_s`` of compute."""
        return with_load_s(load, compute_s, self.setup.num_layers, layerwise=self.setup.layerwise)

    def hit_tokens(self) -> dict[str, int]:
        """Tokens loaded from each tier so far, by tier name."""
        return {t.tier.name: h for t, h in zip(self.levels, self.hits, strict=True)}
