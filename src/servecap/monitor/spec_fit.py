"""The acceptance of a live server's speculative decoding, fitted from vLLM's counters.

Over a window (two scrapes), with ``D`` drafts, ``T`` draft tokens and ``A_j`` tokens accepted
at draft position ``j`` (``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``,
``..._num_accepted_tokens_per_pos``):

- ``k = T / D`` draft tokens a step;
- the unconditional rate of position ``j``: ``p_j = A_j / D``; the conditional one the planner
  takes (``--spec-acceptance``): ``a_j = p_j / p_{j-1}`` (:func:`servecap.core.spec_decode.conditional_from_unconditional`);
- the mean acceptance length: ``1 + sum_j p_j`` (vLLM's ``mean acceptance length``).
"""

from __future__ import annotations

from dataclasses import dataclass

from servecap.core.spec_decode import conditional_from_unconditional
from servecap.monitor.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class AcceptanceFit:
    drafts: float
    num_speculative_tokens: float  # draft tokens per draft
    per_position: tuple[float, ...]  # unconditional, vLLM's "acceptance at token j"
    conditional: tuple[float, ...]  # what --spec-acceptance takes
    mean_acceptance_length: float

    @property
    def flag(self) -> str:
        """``--spec-acceptance`` for the planner."""
        return ",".join(f"{a:.3f}" for a in self.conditional)


def fit_acceptance(before: Snapshot, after: Snapshot) -> AcceptanceFit | None:
    """The window's acceptance; None without drafts in it (no speculative decoding, or idle),
    or after a counter reset."""
    drafts = after.counters.get("spec_drafts", 0.0) - before.counters.get("spec_drafts", 0.0)
    tokens = after.counters.get("spec_draft_tokens", 0.0) - before.counters.get("spec_draft_tokens", 0.0)
    if drafts <= 0 or tokens <= 0:
        return None
    width = len(after.spec_accepted_per_pos)
    old = before.spec_accepted_per_pos + (0.0,) * (width - len(before.spec_accepted_per_pos))
    accepted = [a - b for a, b in zip(after.spec_accepted_per_pos, old, strict=False)]
    if any(x < 0 for x in accepted):
        return None  # a restart between the scrapes
    per_pos = tuple(min(1.0, x / drafts) for x in accepted)
    return AcceptanceFit(
        drafts=drafts,
        num_speculative_tokens=tokens / drafts,
        per_position=per_pos,
        conditional=conditional_from_unconditional(per_pos),
        mean_acceptance_length=1.0 + sum(per_pos),
    )
