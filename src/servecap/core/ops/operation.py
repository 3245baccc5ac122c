"""One operation of an engine step: what it moves and computes, how long it takes, and where that
time came from (``--explain-step``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OpKind = Literal["gemm", "attention", "moe", "communication", "elementwise", "overhead", "overlap"]

ROOFLINE = "roofline"
"""The source of an operation timed by the roofline with the fitted efficiencies (the fallback)."""


@dataclass(frozen=True, slots=True)
class Operation:
    """``count`` calls of one operation in a step (per GPU, summed over the pipeline stages).

    - ``time_s``: all ``count`` calls together;
    - ``bytes`` / ``flops``: what they move through HBM (or the link) and compute, together;
    - ``source``: ``roofline``, the measured table it came from (``measured: ...``), or a published
      ceiling with a share servecap fitted (``fitted: ...``, AMD GPUs); only ``measured`` sources
      count as measured (the interval widens by the rest);
    - ``per_rank``: the batch this operation sees on one rank (tokens; attention data parallelism
      gives each rank its own share of the step's sequences, expert parallelism each rank the
      tokens routed to its experts); equal to the step's tokens without them.
    """

    name: str
    kind: OpKind
    count: int
    time_s: float
    bytes: float
    flops: float
    source: str
    per_rank: int = 0

    @property
    def measured(self) -> bool:
        return self.source.startswith("measured")


@dataclass(frozen=True, slots=True)
class StepExplanation:
    """One step's operations and the step time the simulator uses for it (``--explain-step``).

    ``total_s`` is the sum of the operations' times. Under the roofline step model the last
    operation is ``roofline_overlap``: the roofline prices the whole step as one
    ``max(memory, compute)`` over every byte it holds resident, and that line is its difference
    from the sum of the per-operation rooflines, so the lines still add up to the step."""

    step_model: str
    batch: int
    context_tokens: float
    operations: tuple[Operation, ...]
    total_s: float
    choice: str | None = None  # why ``auto`` ran this step model (specs.step_choice), when it chose

    @property
    def fallback_share(self) -> float:
        """The share of the step's time from the roofline fallback (not a measured table)."""
        if self.total_s <= 0.0:
            return 0.0
        roof = sum(o.time_s for o in self.operations if not o.measured and o.kind != "overhead")
        timed = sum(o.time_s for o in self.operations if o.kind != "overhead")
        return roof / timed if timed > 0.0 else 0.0
