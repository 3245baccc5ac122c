"""The engine profile's admission rule as the object the one engine step calls
(:class:`servecap.specs.engines.EngineProfile`, whose docstring gives the engines' sources).

- ``recompute`` (vLLM V1, TensorRT-LLM ``MAX_UTILIZATION``): :attr:`AdmissionPolicy.reserves`
  is False and the engine admits a request when its next chunk's blocks are free; a running
  request that cannot grow preempts the youngest (recompute).
- ``reserve`` (TensorRT-LLM ``GUARANTEED_NO_EVICT``, SGLang): a waiting request is admitted only
  when the free (and evictable) blocks cover, beyond its own blocks for this step,

      blocks(rest of its prompt + ratio x min(output left, clip))
      + blocks(Σ over running requests: rest of prompt + ratio x output left)

  where ``blocks(t) = groups x ceil(t / block_size)``. With a ratio of 1 (TensorRT-LLM
  ``GUARANTEED_NO_EVICT``) the reservation is per request and exact, as TensorRT-LLM's capacity
  scheduler counts it: a request reserves ``blocks_held(prompt + output)`` on admission and the
  pool must hold every running request's reservation (``Σ reserved - blocks in use`` still to
  come, beside the newcomer's), so it never preempts. For SGLang the ratio starts at ``reserve_output_ratio``, decays by
  ``(ratio0 - min_ratio) / decay_steps`` per decode step, is reset when the engine empties, and
  after a retraction (a preemption) is re-estimated as SGLang's ``retract_decode`` does:
  ``min(1, (tokens decoded + RETRACT_DECODE_STEPS x running) / (Σ max new tokens + 1))``
  (``RETRACT_DECODE_STEPS`` 20, ``python/sglang/srt/managers/schedule_batch.py``).

A plain typed class (the compiled engine calls it): one per engine, holding the current ratio.
"""

from __future__ import annotations

from servecap.specs.engines import EngineProfile

RETRACT_DECODE_STEPS = 20
"""SGLang's ``SGLANG_RETRACT_DECODE_STEPS`` default: the decode steps a retracted batch is
assumed to need before it runs out of memory again."""


class AdmissionPolicy:
    """One engine's admission state: whether it reserves output on admission, and the ratio."""

    def __init__(
        self,
        reserves: bool,
        ratio: float,
        min_ratio: float,
        decay_steps: int,
        clip_tokens: int,
    ) -> None:
        if reserves and not 0.0 <= min_ratio <= ratio <= 1.0:
            raise ValueError(f"reserve ratios must satisfy 0 <= min {min_ratio} <= ratio {ratio} <= 1")
        self.reserves = reserves
        self.init_ratio = ratio
        self.min_ratio = min_ratio
        self.ratio = ratio
        self.decay_per_step = (ratio - min_ratio) / decay_steps if decay_steps > 0 else 0.0
        self.clip_tokens = clip_tokens
        # a ratio of 1 reserves each request's last partial block too: no preemption ever
        self.whole_blocks = reserves and ratio >= 1.0
        self.retractions = 0

    @property
    def decaying(self) -> bool:
        """True while the ratio still changes from one decode step to the next."""
        return self.decay_per_step > 0.0 and self.ratio > self.min_ratio

    def on_decode_steps(self, steps: int) -> None:
        """``steps`` decode steps ran without a retraction (SGLang decays the ratio)."""
        if self.decay_per_step > 0.0:
            r = self.ratio - self.decay_per_step * steps
            self.ratio = r if r > self.min_ratio else self.min_ratio

    def on_idle(self) -> None:
        """The engine emptied (SGLang resets the ratio when it has no batch to run)."""
        self.ratio = self.init_ratio

    def on_retract(self, decoded_tokens: int, max_new_tokens: int, num_running: int) -> None:
        """Requests were preempted for memory: re-estimate the ratio from the batch left running."""
        self.retractions += 1
        if self.decay_per_step > 0.0:
            estimate = (decoded_tokens + RETRACT_DECODE_STEPS * num_running) / (max_new_tokens + 1)
            self.ratio = estimate if estimate < 1.0 else 1.0


def admission_policy(profile: EngineProfile) -> AdmissionPolicy:
    """A fresh policy object for one engine of ``profile``."""
    clip = profile.reserve_output_clip_tokens
    return AdmissionPolicy(
        profile.admission == "reserve",
        profile.reserve_output_ratio,
        profile.min_reserve_output_ratio,
        profile.reserve_decay_steps,
        clip if clip is not None else 1 << 62,
    )
