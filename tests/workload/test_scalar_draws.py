"""The closed loop's one-at-a-time draws (``sample_one``, ``sample_token_one``) are the array
path's (``sample(..., 1)[0]``, ``sample_tokens(..., 1)[0]``): the same values, in the same order,
and the generator left in the same state, for every kind of distribution."""

from __future__ import annotations

import numpy as np
import pytest

from servecap.workload.dists import AnyDist, sample, sample_one, sample_token_one, sample_tokens
from servecap.workload.spec_parts import (
    EmpiricalDist,
    ExponentialDist,
    FixedDist,
    LogNormalDist,
    MixtureComponent,
    MixtureDist,
    NormalDist,
    UniformDist,
)

DISTS: list[AnyDist] = [
    FixedDist(value=512),
    FixedDist(value=2.5),  # halves round to even: 2
    FixedDist(value=3.5),  # ... and 4
    FixedDist(value=0),  # below the minimum
    ExponentialDist(mean=5.0),
    UniformDist(low=0.5, high=6.5),
    NormalDist(mean=300, std=200, min=50, max=400),  # both bounds clip
    NormalDist(mean=2, std=3),  # the default minimum clips
    LogNormalDist(median=800, sigma=1.2, min=16, max=4000),
    LogNormalDist(median=1.5, sigma=0.7),
    EmpiricalDist(values=[0.5, 1.5, 2.5, 17.0, 1000.25]),
    MixtureDist(
        components=[
            MixtureComponent(weight=9, dist=LogNormalDist(median=200, sigma=0.5)),
            MixtureComponent(weight=1, dist=UniformDist(low=4000, high=8000)),
        ]
    ),
]


@pytest.mark.parametrize("dist", DISTS, ids=lambda d: f"{d.kind}")
def test_one_draw_at_a_time_is_the_array_paths_draw(dist: AnyDist) -> None:
    for seed in range(3):
        one, array = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(500):
            assert sample_one(dist, one) == float(sample(dist, array, 1)[0])
            got = sample_token_one(dist, one, minimum=1)
            assert type(got) is int and got == int(sample_tokens(dist, array, 1, minimum=1)[0])
        assert one.bit_generator.state == array.bit_generator.state


def test_an_empirical_dist_without_values_is_refused_as_before() -> None:
    unloaded = EmpiricalDist(path="lengths.txt")
    with pytest.raises(ValueError, match="has no values"):
        sample_one(unloaded, np.random.default_rng(0))
