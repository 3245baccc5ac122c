"""The 80% interval on every answer: order statistics of the corpus residuals, its fallbacks,
and its honesty on the held-out half."""

from __future__ import annotations

import pytest

from servecap.errors import ServecapError
from servecap.validation.interval import (
    MIN_VALUES,
    Residual,
    coverage,
    interval,
    load_residuals,
    order_statistic_bounds,
    replica_interval,
)


def _res(errors: list[float], engine: str = "vllm", fam: str = "H100", metric: str = "throughput") -> list[Residual]:
    return [Residual(engine, fam, metric, "train", e) for e in errors]


def test_order_statistics_cover_at_least_the_level() -> None:
    # n = 9: k = floor(0.1 x 10) = 1, the extremes, covering (9 + 1 - 2) / 10 = 80%
    nine = [0.1 * i - 0.2 for i in range(9)]
    assert order_statistic_bounds(nine) == (pytest.approx(-0.2), pytest.approx(0.6))
    # n = 19: k = 2, the second smallest and second largest, (19 + 1 - 4) / 20 = 80%
    nineteen = [float(i) for i in range(19)]
    assert order_statistic_bounds(nineteen) == (1.0, 17.0)
    with pytest.raises(ServecapError, match="too few"):
        order_statistic_bounds([0.0] * (MIN_VALUES - 1))


def test_interval_of_a_prediction_by_hand() -> None:
    # residuals -0.2 .. +0.6: a prediction of 100 means a measurement in [100 / 1.6, 100 / 0.8]
    pool = tuple(_res([0.1 * i - 0.2 for i in range(9)]))
    iv = interval(100.0, metric="throughput", engine="vllm", gpu_family="H100", residuals=pool)
    assert (iv.low, iv.high) == (pytest.approx(62.5), pytest.approx(125.0))
    assert iv.close and iv.count == 9 and "vllm on H100" in iv.note


def test_nothing_like_the_question_widens_and_says_so() -> None:
    close = _res([0.01 * i for i in range(-4, 5)])  # vLLM on H100: +-4%
    far = _res([0.1 * i for i in range(-5, 6)], engine="sglang", fam="A100")  # +-50%
    pool = tuple(close + far)
    here = interval(100.0, metric="throughput", engine="vllm", gpu_family="H100", residuals=pool)
    unseen = interval(100.0, metric="throughput", engine="trtllm", gpu_family="L40S", residuals=pool)
    assert here.close and not unseen.close
    assert unseen.basis == "every engine and GPU" and unseen.count == 20
    assert unseen.high - unseen.low > here.high - here.low
    assert "too few throughput values of trtllm on L40S" in unseen.note
    with pytest.raises(ServecapError, match="metric"):
        interval(1.0, metric="users", engine="vllm", gpu_family="H100", residuals=pool)


def test_held_out_coverage_of_the_80_percent_interval_is_honest() -> None:
    """Intervals built from the training half's residuals hold 70-90% of the held-out values."""
    inside, total = coverage(load_residuals())
    assert total >= 60
    assert 0.70 <= inside / total <= 0.90, f"{inside}/{total}"


def test_plan_json_carries_intervals_on_users_and_tpot() -> None:
    from dataclasses import replace

    from servecap.app.flags import DeploymentFlags
    from servecap.app.plan import PlanRequest, plan

    flags = DeploymentFlags(
        model="meta-llama/Llama-3.1-70B", gpu="H200", weights_dtype="fp8", kv_cache_dtype="fp8", max_model_len=8192
    )
    answers = {}
    for engine in ("vllm", "trtllm"):
        data = plan(PlanRequest(deployment=replace(flags, engine=engine))).to_dict()
        users, tpot = data["interval"]["users_served"], data["interval"]["tpot_s"]
        expected = interval(float(data["users_served"]), metric="throughput", engine=engine, gpu_family="H200")
        if engine == "trtllm":  # the roofline: the interval of the residuals alone
            assert (users["low"], users["high"]) == (expected.low, expected.high)
        else:  # auto runs the operations here (specs.step_choice): widened by their fallback share
            assert "from the roofline fallback" in users["note"]
            assert users["low"] < expected.low and users["high"] > expected.high
        assert tpot["low"] < tpot["high"] and tpot["level"] == 0.8
        answers[engine] = data
    # the two engines' KV caches differ (TensorRT-LLM's fraction is of the memory left after the weights)
    assert answers["trtllm"]["kv_cache_tokens"] != answers["vllm"]["kv_cache_tokens"]


def test_fleet_plan_replica_interval_by_hand() -> None:
    """Nine throughput residuals -0.15 .. +0.25 (k = 1: the extremes). servecap said 7 replicas
    at $7,000/month: a replica serving c / 1.25 .. c / 0.85 of what servecap predicted needs
    7 x 0.85 = 5.95 -> 6 .. 7 x 1.25 = 8.75 -> 9 replicas, $1,000 each: $6,000 .. $9,000."""
    pool = tuple(_res([round(0.05 * i - 0.15, 2) for i in range(9)]))
    count, cost = replica_interval(7, 7000.0, engine="vllm", gpu_family="H100", residuals=pool)
    assert (count.low, count.high) == (6.0, 9.0)
    assert (cost.low, cost.high) == (pytest.approx(6000.0), pytest.approx(9000.0))
    assert count.level == 0.8 and count.count == 9 and count.close and "replica count" in count.note
    # a whole number of replicas on the boundary stays put: 10 x (1 - 0.2) = 8 exactly
    nine = tuple(_res([0.1 * i - 0.2 for i in range(9)]))
    count, _ = replica_interval(10, 1.0, engine="vllm", gpu_family="H100", residuals=nine)
    assert (count.low, count.high) == (8.0, 16.0)
    # never below one replica
    wide = tuple(_res([-0.9] + [0.0] * 8))
    assert replica_interval(1, 1.0, engine="vllm", gpu_family="H100", residuals=wide)[0].low == 1.0
