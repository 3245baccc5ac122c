"""The wall-clock driver and the stream writer: order under back-pressure, early wake-up for
a new request, the fast histograms' exposition."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from servecap.emulator.app import SseWriter
from servecap.emulator.driver import Stream
from servecap.emulator.metrics import EngineMetrics
from servecap.emulator.server import fixed_state


class _BlockingSend:
    """An ASGI send whose third body write blocks until released (a full socket buffer)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def __call__(self, message: Any) -> None:
        self.messages.append(dict(message))
        if sum(1 for m in self.messages if m["type"] == "http.response.body") == 3:
            await self.gate


async def test_writer_keeps_order_when_a_write_blocks() -> None:
    send = _BlockingSend()
    writer = SseWriter(send, b"H", chat=False, final=lambda s: b"F")
    stream = Stream(1, 10, 6, 0.0)
    writer.token(stream, 0)  # not started yet: queued
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await writer.flush()
    for i in range(1, 6):  # the third body write blocks; the rest queue behind it
        writer.token(stream, i)
    writer.finish(stream)
    assert not writer.done.done()
    send.gate.set_result(None)
    await asyncio.wait_for(writer.done, 1.0)
    bodies = [m for m in send.messages if m["type"] == "http.response.body"]
    data = b"".join(m["body"] for m in bodies)
    assert data.count(b"H") == 6 and data.endswith(b"F")
    words = [part.split(b'"text":"')[1][:4] for part in data.split(b"H")[1:]]
    assert words == [b" the", b" and", b" for", b" are", b" but", b" not"]  # in order
    assert data.count(b'"finish_reason":"length"') == 1
    assert [m["more_body"] for m in bodies][-1] is False and all(m["more_body"] for m in bodies[:-1])


class _Recorder:
    def __init__(self) -> None:
        self.at: list[float] = []

    def token(self, stream: Stream, index: int) -> None:
        self.at.append(time.perf_counter())

    def finish(self, stream: Stream) -> None:
        pass


async def test_fixed_engine_wakes_for_a_request_that_arrives_while_it_sleeps() -> None:
    st = fixed_state(0.03, 0.5, model_name="m")
    d = st.driver
    try:
        a = d.submit(d.next_request_id(), 8, 2, None)
        assert a is not None
        a.writer = _Recorder()
        await asyncio.sleep(0.05)  # A's first token is out; the driver sleeps until 0.53 s
        b = d.submit(d.next_request_id(), 8, 2, None)
        assert b is not None
        rec = _Recorder()
        b.writer = rec
        await asyncio.sleep(0.1)
        assert b.token_times_s == [b.received_s + 0.03]  # scheduled 30 ms after it arrived
        assert rec.at and rec.at[0] - (d.t0 + b.token_times_s[0]) < 0.02  # and written then
    finally:
        await d.stop()


def test_fast_histograms_expose_prometheus_format() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    m = EngineMetrics("m")
    m.ttft.observe(0.003)
    m.ttft.observe_many([0.003, 0.5, 1e6])
    text = m.exposition().decode()
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0' in text
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.005",model_name="m"} 2.0' in text
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0' in text
    assert 'vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 4.0' in text
    assert "# TYPE vllm:inter_token_latency_seconds histogram" in text
    assert 'vllm:num_requests_running{engine="0",model_name="m"} 0.0' in text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["vllm:request_success"].type == "counter"
    reasons = {s.labels["finished_reason"] for s in fams["vllm:request_success"].samples}
    assert reasons == {"stop", "length", "abort"}
