"""The emulator speaks the OpenAI API as vLLM does (in-process, fixed-latency engine)."""

from __future__ import annotations

import json

import httpx

from servecap.emulator.server import fixed_state
from servecap.measure.asgi_stream import StreamingASGITransport


async def test_routes_errors_streams_and_metrics() -> None:
    st = fixed_state(0.002, 0.001, model_name="m", max_model_len=100)
    async with httpx.AsyncClient(transport=StreamingASGITransport(st.driver_app()), base_url="http://e") as c:
        assert (await c.get("/health")).status_code == 200
        assert (await c.get("/v1/models")).json()["data"][0]["id"] == "m"
        bad = await c.post("/v1/completions", content=b"{nope")
        assert bad.status_code == 400 and "error" in bad.json()
        # vLLM ignores (and logs) unknown fields, and routers add their own: served, not refused
        unknown = await c.post("/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 1, "bogus": 1})
        assert unknown.status_code == 200
        assert (await c.post("/v1/completions", json={"model": "x", "prompt": "hi"})).status_code == 404
        long = await c.post("/v1/completions", json={"model": "m", "prompt": [1] * 90, "max_tokens": 20})
        assert long.status_code == 400 and "maximum context length" in long.json()["error"]["message"]
        whole = (await c.post("/v1/completions", json={"model": "m", "prompt": "abcdefgh", "max_tokens": 3})).json()
        assert whole["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
        assert whole["choices"][0]["finish_reason"] == "length"
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "x" * 40}],
            "max_tokens": 4,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        r = await c.post("/v1/chat/completions", json=body)
        events = [line[6:] for line in r.text.split("\n\n") if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert sum(1 for ch in chunks if ch["choices"] and ch["choices"][0]["delta"].get("content")) == 4
        assert chunks[-1]["usage"] == {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
        metrics = (await c.get("/metrics")).text
        for name in (
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
            "vllm:kv_cache_usage_perc",
            "vllm:gpu_cache_usage_perc",
            "vllm:time_to_first_token_seconds_bucket",
            "vllm:time_per_output_token_seconds",
            "vllm:e2e_request_latency_seconds",
            "vllm:prompt_tokens_total",
            "vllm:generation_tokens_total",
            "vllm:num_preemptions_total",
        ):
            assert name in metrics, name
        # 3 + 4 tokens from the two streams above, 1 from the request with an unknown field
        assert 'vllm:generation_tokens_total{engine="0",model_name="m"} 8.0' in metrics
    await st.driver.stop()


async def test_timing_usage_whole_bodies_and_methods() -> None:
    st = fixed_state(0.002, 0.001, model_name="m", max_model_len=100)
    async with httpx.AsyncClient(transport=StreamingASGITransport(st.driver_app()), base_url="http://e") as c:
        assert (await c.get("/v1/completions")).status_code == 405
        body = {"model": "m", "prompt": [1, 2, 3], "max_tokens": 3, "stream": True, "servecap_timing": True}
        r = await c.post("/v1/completions", json=body)
        events = [line[6:] for line in r.text.split("\n\n") if line.startswith("data: ")]
        chunks = [json.loads(e) for e in events[:-1]]
        assert [ch["choices"][0]["text"] for ch in chunks[:3]] == [" the", " and", " for"]
        assert [ch["choices"][0]["finish_reason"] for ch in chunks[:3]] == [None, None, "length"]
        timing = chunks[-1]["servecap_timing"]
        assert chunks[-1]["usage"]["completion_tokens"] == 3 and len(timing["token_times_s"]) == 3
        assert timing["first_token_s"] - timing["received_s"] >= 0.002 - 1e-9
        chat = await c.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "abcd"}], "max_tokens": 2},
        )
        assert chat.json()["choices"][0]["message"] == {"role": "assistant", "content": " the and"}
        assert chat.json()["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    await st.driver.stop()
