"""Speculative decoding: accepted tokens per step, defaults, sampler, worked by hand."""

from __future__ import annotations

import random

import pytest

from servecap.core.spec_decode import (
    PRIORS,
    SpecSampler,
    accepted_distribution,
    conditional_from_unconditional,
    constant_rate_for_length,
    expected_tokens_per_step,
    parse_acceptance,
)
from servecap.errors import ServecapError


def test_expected_tokens_for_k3_by_hand() -> None:
    """k = 3, per-position acceptance 0.8, 0.7, 0.6 (each given the ones before):
    P(0) = 0.2, P(1) = 0.8 x 0.3 = 0.24, P(2) = 0.56 x 0.4 = 0.224, P(3) = 0.336;
    tokens per step = 1 + 0.8 + 0.56 + 0.336 = 2.696 = 1 x 0.2 + 2 x 0.24 + 3 x 0.224 + 4 x 0.336."""
    acc = (0.8, 0.7, 0.6)
    assert expected_tokens_per_step(acc) == pytest.approx(2.696)
    dist = accepted_distribution(acc)
    assert dist == pytest.approx([0.2, 0.24, 0.224, 0.336])
    assert sum(dist) == pytest.approx(1.0)
    assert sum((n + 1) * p for n, p in enumerate(dist)) == pytest.approx(2.696)


def test_constant_rate_matches_the_closed_form() -> None:
    a = constant_rate_for_length(2.79, 3)
    assert (1 - a**4) / (1 - a) == pytest.approx(2.79, abs=1e-9)
    with pytest.raises(ServecapError):
        constant_rate_for_length(5.0, 3)


def test_vllm_per_position_rates_become_conditional() -> None:
    # vLLM's acceptance at token j is unconditional: 0.81, 0.74 -> 0.74 / 0.81 given the first
    assert conditional_from_unconditional((0.81, 0.74)) == pytest.approx((0.81, 0.74 / 0.81))
    ngram = PRIORS["ngram"]
    assert expected_tokens_per_step(ngram.acceptance) == pytest.approx(1 + 0.81 + 0.74 + 0.70 + 0.68 + 0.66, abs=1e-3)


def test_published_defaults() -> None:
    mtp = PRIORS["mtp"]
    assert (mtp.k, mtp.acceptance, mtp.low, mtp.high) == (1, (0.875,), (0.85,), (0.90,))
    assert expected_tokens_per_step(PRIORS["eagle3"].acceptance) == pytest.approx(2.79, abs=1e-3)
    assert expected_tokens_per_step(PRIORS["eagle"].acceptance) == pytest.approx(2.29, abs=1e-3)


def test_sampler_mean_and_steps() -> None:
    s = SpecSampler((0.8, 0.7, 0.6), random.Random(7))
    n = 40_000
    mean = sum(1 + s.accepted() for _ in range(n)) / n
    assert mean == pytest.approx(2.696, abs=0.02)
    always = SpecSampler((1.0, 1.0, 1.0), random.Random(0))
    assert always.decode_steps(10) == 1 + 3  # the prefill's token, then 4 + 4 + 1 (capped)
    assert always.decode_steps(1) == 1
    never = SpecSampler((1e-12,), random.Random(0))
    assert never.decode_steps(10) == 10
    a, b = SpecSampler((0.5,), random.Random(3)), SpecSampler((0.5,), random.Random(3))
    assert [a.decode_steps(50) for _ in range(5)] == [b.decode_steps(50) for _ in range(5)]


@pytest.mark.parametrize(
    "text", ["0", "-0.5", "nan", "1.5", "1e300", "0.8,0.7", "al=9", "al=x", "al=inf", "a,b", "0.8,,0.7"]
)
def test_bad_acceptance_is_one_line(text: str) -> None:
    with pytest.raises(ServecapError) as err:
        parse_acceptance(text, 3)
    assert "spec_acceptance" in str(err.value)
    assert "\n" not in str(err.value)


def test_acceptance_forms() -> None:
    assert parse_acceptance("0.9", 2) == (0.9, 0.9)
    assert parse_acceptance("0.9,0.8", 2) == (0.9, 0.8)
    assert expected_tokens_per_step(parse_acceptance("al=2.5", 3)) == pytest.approx(2.5, abs=1e-9)
