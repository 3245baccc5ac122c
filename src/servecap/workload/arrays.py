"""An open-loop request stream as columns (what the simulators read; one row per request)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from servecap.workload.block_hash import HashBlocks
from servecap.workload.request import RequestSpec


@dataclass(frozen=True, slots=True)
class RequestArrays:
    """One row per request, sorted by arrival.

    The first five columns are always given. The traffic-mix columns default to "none" when left
    out: ``tenant`` and ``request_class`` are small int codes into ``tenant_names`` and
    ``class_names`` (-1: none); ``session_id`` and ``duplicate_group`` are ids (-1: none);
    ``priority`` is the scheduling priority (lower first, 0 by default).
    """

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    prefix_group: NDArray[np.int64]  # -1: none
    prefix_tokens: NDArray[np.int64]
    tenant: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    request_class: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    session_id: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    duplicate_group: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    priority: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    tenant_names: tuple[str, ...] = ()
    class_names: tuple[str, ...] = ()
    # block-hash prompts (a Mooncake-style trace): row i's ids are
    # hash_ids[hash_offsets[i]:hash_offsets[i + 1]], one per trace_block_tokens tokens; both
    # columns empty when no row has any (servecap.workload.block_hash)
    hash_ids: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hash_offsets: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    trace_block_tokens: int = 512

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        for name, fill in (("tenant", -1), ("request_class", -1), ("session_id", -1), ("duplicate_group", -1)):
            if len(getattr(self, name)) != n:
                object.__setattr__(self, name, np.full(n, fill, dtype=np.int64))
        if len(self.priority) != n:
            object.__setattr__(self, "priority", np.zeros(n, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def has_hashes(self) -> bool:
        return len(self.hash_offsets) == len(self.arrival_s) + 1 and len(self.hash_ids) > 0

    def hash_blocks(self) -> list[HashBlocks | None]:
        """Each row's :class:`HashBlocks` (None: a row without ids), or all None."""
        n = len(self.arrival_s)
        if not self.has_hashes:
            return [None] * n
        ids: list[int] = self.hash_ids.tolist()
        off: list[int] = self.hash_offsets.tolist()
        bt = self.trace_block_tokens
        return [HashBlocks(tuple(ids[off[i] : off[i + 1]]), bt) if off[i + 1] > off[i] else None for i in range(n)]

    def tenant_of(self, i: int) -> str | None:
        """The tenant name of row ``i`` (None: none)."""
        code = int(self.tenant[i])
        return None if code < 0 else self.tenant_names[code]

    def class_of(self, i: int) -> str | None:
        """The class name of row ``i`` (None: none)."""
        code = int(self.request_class[i])
        return None if code < 0 else self.class_names[code]

    def take(self, idx: NDArray[np.int64]) -> RequestArrays:
        """The rows ``idx`` (in that order), name tables kept."""
        return RequestArrays(
            self.arrival_s[idx],
            self.prompt_tokens[idx],
            self.output_tokens[idx],
            self.prefix_group[idx],
            self.prefix_tokens[idx],
            self.tenant[idx],
            self.request_class[idx],
            self.session_id[idx],
            self.duplicate_group[idx],
            self.priority[idx],
            self.tenant_names,
            self.class_names,
            *self._take_hashes(idx),
        )

    def _take_hashes(self, idx: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
        if not self.has_hashes:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), self.trace_block_tokens
        starts, ends = self.hash_offsets[:-1][idx], self.hash_offsets[1:][idx]
        offsets = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=offsets[1:])
        pieces = [self.hash_ids[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        ids = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
        return ids.astype(np.int64), offsets, self.trace_block_tokens

    def to_requests(self) -> list[RequestSpec]:
        tenants: list[str | None] = [None if c < 0 else self.tenant_names[c] for c in self.tenant.tolist()]
        classes: list[str | None] = [None if c < 0 else self.class_names[c] for c in self.request_class.tolist()]
        blocks = self.hash_blocks()
        return [
            RequestSpec(
                request_id=i,
                arrival_s=a,
                prompt_tokens=p,
                output_tokens=o,
                prefix_group=None if g < 0 else g,
                prefix_tokens=t if g >= 0 else 0,
                priority=pr,
                tenant=tn,
                request_class=cl,
                session_id=None if s < 0 else s,
                duplicate_group=None if d < 0 else d,
                hash_blocks=hb,
            )
            for i, (a, p, o, g, t, pr, tn, cl, s, d, hb) in enumerate(
                zip(
                    self.arrival_s.tolist(),
                    self.prompt_tokens.tolist(),
                    self.output_tokens.tolist(),
                    self.prefix_group.tolist(),
                    self.prefix_tokens.tolist(),
                    self.priority.tolist(),
                    tenants,
                    classes,
                    self.session_id.tolist(),
                    self.duplicate_group.tolist(),
                    blocks,
                    strict=True,
                )
            )
        ]
