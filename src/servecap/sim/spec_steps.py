"""Decode steps a speculative request takes, drawn in one vectorised call.

Each step emits ``1 + n`` tokens with ``P(n)`` of :func:`servecap.core.spec_decode.accepted_distribution`
(a draw per sequence and step); a request of ``N`` output tokens gets its first from the prefill
and the rest in bursts, so its step count is ``1 + min{s : T_1 + ... + T_s >= N - 1}``. The
draws are the same law as :meth:`servecap.core.spec_decode.SpecSampler.decode_steps`, made a
block at a time with the generator passed in (the pure-Python sampler spends most of a
speculative simulation drawing).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from servecap.core.spec_decode import accepted_distribution, expected_tokens_per_step


class SpecSteps:
    def __init__(self, acceptance: Sequence[float], rng: np.random.Generator) -> None:
        dist = np.asarray(accepted_distribution(acceptance), dtype=np.float64)
        cdf = np.cumsum(dist / dist.sum())
        cdf[-1] = 1.0
        self._cdf = cdf
        self._sizes = np.arange(1, len(dist) + 1, dtype=np.int64)
        self._mean = expected_tokens_per_step(acceptance)
        self.rng = rng

    def decode_steps(self, output_tokens: int) -> int:
        left = output_tokens - 1
        steps = 1
        while left > 0:
            m = int(left / self._mean) + 8
            # inverse-CDF draws of each step's tokens, then their running total
            run = np.cumsum(self._sizes[np.searchsorted(self._cdf, self.rng.random(m), side="right")])
            i = int(np.searchsorted(run, left))  # the first step whose running total reaches left
            if i < m:
                return steps + i + 1
            left -= int(run[-1])
            steps += m
        return steps

    def decode_bursts(self, output_tokens: int) -> list[int]:
        """The tokens each decode step gives a request of ``output_tokens`` (after the prefill's
        first), the last burst cut to what is left: the bursts an emulator streams."""
        left = output_tokens - 1
        out: list[int] = []
        while left > 0:
            m = int(left / self._mean) + 8
            draws = self._sizes[np.searchsorted(self._cdf, self.rng.random(m), side="right")]
            for b in draws.tolist():
                take = b if b < left else left
                out.append(take)
                left -= take
                if left <= 0:
                    break
        return out
