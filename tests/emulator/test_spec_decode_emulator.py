"""An emulated replica running speculative decoding over real HTTP: each request streams all its
tokens, in accepted bursts; /metrics carries vLLM's spec-decode counters, consistent with what
was streamed; the monitor's fit reads back the acceptance the replica was planned with."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import httpx
from emulator_helpers import small_plan

from servecap.core.plan import plan
from servecap.emulator.server import ServerThread, engine_state
from servecap.monitor.snapshot import parse_exposition
from servecap.monitor.spec_fit import fit_acceptance
from servecap.specs.deployment import SpecDecodeConfig

ACCEPTANCE = (0.8, 0.7, 0.6)
OUTPUT = 60
NUM_REQUESTS = 8


async def _one(c: httpx.AsyncClient, i: int) -> int:
    """Tokens streamed to one request."""
    body = {"model": "m", "prompt": [1000 + 50 * i + j for j in range(40)], "max_tokens": OUTPUT, "stream": True}
    tokens = 0
    async with c.stream("POST", "/v1/completions", json=body) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                obj = json.loads(line[6:])
                tokens += sum(1 for ch in obj.get("choices", []) if ch.get("text") is not None)
    return tokens


async def _load(url: str) -> list[int]:
    async with httpx.AsyncClient(base_url=url, timeout=60.0) as c:
        return list(await asyncio.gather(*(_one(c, i) for i in range(NUM_REQUESTS))))


def test_bursts_and_counters() -> None:
    base = small_plan(512)
    p = plan(replace(base.deployment, speculative=SpecDecodeConfig("eagle3", 3, ACCEPTANCE)))
    with ServerThread(engine_state(p, model_name="m")) as srv:
        before = parse_exposition(httpx.get(srv.url + "/metrics").text, url=srv.url, time_s=0.0)
        got = asyncio.run(_load(srv.url))
        after = parse_exposition(httpx.get(srv.url + "/metrics").text, url=srv.url, time_s=1.0)
        text = httpx.get(srv.url + "/metrics").text
    assert got == [OUTPUT] * NUM_REQUESTS  # every token streamed
    assert "vllm:spec_decode_num_accepted_tokens_per_pos_total" in text
    drafts = after.counters["spec_drafts"]
    accepted = after.counters["spec_accepted_tokens"]
    assert after.counters["spec_draft_tokens"] == 3 * drafts
    # every token after the first came in a step's burst: one per draft plus the accepted ones
    assert drafts + accepted == NUM_REQUESTS * (OUTPUT - 1)
    assert sum(after.spec_accepted_per_pos) == accepted
    assert after.spec_accepted_per_pos[0] >= after.spec_accepted_per_pos[1] >= after.spec_accepted_per_pos[2]
    fit = fit_acceptance(before, after)
    assert fit is not None
    # ~470 drafts: the fitted first-position rate within sampling error of the planned 0.8
    assert abs(fit.conditional[0] - 0.8) < 0.1
    assert 2.0 < fit.mean_acceptance_length < 3.4
