"""A client that leaves mid-stream has its request aborted in the engine: its KV blocks come
back and the running count drops, as vLLM aborts a request whose connection closed."""

from __future__ import annotations

import asyncio
import time

import httpx
from emulator_helpers import sim_engine
from prometheus_client.parser import text_string_to_metric_families

from servecap.emulator.server import ServerThread


async def _start_and_leave(srv: ServerThread) -> int:
    """Stream a long completion, read a few tokens, close the connection; the blocks the
    request held while it ran."""
    body = {"model": "m", "prompt": list(range(1, 301)), "max_tokens": 1500, "stream": True}
    async with (
        httpx.AsyncClient(base_url=srv.url, timeout=30.0) as c,
        c.stream("POST", "/v1/completions", json=body) as r,
    ):
        assert r.status_code == 200
        seen = 0
        async for line in r.aiter_lines():
            seen += line.startswith("data: {")
            if seen == 5:
                break
        st = sim_engine(srv).stats
        assert st.num_running == 1 and st.kv_blocks_used >= 19  # 300 prompt tokens + 5 generated
        return int(st.kv_blocks_used)


def test_disconnect_frees_kv_blocks_and_running_drops(engine_server: ServerThread) -> None:
    engine = sim_engine(engine_server)
    assert engine.stats.kv_blocks_used == 0
    held = asyncio.run(_start_and_leave(engine_server))
    assert held >= 19
    deadline = time.monotonic() + 5.0
    while engine.stats.num_running and time.monotonic() < deadline:
        time.sleep(0.01)
    st = engine.stats
    assert st.num_running == 0 and st.num_waiting == 0
    assert st.kv_blocks_used == 0  # the blocks it held are back (full prompt blocks stay cached, evictable)
    assert not engine.has_work()
    assert not engine_server.state.driver.streams
    text = httpx.get(engine_server.url + "/metrics").text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    aborts = [s.value for s in fams["vllm:request_success"].samples if s.labels["finished_reason"] == "abort"]
    assert aborts == [1.0]
    running = [s.value for s in fams["vllm:num_requests_running"].samples]
    assert running == [0.0]


async def test_fixed_reference_drops_a_left_request_too() -> None:
    from servecap.emulator.server import fixed_state
    from servecap.measure.asgi_stream import StreamingASGITransport

    st = fixed_state(0.001, 0.01, model_name="m")
    async with httpx.AsyncClient(transport=StreamingASGITransport(st.driver_app()), base_url="http://e") as c:
        body = {"model": "m", "prompt": "hello", "max_tokens": 1000, "stream": True}
        async with c.stream("POST", "/v1/completions", json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    break
        for _ in range(100):
            if not st.driver.engine.has_work():
                break
            await asyncio.sleep(0.01)
        text = (await c.get("/metrics")).text
    await st.driver.stop()
    assert not st.driver.engine.has_work() and not st.driver.streams
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert [s.value for s in fams["vllm:num_requests_running"].samples] == [0.0]
    aborts = [s.value for s in fams["vllm:request_success"].samples if s.labels["finished_reason"] == "abort"]
    assert aborts == [1.0]
