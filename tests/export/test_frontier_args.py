"""A plan's attention DP, wide EP and speculative decoding as vLLM and SGLang flags
(servecap.export.frontier_args), what does not map named."""

from __future__ import annotations

import json

from servecap.export.frontier_args import sglang_args, vllm_kwargs
from servecap.export.source import PoolExport
from servecap.export.vllm_args import cli_args, engine_kwargs

PLAN = {
    "model": "deepseek-ai/DeepSeek-V3",
    "gpu": "H200-SXM",
    "tp": 1,
    "pp": 1,
    "weights_dtype": "fp8",
    "kv_cache_dtype": "bf16",
    "max_model_len": 16384,
    "gpu_memory_utilization": 0.9,
    "max_num_seqs": 1024,
    "max_num_batched_tokens": 8192,
    "block_size": 64,
    "parallelism": {
        "dp": 16,
        "ep": 16,
        "nodes": 2,
        "gpus_per_node": 8,
        "redundant_experts": 32,
        "expert_skew": 0.5,
        "a2a_mode": "low_latency",
        "two_batch_overlap": True,
    },
    "speculative": {"method": "mtp", "num_speculative_tokens": 1, "acceptance": [0.875]},
}


def test_vllm_flags_for_wide_ep_and_mtp() -> None:
    warnings: list[str] = []
    pool = PoolExport(name="dep16", plan=PLAN)
    kw = vllm_kwargs(pool, warnings)
    assert kw["data_parallel_size"] == 16
    assert kw["enable_expert_parallel"] is True
    assert kw["data_parallel_size_local"] == 8
    assert kw["enable_eplb"] is True and json.loads(str(kw["eplb_config"])) == {"num_redundant_experts": 32}
    assert kw["all2all_backend"] == "deepep_low_latency"
    assert kw["enable_dbo"] is True
    assert json.loads(str(kw["speculative_config"])) == {"method": "mtp", "num_speculative_tokens": 1}
    args = cli_args(engine_kwargs(pool, []))
    assert args[args.index("--data-parallel-size") + 1] == "16"
    assert "--enable-expert-parallel" in args and "--enable-dbo" in args
    assert pool.gpus_per_replica == 16
    # what does not map is named: the nodes' ranks and addresses, the skew, the acceptance
    assert any("--data-parallel-start-rank" in w for w in warnings)
    assert any("expert_skew" in w for w in warnings)
    assert any("acceptance" in w and "measured" in w for w in warnings)


def test_sglang_flags_for_wide_ep_and_mtp() -> None:
    warnings: list[str] = []
    args = sglang_args(PoolExport(name="dep16", plan=PLAN), warnings)
    assert args[:2] == ["--tp", "16"]
    for flag in ("--enable-dp-attention", "--enable-eplb", "--enable-two-batch-overlap"):
        assert flag in args
    assert args[args.index("--dp") + 1] == "16"
    assert args[args.index("--ep-size") + 1] == "16"
    assert args[args.index("--nnodes") + 1] == "2"
    assert args[args.index("--ep-num-redundant-experts") + 1] == "32"
    assert args[args.index("--deepep-mode") + 1] == "low_latency"
    assert args[args.index("--speculative-algorithm") + 1] == "EAGLE"
    assert args[args.index("--speculative-num-draft-tokens") + 1] == "2"
    assert any("--node-rank" in w for w in warnings)


def test_a_plain_plan_adds_nothing() -> None:
    plain = {k: v for k, v in PLAN.items() if k not in ("parallelism", "speculative")}
    warnings: list[str] = []
    assert vllm_kwargs(PoolExport(name="p", plan=plain), warnings) == {}
    assert sglang_args(PoolExport(name="p", plan=plain), warnings) == ["--tp", "1"]
    assert warnings == []


def test_eagle_names_the_missing_head_path() -> None:
    plan = {**PLAN, "parallelism": {}, "speculative": {"method": "eagle3", "num_speculative_tokens": 3}}
    warnings: list[str] = []
    kw = vllm_kwargs(PoolExport(name="e", plan=plan), warnings)
    assert json.loads(str(kw["speculative_config"]))["method"] == "eagle3"
    assert any("EAGLE head" in w for w in warnings)
    sg = sglang_args(PoolExport(name="e", plan=plan), [])
    assert sg[sg.index("--speculative-algorithm") + 1] == "EAGLE3"
