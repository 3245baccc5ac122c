"""Drawing from the workload's distributions with a passed-in ``numpy.random.Generator``."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from servecap.workload.spec import (
    EmpiricalDist,
    ExponentialDist,
    FixedDist,
    LogNormalDist,
    MixtureDist,
    NormalDist,
    UniformDist,
)

AnyDist = FixedDist | ExponentialDist | UniformDist | NormalDist | LogNormalDist | EmpiricalDist | MixtureDist


def sample(dist: AnyDist, rng: np.random.Generator, n: int) -> NDArray[np.float64]:
    """``n`` draws as floats (the same draws, in the same order, for the same generator state)."""
    if n <= 0:
        return np.zeros(0)
    if isinstance(dist, FixedDist):
        return np.full(n, float(dist.value))
    if isinstance(dist, ExponentialDist):
        return rng.exponential(dist.mean, n)
    if isinstance(dist, UniformDist):
        return rng.uniform(dist.low, dist.high, n)
    if isinstance(dist, NormalDist):
        hi = np.inf if dist.max is None else dist.max
        return np.clip(rng.normal(dist.mean, dist.std, n), dist.min, hi)
    if isinstance(dist, LogNormalDist):
        # median = e^mu (Johnson, Kotz and Balakrishnan, Continuous Univariate Distributions ch. 14)
        hi = np.inf if dist.max is None else dist.max
        return np.clip(rng.lognormal(np.log(dist.median), dist.sigma, n), dist.min, hi)
    if isinstance(dist, EmpiricalDist):
        if dist.values is None:
            raise ValueError("empirical distribution has no values (load the workload with load_workload)")
        values = np.asarray(dist.values, dtype=np.float64)
        return values[rng.integers(0, len(values), n)]
    weights = np.array([c.weight for c in dist.components], dtype=np.float64)
    which = rng.choice(len(weights), size=n, p=weights / weights.sum())
    out = np.empty(n)
    for i, comp in enumerate(dist.components):
        mask = which == i
        out[mask] = sample(comp.dist, rng, int(mask.sum()))
    return out


def sample_tokens(dist: AnyDist, rng: np.random.Generator, n: int, *, minimum: int = 1) -> NDArray[np.int64]:
    """Token counts: draws rounded to the nearest integer, at least ``minimum``."""
    return np.maximum(np.rint(sample(dist, rng, n)), minimum).astype(np.int64)


def sample_one(dist: AnyDist, rng: np.random.Generator) -> float:
    """One draw: the value of ``sample(dist, rng, 1)[0]``, the generator left in the same state.

    A closed loop draws each turn's think time and lengths one at a time; through the array path
    each draw cost a few numpy array calls, most of a closed-loop simulation's time (``capacity``
    at its defaults). numpy's scalar draws (``size=None``) take the same values from the stream as
    ``size=1``; tests/workload/test_scalar_draws.py pins the equality for every kind."""
    if isinstance(dist, FixedDist):
        return float(dist.value)
    if isinstance(dist, ExponentialDist):
        return float(rng.exponential(dist.mean))
    if isinstance(dist, UniformDist):
        return float(rng.uniform(dist.low, dist.high))
    if isinstance(dist, NormalDist):
        return _clip(float(rng.normal(dist.mean, dist.std)), dist.min, dist.max)
    if isinstance(dist, LogNormalDist):
        return _clip(float(rng.lognormal(np.log(dist.median), dist.sigma)), dist.min, dist.max)
    if isinstance(dist, EmpiricalDist) and dist.values is not None:
        return float(dist.values[int(rng.integers(0, len(dist.values)))])
    return float(sample(dist, rng, 1)[0])  # a mixture (or values not loaded: sample's error)


def sample_token_one(dist: AnyDist, rng: np.random.Generator, *, minimum: int = 1) -> int:
    """One token count: the value of ``sample_tokens(dist, rng, 1)[0]`` (Python's ``round`` of a
    float is ``np.rint``'s: the nearest integer, halves to even)."""
    x = sample_one(dist, rng)
    if math.isfinite(x) and abs(x) < 2.0**62:
        return max(round(x), minimum)
    return int(np.maximum(np.rint(np.array([x])), minimum).astype(np.int64)[0])


def _clip(x: float, low: float, high: float | None) -> float:
    """``np.clip(x, low, high or inf)`` on one value."""
    if x < low:
        x = float(low)
    if high is not None and x > high:
        x = float(high)
    return x


def mean(dist: AnyDist) -> float:
    """The distribution's mean before rounding and clipping (for reports and rate estimates)."""
    if isinstance(dist, FixedDist):
        return float(dist.value)
    if isinstance(dist, ExponentialDist):
        return float(dist.mean)
    if isinstance(dist, UniformDist):
        return (dist.low + dist.high) / 2.0
    if isinstance(dist, NormalDist):
        return float(dist.mean)
    if isinstance(dist, LogNormalDist):
        return float(dist.median * np.exp(dist.sigma**2 / 2.0))
    if isinstance(dist, EmpiricalDist):
        return float(np.mean(dist.values)) if dist.values else 0.0
    total = sum(c.weight for c in dist.components)
    return sum(c.weight / total * mean(c.dist) for c in dist.components)
