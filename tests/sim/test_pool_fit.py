"""A request longer than the whole KV pool is refused by name on arrival, on every path that drives
the engine (a setup built by hand may have a ``max_model_len`` past its pool, which vLLM refuses at
startup; the engine used to take the request and stop with an internal "scheduled nothing").

Llama-3.1-8B on one H100, blocks of 16 tokens, the pool cut to 8 blocks: 128 tokens. A request's
last context is its prompt plus its output less one (the last output token is never computed), so
128 + 1 and 100 + 29 fit exactly and 129 + 1, 100 + 30 and 1 + 129 do not."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from servecap.catalog import lookup_gpu, resolve_model
from servecap.cli.main import cli
from servecap.core.defaults import build_deployment
from servecap.core.kv_tiers import default_tier
from servecap.core.kv_transfer import kv_footprint
from servecap.core.plan import plan
from servecap.errors import ServecapError
from servecap.fleet import INSTANT, FleetSpec, Pool, simulate_fleet
from servecap.sim import EngineSetup, engine_setup_from_plan
from servecap.sim.setup import kv_fit_tokens
from servecap.sim.simulate import simulate
from servecap.specs import RequestShape
from servecap.specs.dtypes import kv_dtype_named
from servecap.workload import RequestArrays, RequestSpec

BLOCKS = 8  # x 16 tokens


def _setup(
    blocks: int = BLOCKS, model: str = "meta-llama/Llama-3.1-8B", max_model_len: int = 4096, **kw: object
) -> EngineSetup:
    dep = build_deployment(resolve_model(model), lookup_gpu("H100"), max_model_len=max_model_len)
    setup = engine_setup_from_plan(plan(dep, request=RequestShape(64, 16)), **kw)  # type: ignore[arg-type]
    return dataclasses.replace(setup, num_gpu_blocks=blocks)


def _one(prompt: int, output: int, request_id: int = 0) -> list[RequestSpec]:
    return [RequestSpec(request_id=request_id, arrival_s=0.0, prompt_tokens=prompt, output_tokens=output)]


@pytest.mark.parametrize(("prompt", "output"), [(128, 1), (100, 29), (1, 128)])
def test_a_request_whose_context_fills_the_pool_exactly_runs(prompt: int, output: int) -> None:
    res = simulate(_setup(), _one(prompt, output))
    assert res.summary.completed == 1


@pytest.mark.parametrize(
    ("prompt", "output", "context"), [(129, 1, 129), (100, 30, 129), (1, 129, 129), (4000, 9, 4008)]
)
def test_a_request_past_the_pool_is_refused_by_name(prompt: int, output: int, context: int) -> None:
    with pytest.raises(ServecapError) as err:
        simulate(_setup(), _one(prompt, output))
    text = str(err.value)
    assert text.startswith("request=0: ") and "\n" not in text
    assert f"{prompt} prompt + {output} output tokens need a context of {context} tokens" in text
    assert "the whole KV pool holds 128 (8 blocks of 16)" in text


def test_past_max_model_len_it_stays_a_too_long_record() -> None:
    """Longer than ``max_model_len`` (4,096) the engine server refuses it as vLLM's API server
    does (a 400), before the pool is asked."""
    res = simulate(_setup(), _one(5000, 9))
    assert res.summary.completed == 0
    assert [r.error for r in res.records()] == ["too_long"]


@pytest.mark.parametrize("kv_load", ["layerwise", "async"])
def test_with_kv_tiers_blocking_or_asynchronous_the_same_refusal(kv_load: str) -> None:
    setup = _setup(kv_tiers=(default_tier("cpu", 2**30),), kv_load=kv_load)
    assert setup.kv_tiers is not None and setup.kv_tiers.async_load == (kv_load == "async")
    with pytest.raises(ServecapError, match=r"^request=0: 200 prompt .* holds 128 "):
        simulate(setup, _one(200, 4))


def test_sliding_window_layouts_fit_by_their_own_block_count() -> None:
    """Gemma-2 holds a full-attention group and a 4,096-token sliding-window group: past the
    window the second stops growing, so 700 blocks hold a context of 7,088 tokens
    (443 + 257 blocks), not 700 // 2 x 16 = 5,600."""
    setup = _setup(700, "google/gemma-2-27b", max_model_len=8192)
    fit = kv_fit_tokens(setup)
    assert fit == 7088
    assert setup.layout.blocks_held(fit) <= 700 < setup.layout.blocks_held(fit + 1)
    with pytest.raises(ServecapError, match="need a context of 7089 tokens; the whole KV pool holds 7088"):
        simulate(setup, _one(7089, 1))


def _arrays(prompts: list[int], output: int = 4) -> RequestArrays:
    n = len(prompts)
    return RequestArrays(
        np.arange(n, dtype=np.float64) * 0.01,
        np.array(prompts, dtype=np.int64),
        np.full(n, output, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
    )


def test_a_fleet_of_two_pool_sizes_names_the_small_pool() -> None:
    big = Pool("big", _setup(4096), replicas=1, cold_start=INSTANT)
    small = Pool("small", _setup(BLOCKS), replicas=1, cold_start=INSTANT)
    spec = FleetSpec((big, small), router="round-robin")
    with pytest.raises(ServecapError, match=r"^request=1: 300 prompt .* holds 128 .*\(pool 'small'\)$"):
        simulate_fleet(spec, _arrays([300, 300]), 0)


def test_a_pd_fleet_refuses_on_arrival_naming_the_pool() -> None:
    fp = kv_footprint(resolve_model("meta-llama/Llama-3.1-8B"), 1, kv_dtype_named("bf16"), 3.35e12)
    p = Pool("p", _setup(4096), replicas=1, cold_start=INSTANT, role="prefill", kv=fp)
    d = Pool("d", _setup(BLOCKS), replicas=1, cold_start=INSTANT, role="decode", kv=fp)
    with pytest.raises(
        ServecapError,
        match=r"^request=0: 120 prompt \+ 20 output tokens need a decode context of 139 .*pool 'd' holds 128",
    ):
        simulate_fleet(FleetSpec((p, d)), _arrays([120], 20), 0)
    p = Pool("p", _setup(BLOCKS), replicas=1, cold_start=INSTANT, role="prefill", kv=fp)
    d = Pool("d", _setup(4096), replicas=1, cold_start=INSTANT, role="decode", kv=fp)
    with pytest.raises(ServecapError, match=r"need a prefill context of 200 tokens; .*pool 'p' holds 128"):
        simulate_fleet(FleetSpec((p, d)), _arrays([200]), 0)


def test_the_cache_replay_refuses_a_request_past_max_model_len_as_the_full_simulation(tmp_path: Path) -> None:
    """The cache-replay fidelity served a 10M-token prompt with max_model_len 4,096 (44,474 s of
    TTFT on Llama-3.1-8B); it is refused as too_long, counted and left out, as the full simulation
    does, and said in a note."""
    trace = tmp_path / "t.jsonl"
    rows = [{"timestamp": 0, "input_length": 100, "output_length": 5, "hash_ids": [0]}]
    rows.append({"timestamp": 10, "input_length": 10_000_000, "output_length": 5, "hash_ids": [1]})
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["fleet", "simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "-l", "4096", "--trace", str(trace)]
    res = CliRunner().invoke(cli, [*args, "--fidelity", "cache-replay", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert (out["requests"], out["too_long"], out["prefix_cache_query_tokens"]) == (1, 1, 100)
    assert any("1 requests longer than max_model_len 4,096 refused (too_long)" in n for n in out["notes"])
