"""Prompts given as block hashes (no tokens): a trace's ``hash_ids`` mapped onto the engine's blocks.

Block-hash traces (Mooncake's FAST'25 traces, kvcache-ai/Mooncake ``FAST25-release/README.md``;
the Qwen Bailian traces) carry no text: each request lists one id per ``trace_block_tokens``
(512 for Mooncake) tokens of its prompt, and two requests with the same id at the same position
share the whole prompt up to the end of that block (the ids are remapped *prefix* block hashes:
"identical hash IDs indicate reusable prefix KV cache blocks"). The last id covers the prompt's
partial tail block.

The engine caches ``block_size``-token blocks (vLLM: 16 by default) keyed by chained hashes.
Engine block ``b`` spans tokens ``[b x bs, (b + 1) x bs)``; its content is fixed by the trace
block holding its last token, ``t = ((b + 1) x bs - 1) // trace_block_tokens``, so its key is
made of ``(hash_ids[t], b)`` (:func:`engine_block_keys`): equal keys exactly when the trace says the tokens up to the end of
engine block ``b`` are equal. Only full engine blocks inside the prompt get a key (vLLM caches
full blocks only); blocks past the hashed tokens (the answer) stay private.

- ``bs`` divides 512 (16, 32, 64, 128, 256): each trace block is ``512 / bs`` engine blocks and a
  hit of ``h`` leading ids is a hit of ``min(h x 512, prompt) // bs`` engine blocks;
- ``bs`` does not divide 512 (e.g. 48): an engine block straddling two trace blocks is keyed by
  the later one, which (the ids being prefix hashes) also fixes the earlier; the granularity of
  reuse is then the coarser of the two;
- ``bs`` larger than 512: an engine block is keyed by the last trace block it covers.

Equal ids for a partial tail block mean equal tokens over the shorter of the two tails (the
trace cannot say more); the engine never hits the last token of a prompt (it must compute one),
so hits are capped at ``(prompt - 1) // bs`` blocks, as in vLLM.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from functools import lru_cache

import numpy as np

DEFAULT_TRACE_BLOCK_TOKENS = 512  # Mooncake FAST'25 README: "The block size is 512 tokens."


_MIX = 0x9E3779B97F4A7C15  # 2^64 / golden ratio, odd: id -> id x _MIX is a bijection mod 2^64
_MASK = (1 << 64) - 1
_SIGN = 1 << 63


def _signed64(x: int) -> int:
    x &= _MASK
    return x - (1 << 64) if x & _SIGN else x


class KeyRuns(Sequence[int]):
    """A prompt's shareable block keys as runs of consecutive engine blocks: run ``j`` covers
    engine blocks ``[ends[j - 1], ends[j])`` (``ends[-1]`` is the number of keyed blocks) and its
    ``i``-th block is the cached block ``(keys[j], i)``.

    A block-hash trace's run is one trace block (512 tokens = 32 engine blocks of 16): the pool
    looks up, takes and lets go of a trace block's engine blocks in one operation
    (:class:`servecap.sim.kv_pool.KvPool`), not one per engine block. Read as a sequence it is
    the per-block keys (``keys[j] + i`` modulo 2^64, signed): for a trace's runs exactly
    :func:`engine_block_keys` (a run's key is its first block's key), so the routers that index
    single keys see the same keys as before. :meth:`unit` makes one run per key (a key tuple of
    :func:`servecap.workload.block_keys`: each block identified by its key alone)."""

    __slots__ = ("ends", "keys")

    def __init__(self, keys: tuple[int, ...], ends: tuple[int, ...]) -> None:
        self.keys = keys
        self.ends = ends

    @staticmethod
    def unit(keys: Sequence[int]) -> KeyRuns:
        if isinstance(keys, KeyRuns):
            return keys
        t = tuple(keys)
        return KeyRuns(t, _unit_ends(len(t)))

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    def _key(self, b: int) -> int:
        n = len(self)
        if b < 0:
            b += n
        if not 0 <= b < n:
            raise IndexError(b)
        j = bisect.bisect_right(self.ends, b)
        start = self.ends[j - 1] if j else 0
        return _signed64(self.keys[j] + (b - start))

    def __getitem__(self, b):  # type: ignore[no-untyped-def]
        if isinstance(b, slice):
            return tuple(self)[b]
        return self._key(b)

    def __iter__(self) -> Iterator[int]:
        start = 0
        for k, end in zip(self.keys, self.ends, strict=True):
            for i in range(end - start):
                yield _signed64(k + i)
            start = end

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KeyRuns):
            return tuple(self) == tuple(other)
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"KeyRuns({len(self.keys)} runs, {len(self)} blocks)"


@lru_cache(maxsize=512)
def _unit_ends(n: int) -> tuple[int, ...]:
    return tuple(range(1, n + 1))


def engine_block_runs(
    hash_ids: Sequence[int], trace_block_tokens: int, block_size: int, prompt_tokens: int
) -> KeyRuns | None:
    """:func:`engine_block_keys` as runs, one per trace block: trace block ``t``'s engine blocks
    are those whose last token it holds, ``b < (t + 1) x trace_block_tokens // block_size``
    (none when ``block_size`` exceeds it and a later trace block holds their last token); the
    run's key is its first block's key (None: no full block)."""
    if trace_block_tokens <= 0 or block_size <= 0:
        raise ValueError("block sizes must be positive")
    n = min(prompt_tokens // block_size, (len(hash_ids) * trace_block_tokens) // block_size)
    if n <= 0:
        return None
    keys: list[int] = []
    ends: list[int] = []
    start = 0
    for t, h in enumerate(hash_ids):
        end = min(n, ((t + 1) * trace_block_tokens) // block_size)
        if end > start:
            keys.append(_signed64(int(h) * _MIX + start))
            ends.append(end)
            start = end
        if start >= n:
            break
    return KeyRuns(tuple(keys), tuple(ends))


def engine_block_keys(
    hash_ids: Sequence[int], trace_block_tokens: int, block_size: int, prompt_tokens: int
) -> tuple[int, ...]:
    """Keys of the prompt's full engine blocks that the trace's ``hash_ids`` determine, in order.

    Block ``b``'s key is ``hash_ids[t] x 0x9E3779B97F4A7C15 + b`` modulo 2^64 (as a signed 64-bit
    integer), ``t`` the trace block holding its last token: equal exactly when ``(hash_ids[t], b)``
    are equal (the multiplier is odd, so distinct ids stay distinct for a given ``b``, and ``b``
    tells a trace block's engine blocks apart). Computed for all blocks at once (numpy): a long
    prompt has thousands."""
    if trace_block_tokens <= 0 or block_size <= 0:
        raise ValueError("block sizes must be positive")
    n_ids = len(hash_ids)
    n = min(prompt_tokens // block_size, (n_ids * trace_block_tokens) // block_size)
    if n <= 0:
        return ()
    b = np.arange(n, dtype=np.uint64)
    t = ((b + np.uint64(1)) * np.uint64(block_size) - np.uint64(1)) // np.uint64(trace_block_tokens)
    ids = np.asarray(hash_ids, dtype=np.uint64)
    with np.errstate(over="ignore"):
        keys = ids[t] * np.uint64(_MIX) + b
    return tuple(keys.view(np.int64).tolist())


class HashBlocks:
    """A request's trace block hashes, and their engine keys for the last block size asked
    (every replica of a fleet has the same block size: one mapping per request)."""

    __slots__ = ("_block_size", "_keys", "_runs", "_runs_block_size", "ids", "trace_block_tokens")

    def __init__(self, ids: tuple[int, ...], trace_block_tokens: int = DEFAULT_TRACE_BLOCK_TOKENS) -> None:
        self.ids = ids
        self.trace_block_tokens = trace_block_tokens
        self._block_size = 0
        self._keys: tuple[int, ...] | None = None
        self._runs_block_size = 0
        self._runs: KeyRuns | None = None

    def __repr__(self) -> str:
        return f"HashBlocks({len(self.ids)} ids x {self.trace_block_tokens} tokens)"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, HashBlocks)
            and self.ids == other.ids
            and self.trace_block_tokens == other.trace_block_tokens
        )

    def __hash__(self) -> int:
        return hash((self.ids, self.trace_block_tokens))

    def keys(self, block_size: int, prompt_tokens: int) -> tuple[int, ...] | None:
        """:func:`engine_block_keys` (None: no full block)."""
        if block_size != self._block_size:
            self._keys = engine_block_keys(self.ids, self.trace_block_tokens, block_size, prompt_tokens) or None
            self._block_size = block_size
        return self._keys

    def runs(self, block_size: int, prompt_tokens: int) -> KeyRuns | None:
        """:func:`engine_block_runs` (what the engine and the routers take: one run per id)."""
        if block_size != self._runs_block_size:
            self._runs = engine_block_runs(self.ids, self.trace_block_tokens, block_size, prompt_tokens)
            self._runs_block_size = block_size
        return self._runs


def leading_hits(hash_ids: Sequence[int], seen: set[int] | dict[int, object]) -> int:
    """Leading ids of ``hash_ids`` found in ``seen`` (a prefix cache's lookup: it stops at the
    first miss, the later blocks' keys chaining on the missing one)."""
    h = 0
    for x in hash_ids:
        if x not in seen:
            break
        h += 1
    return h
