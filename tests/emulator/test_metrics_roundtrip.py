"""Under load over real HTTP, every vLLM series the emulator exposes moves, and each agrees with
the engine's own counters and with what the clients received."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from emulator_helpers import sim_engine, small_plan
from prometheus_client.parser import text_string_to_metric_families

from servecap.emulator.server import ServerThread, engine_state
from servecap.specs import vllm_metrics as vm

NUM_REQUESTS = 24
CONCURRENCY = 12
SHARED = list(range(1, 33))  # 2 shared blocks: the prefix cache answers them
OUTPUT = 96  # 6 blocks of growth each: the 128-block pool must preempt


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _value(fams: dict[str, Any], name: str, sample: str | None = None, **labels: str) -> float:
    fam = fams[name]
    want = sample or (name + "_total" if fam.type == "counter" else name)
    vals = [s.value for s in fam.samples if s.name == want and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(vals) == 1, (name, want, labels)
    return float(vals[0])


async def _one(c: httpx.AsyncClient, i: int) -> dict[str, int]:
    prompt = SHARED + [1000 + 300 * i + j for j in range(224)]
    body = {
        "model": "m",
        "prompt": prompt,
        "max_tokens": OUTPUT,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with c.stream("POST", "/v1/completions", json=body) as r:
        assert r.status_code == 200
        usage: dict[str, int] = {}
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                obj = json.loads(line[6:])
                usage = obj.get("usage") or usage
    return usage


async def _load(url: str) -> tuple[list[dict[str, int]], dict[str, float]]:
    peaks = {"running": 0.0, "waiting": 0.0, "kv": 0.0}
    done = asyncio.Event()
    async with httpx.AsyncClient(base_url=url, timeout=60.0) as c:

        async def watch() -> None:
            while not done.is_set():
                fams = _families((await c.get("/metrics")).text)
                peaks["running"] = max(peaks["running"], _value(fams, "vllm:num_requests_running"))
                peaks["waiting"] = max(peaks["waiting"], _value(fams, "vllm:num_requests_waiting"))
                peaks["kv"] = max(peaks["kv"], _value(fams, "vllm:kv_cache_usage_perc"))
                await asyncio.sleep(0.02)

        sem = asyncio.Semaphore(CONCURRENCY)

        async def bounded(i: int) -> dict[str, int]:
            async with sem:
                return await _one(c, i)

        watcher = asyncio.create_task(watch())
        usages = await asyncio.gather(*(bounded(i) for i in range(NUM_REQUESTS)))
        done.set()
        await watcher
    return usages, peaks


def test_every_series_moves_and_agrees_with_the_engine() -> None:
    with ServerThread(engine_state(small_plan(128), model_name="m")) as srv:
        _check(srv)


def _check(engine_server: ServerThread) -> None:
    usages, peaks = asyncio.run(_load(engine_server.url))
    assert len(usages) == NUM_REQUESTS and all(u["completion_tokens"] == OUTPUT for u in usages)
    fams = _families(httpx.get(engine_server.url + "/metrics").text)
    stats = sim_engine(engine_server).stats
    prompt = sum(u["prompt_tokens"] for u in usages)
    gen = sum(u["completion_tokens"] for u in usages)

    # the gauges moved under load, and read the engine's state
    assert peaks["running"] >= 2 and peaks["waiting"] >= 1 and peaks["kv"] > 0.5
    assert _value(fams, "vllm:num_requests_running") == stats.num_running == 0
    assert _value(fams, "vllm:kv_cache_usage_perc") == stats.kv_blocks_used / stats.kv_blocks_total
    assert _value(fams, "vllm:gpu_cache_usage_perc") == _value(fams, "vllm:kv_cache_usage_perc")
    info = [s for s in fams["vllm:cache_config_info"].samples]
    assert len(info) == 1 and info[0].labels["num_gpu_blocks"] == str(stats.kv_blocks_total) == "128"
    assert info[0].labels["block_size"] == "16" and info[0].labels["enable_prefix_caching"] == "True"

    # counters agree with the engine and with what clients received
    assert _value(fams, "vllm:prompt_tokens") == prompt == NUM_REQUESTS * 256
    assert _value(fams, "vllm:generation_tokens") == gen
    assert _value(fams, "vllm:num_preemptions") == stats.preemptions > 0
    assert _value(fams, "vllm:prefix_cache_queries") == stats.prefix_cache_query_tokens > 0
    assert _value(fams, "vllm:prefix_cache_hits") == stats.prefix_cache_hit_tokens > 0
    assert _value(fams, "vllm:gpu_prefix_cache_hits") == stats.prefix_cache_hit_tokens
    assert _value(fams, "vllm:gpu_prefix_cache_queries") == stats.prefix_cache_query_tokens
    assert _value(fams, "vllm:request_success", finished_reason="length") == NUM_REQUESTS
    assert _value(fams, "vllm:request_success", finished_reason="abort") == 0

    # histograms: one observation per request (or per token), sums matching the counters
    def count(name: str) -> float:
        return _value(fams, name, name + "_count")

    def total(name: str) -> float:
        return _value(fams, name, name + "_sum")

    for name in (
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:request_inference_time_seconds",
        "vllm:request_time_per_output_token_seconds",
        "vllm:request_prompt_tokens",
        "vllm:request_generation_tokens",
        "vllm:request_max_num_generation_tokens",
        "vllm:request_params_n",
        "vllm:request_params_max_tokens",
    ):
        assert count(name) == NUM_REQUESTS, name
        assert total(name) > 0, name
    assert count("vllm:inter_token_latency_seconds") == gen - NUM_REQUESTS
    assert count("vllm:time_per_output_token_seconds") == count("vllm:inter_token_latency_seconds")
    assert total("vllm:request_prompt_tokens") == prompt and total("vllm:request_generation_tokens") == gen
    assert total("vllm:request_params_max_tokens") == OUTPUT * NUM_REQUESTS
    assert total("vllm:iteration_tokens_total") == prompt + gen
    assert count("vllm:iteration_tokens_total") == stats.steps
    assert total("vllm:request_queue_time_seconds") > 0  # some waited: the pool is small
    # vLLM's interval identities: inference = prefill + decode, e2e >= queue + inference
    assert (
        abs(
            total("vllm:request_inference_time_seconds")
            - total("vllm:request_prefill_time_seconds")
            - total("vllm:request_decode_time_seconds")
        )
        < 1e-6
    )
    assert (
        total("vllm:e2e_request_latency_seconds")
        >= (total("vllm:request_queue_time_seconds") + total("vllm:request_inference_time_seconds")) - 1e-6
    )

    # every vllm: family the emulator exposes is in the spec, with its type and buckets
    exposed = {n for n in fams if n.startswith("vllm:")}
    for name in exposed:
        spec = vm.BY_NAME[name]
        assert fams[name].type == spec.kind, name
        if spec.kind == "histogram":
            bounds = [float(s.labels["le"]) for s in fams[name].samples if s.name == name + "_bucket"]
            assert bounds[:-1] == [float(b) for b in spec.buckets_for(2048)], name
    # ... and every series moved (except the finish reasons nothing produced here)
    for name in exposed:
        moved = any(
            s.value > 0
            for s in fams[name].samples
            if s.labels.get("finished_reason") not in ("stop", "abort") and not s.name.endswith("_created")
        )
        gauge_peak = {
            "vllm:num_requests_running": peaks["running"],
            "vllm:num_requests_waiting": peaks["waiting"],
            "vllm:kv_cache_usage_perc": peaks["kv"],
            "vllm:gpu_cache_usage_perc": peaks["kv"],
        }
        assert moved or gauge_peak.get(name, 0) > 0, name
