"""vLLM's speculative-decoding counters read by the monitor and turned into the planner's
per-position acceptance (servecap.monitor.spec_fit)."""

from __future__ import annotations

import pytest

from servecap.core.spec_decode import expected_tokens_per_step
from servecap.monitor.snapshot import parse_exposition
from servecap.monitor.spec_fit import fit_acceptance


def _text(drafts: int, tokens: int, accepted: int, per_pos: list[int], engines: int = 1) -> str:
    """vLLM's exposition (a counter's TYPE line names its _total sample, as vLLM writes it)."""
    lines = [
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        *(f'vllm:spec_decode_num_drafts_total{{engine="{e}",model_name="m"}} {drafts}' for e in range(engines)),
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        *(f'vllm:spec_decode_num_draft_tokens_total{{engine="{e}",model_name="m"}} {tokens}' for e in range(engines)),
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        *(
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="{e}",model_name="m"}} {accepted}'
            for e in range(engines)
        ),
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
    ]
    for e in range(engines):
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",model_name="m",position="{j}"}} {n}'
            for j, n in enumerate(per_pos)
        ]
    return "\n".join(lines) + "\n"


def test_fit_from_two_scrapes_by_hand() -> None:
    """1,000 drafts of 3 tokens; positions accepted 800, 560, 336 times: unconditional 0.8, 0.56,
    0.336, conditional 0.8, 0.7, 0.6, mean acceptance length 2.696 (tests/core/test_spec_decode.py)."""
    before = parse_exposition(_text(100, 300, 170, [80, 56, 34]), url="u", time_s=0.0)
    after = parse_exposition(_text(1100, 3300, 1866, [880, 616, 370]), url="u", time_s=10.0)
    fit = fit_acceptance(before, after)
    assert fit is not None
    assert fit.drafts == 1000 and fit.num_speculative_tokens == 3
    assert fit.per_position == pytest.approx((0.8, 0.56, 0.336))
    assert fit.conditional == pytest.approx((0.8, 0.7, 0.6))
    assert fit.mean_acceptance_length == pytest.approx(2.696)
    assert expected_tokens_per_step(fit.conditional) == pytest.approx(fit.mean_acceptance_length)
    assert fit.flag == "0.800,0.700,0.600"


def test_data_parallel_engines_sum_and_no_drafts_is_none() -> None:
    two = parse_exposition(_text(10, 30, 17, [8, 6, 3], engines=2), url="u", time_s=0.0)
    assert two.counters["spec_drafts"] == 20
    assert two.spec_accepted_per_pos == (16.0, 12.0, 6.0)
    assert fit_acceptance(two, two) is None
    plain = parse_exposition("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n", url="u", time_s=0)
    assert plain.spec_accepted_per_pos == ()
    assert fit_acceptance(plain, plain) is None


def test_a_restart_between_scrapes_is_none() -> None:
    before = parse_exposition(_text(1000, 3000, 1700, [800, 560, 340]), url="u", time_s=0.0)
    after = parse_exposition(_text(1100, 3300, 1800, [10, 5, 1]), url="u", time_s=1.0)
    assert fit_acceptance(before, after) is None


def test_the_window_carries_the_fit() -> None:
    from servecap.monitor.window import window_stats

    before = parse_exposition(_text(100, 300, 170, [80, 56, 34]), url="u", time_s=0.0)
    after = parse_exposition(_text(1100, 3300, 1866, [880, 616, 370]), url="u", time_s=10.0)
    w = window_stats(before, after)
    assert w.spec_acceptance is not None
    assert w.spec_acceptance.mean_acceptance_length == pytest.approx(2.696)
