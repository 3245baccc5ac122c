"""A trace file's requests as columns (:class:`ArrivalTrace`), the object every open-loop trace
reader returns (:func:`servecap.workload.trace.load_trace`,
:func:`servecap.workload.copilot_trace.load_copilot_trace`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from servecap.workload.block_hash import DEFAULT_TRACE_BLOCK_TOKENS

__all__ = ["ArrivalTrace"]


@dataclass(frozen=True, slots=True)
class ArrivalTrace:
    """A trace file's requests as columns, sorted by arrival (ties in file order).

    ``hash_ids`` holds every row's block hashes end to end, row ``i``'s being
    ``hash_ids[hash_offsets[i]:hash_offsets[i + 1]]`` (empty for all rows of a trace without
    hashes); ``skipped`` counts rows the format leaves out (BurstGPT's failed requests)."""

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    prefix_group: NDArray[np.int64]  # -1: no shared prefix
    prefix_tokens: NDArray[np.int64]
    hash_ids: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hash_offsets: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    trace_block_tokens: int = DEFAULT_TRACE_BLOCK_TOKENS
    format: str = "servecap"
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def has_hashes(self) -> bool:
        return len(self.hash_ids) > 0

    def hashes_of(self, i: int) -> NDArray[np.int64]:
        """Row ``i``'s block hashes (empty when none)."""
        if not len(self.hash_offsets):
            return self.hash_ids[:0]
        return self.hash_ids[self.hash_offsets[i] : self.hash_offsets[i + 1]]
