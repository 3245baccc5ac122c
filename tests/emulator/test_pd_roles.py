"""The emulator in P/D roles, driven as SGLang's router in PD mode drives a pair: the same body,
with ``bootstrap_host``, ``bootstrap_port`` and ``bootstrap_room``, to a prefill server and a
decode server at once (servecap.emulator.pd)."""

from __future__ import annotations

import asyncio
import itertools
import time

import httpx
from emulator_helpers import sim_engine, small_plan

from servecap.emulator.server import ServerThread, engine_state


def _body(port: int, room: int, max_tokens: int) -> dict[str, object]:
    return {
        "model": "m",
        "prompt": "x" * 4 * 1000,  # about 1,000 tokens
        "max_tokens": max_tokens,
        "bootstrap_host": "127.0.0.1",
        "bootstrap_port": port,
        "bootstrap_room": room,
    }


def test_a_prefill_and_a_decode_emulator_serve_a_request_as_a_pair() -> None:
    p = small_plan(num_blocks=400)
    with (
        ServerThread(engine_state(p, model_name="m", role="prefill", kv_link="tcp")) as pre,
        ServerThread(engine_state(p, model_name="m", role="decode", kv_link="tcp")) as dec,
    ):

        async def pair() -> tuple[httpx.Response, httpx.Response, float]:
            async with httpx.AsyncClient(timeout=30) as c:
                t0 = time.perf_counter()
                rp, rd = await asyncio.gather(
                    c.post(pre.url + "/v1/completions", json=_body(pre.port, 12345, 8)),
                    c.post(dec.url + "/v1/completions", json=_body(pre.port, 12345, 8)),
                )
                return rp, rd, time.perf_counter() - t0

        rp, rd, wall = asyncio.run(pair())
        assert rp.status_code == 200 and rd.status_code == 200, (rp.text, rd.text)
        assert rp.json()["usage"]["completion_tokens"] == 1  # a prefill server samples one token
        assert rd.json()["usage"]["completion_tokens"] == 8
        # ~1,000 tokens x 131,072 bytes over TCP at 3.125 GB/s: about 42 ms on the link
        assert wall > 0.04
        assert pre.state.pd is not None and pre.state.pd.transfers == 1
        for srv in (pre, dec):
            assert sim_engine(srv).held_blocks == 0  # the prefill's hold and the decode's reservation let go

        r = httpx.post(dec.url + "/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 2}, timeout=10)
        assert r.status_code == 400 and "bootstrap" in r.json()["error"]["message"]


def test_a_decode_servers_first_token_comes_a_step_after_the_kv_landed_not_before() -> None:
    """The decode request enters the engine when its KV has landed: its first token is one step
    after the prefill's end plus the transfer (~1,000 tokens x 131,072 bytes over TCP at
    3.125 GB/s: about 42 ms), and its tokens are one decode step apart from the first on. Were
    it entered at its receipt (before the transfer), its steps would be laid in the past and its
    first tokens written at once."""
    p = small_plan(num_blocks=400)
    with (
        ServerThread(engine_state(p, model_name="m", role="prefill", kv_link="tcp")) as pre,
        ServerThread(engine_state(p, model_name="m", role="decode", kv_link="tcp")) as dec,
    ):

        async def pair() -> tuple[httpx.Response, httpx.Response]:
            async with httpx.AsyncClient(timeout=30) as c:
                body = {"servecap_timing": True}
                rp, rd = await asyncio.gather(
                    c.post(pre.url + "/v1/completions", json={**_body(pre.port, 7, 8), **body}),
                    c.post(dec.url + "/v1/completions", json={**_body(pre.port, 7, 8), **body}),
                )
                return rp, rd

        rp, rd = asyncio.run(pair())
        assert rp.status_code == 200 and rd.status_code == 200, (rp.text, rd.text)
        prefilled_s = rp.json()["servecap_timing"]["end_s"]
        times = rd.json()["servecap_timing"]["token_times_s"]
        assert times[0] > prefilled_s + 0.042, (times[0], prefilled_s)
        steps = [b - a for a, b in itertools.pairwise(times)]
        assert min(steps) > 0.003, steps  # a decode step of an 8B model on an H100: several ms
