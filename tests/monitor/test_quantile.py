"""Prometheus' histogram_quantile rule, worked by hand."""

import math

import pytest

from servecap.monitor.quantile import histogram_quantile

B = (0.1, 0.5, 1.0, math.inf)


def test_golden_interpolation_within_the_bucket() -> None:
    # r = 50 falls in (0.1, 0.5] holding cumulative ranks 10..60: 0.1 + 0.4 * 40 / 50
    assert histogram_quantile(0.5, B, (10, 60, 90, 100)) == pytest.approx(0.42)
    # r = 5 in the first bucket, lower bound 0: 0.1 * 5 / 10
    assert histogram_quantile(0.05, B, (10, 60, 90, 100)) == pytest.approx(0.05)
    # r = 90 reaches exactly the (0.5, 1.0] bucket's top
    assert histogram_quantile(0.9, B, (10, 60, 90, 100)) == pytest.approx(1.0)


def test_rank_in_the_inf_bucket_gives_the_largest_finite_bound() -> None:
    assert histogram_quantile(0.99, B, (10, 60, 90, 100)) == 1.0


def test_no_observations_is_none() -> None:
    assert histogram_quantile(0.5, B, (0, 0, 0, 0)) is None


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        histogram_quantile(1.5, B, (1, 1, 1, 1))
    with pytest.raises(ValueError):
        histogram_quantile(0.5, B, (1, 1))
