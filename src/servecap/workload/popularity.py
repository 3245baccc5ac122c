"""Skewed popularity: which of ``k`` items (prefix groups, repeated questions, sessions) a
request picks.

Zipf's law: item ``i`` (1-based, by rank) is picked with probability ``i^{-s} / Σ_j j^{-s}``
(Zipf 1949; for web requests Breslau et al., "Web caching and Zipf-like distributions",
INFOCOM 1999, measure ``s`` between 0.64 and 0.83). ``s = 0`` is uniform.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def zipf_probs(k: int, s: float) -> NDArray[np.float64]:
    """The ``k`` probabilities, most popular first."""
    w = np.arange(1, k + 1, dtype=np.float64) ** -s
    out: NDArray[np.float64] = w / w.sum()
    return out


def draw_popular(rng: np.random.Generator, k: int, s: float, n: int) -> NDArray[np.int64]:
    """``n`` item indices in ``[0, k)``; uniform (``rng.integers``) when ``s == 0``."""
    if s == 0:
        return rng.integers(0, k, n).astype(np.int64)
    cdf = np.cumsum(zipf_probs(k, s))
    idx = np.searchsorted(cdf, rng.uniform(0.0, 1.0, n) * cdf[-1], side="right")
    out: NDArray[np.int64] = np.minimum(idx, k - 1).astype(np.int64)
    return out
