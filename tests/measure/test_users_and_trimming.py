"""Chat users with think time (and the prefix cache they hit), warm-up/cool-down trimming."""

from __future__ import annotations

import itertools

import pytest
from loadgen_helpers import Req

from servecap.cli.options import DeploymentFlags, deployment_from_options
from servecap.core.plan import plan
from servecap.emulator.server import engine_state
from servecap.measure.asgi_stream import AsgiClient
from servecap.measure.bench import run_bench, summarize_traces
from servecap.measure.loadgen import LoadConfig, make_trace, mark_trimmed
from servecap.workload import WorkloadSpec


async def test_chat_users_think_and_hit_the_prefix_cache() -> None:
    dep, _ = deployment_from_options(DeploymentFlags(model="meta-llama/Llama-3.1-8B", gpu="H100", max_model_len=4096))
    state = engine_state(plan(dep), model_name="m")
    spec = WorkloadSpec.model_validate(
        {
            "users": {"count": 2, "think_time_s": 0.1, "turns": 3, "start_spread_s": 0.0},
            "prompt_tokens": 64,
            "output_tokens": 8,
            "num_requests": 6,
        }
    )
    cfg = LoadConfig(base_url="http://e", model="m", endpoint="chat")
    try:
        out = await run_bench(cfg, spec, seed=3, transport=AsgiClient(state.driver_app()))
    finally:
        await state.driver.stop()
    traces = out.traces
    assert len(traces) == 6 and all(t.ok for t in traces), [t.error_detail for t in traces]
    for uid in {t.user_id for t in traces}:
        turns = sorted((t for t in traces if t.user_id == uid), key=lambda t: t.turn)
        assert [t.turn for t in turns] == [1, 2, 3]
        for a, b in itertools.pairwise(turns):
            assert a.end_s is not None and b.sent_s is not None
            assert b.sent_s - a.end_s >= 0.1 - 1e-3  # the user thought before the next turn
            # the next prompt is the conversation so far (prompt + answer) + new text ...
            assert b.measured_prompt_tokens >= a.measured_prompt_tokens + a.measured_output_tokens
            # ... whose full blocks the engine's prefix cache still holds
            assert b.cached_prompt_tokens >= 16 * (a.measured_prompt_tokens // 16) - 16
            assert b.cached_prompt_tokens > 0
        assert turns[0].cached_prompt_tokens == 0


def test_warmup_and_cooldown_requests_are_stored_but_not_summarized() -> None:
    traces = [make_trace(Req(i, float(i), 10, 2)) for i in range(10)]  # scheduled at 0..9 s
    for t in traces:
        t.sent_s, t.first_token_s, t.end_s = t.scheduled_s, t.scheduled_s + 0.1, t.scheduled_s + 0.2
        t.token_times_s = [t.scheduled_s + 0.1, t.scheduled_s + 0.2]
        t.usage_output_tokens = 2
    mark_trimmed(traces, LoadConfig(base_url="http://x", model="m", warmup_s=2.0, cooldown_s=3.0))
    # kept: scheduled in [2, 9 - 3] s
    assert [t.scheduled_s for t in traces if not t.trimmed] == [2.0, 3.0, 4.0, 5.0, 6.0]
    summary, window = summarize_traces(traces, None)
    assert summary.num_requests == 5 and summary.completed == 5
    assert window == pytest.approx(6.2 - 2.0)
    assert summary.throughput_req_s == pytest.approx(5 / 4.2)
