"""AIConfigurator's estimates for corpus rows: run by ``benchmarks/peer_accuracy.py`` with the
Python of a separate environment holding ``aiconfigurator==0.12.0`` (never servecap's): reads a
JSON list of rows on stdin, writes a JSON object ``row id -> {metric: value (SI)} or
{"skipped": reason}`` on stdout.

How a row becomes an AIConfigurator question (it has no queue and no request arrivals):

- ``closed`` (C users) -> ``run_agg`` at batch C, one prompt of context per step;
- ``static_batch`` (B at once) -> ``run_static`` at batch B;
- ``offline`` (everything queued) -> ``run_agg`` at the batch of highest throughput among powers of
  two up to the row's ``max_num_seqs`` whose memory fits the GPU (what AIConfigurator's own
  search does: the best throughput that fits);
- ``open`` (Poisson arrivals) -> skipped: there is no equivalent without a queue model.

Its TTFT is one number for every statistic (mean, median, p90, p99).
"""

from __future__ import annotations

import json
import logging
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
logging.disable(logging.WARNING)

from aiconfigurator_core.sdk import common, config, perf_database  # noqa: E402
from aiconfigurator_core.sdk.backends.factory import get_backend  # noqa: E402
from aiconfigurator_core.sdk.models import get_model  # noqa: E402

SYSTEMS = {"H100": "h100_sxm", "H200": "h200_sxm", "B200": "b200_sxm", "A100": "a100_sxm"}
GPU_MEMORY_GB = {"h100_sxm": 80.0, "h200_sxm": 141.0, "b200_sxm": 180.0, "a100_sxm": 80.0}
MODELS = {
    "meta-llama/Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.3-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.3-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",  # the same architecture
    "meta-llama/Llama-3.1-405B": "meta-llama/Meta-Llama-3.1-405B",
    "Qwen/Qwen3-1.7B": "Qwen/Qwen3-1.7B",
    "Qwen/Qwen3-8B": "Qwen/Qwen3-8B",
    "Qwen/Qwen3-30B-A3B": "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B": "Qwen/Qwen3-235B-A22B",
}
GEMM = {"fp8": "fp8", "nvfp4": "nvfp4", "bf16": "bfloat16", "fp16": "bfloat16", "auto": "bfloat16"}


def _version(system: str, backend: str) -> str | None:
    root = os.path.join(os.path.dirname(perf_database.__file__), "..", "systems", "data", system, "gemm", backend)
    try:
        return sorted(os.listdir(root))[-1]
    except FileNotFoundError:
        return None


def _row(r: dict) -> dict:
    system = SYSTEMS.get(r["gpu_family"])
    if system is None:
        return {"skipped": f"no AIConfigurator data for {r['gpu_family']}"}
    model_id = MODELS.get(r["model"])
    if model_id is None:
        return {"skipped": f"model {r['model']} not in AIConfigurator's configs"}
    backend = r["engine"] if r["engine"] in ("vllm", "sglang") else "trtllm"
    version = _version(system, backend)
    if version is None:
        return {"skipped": f"no {backend} data on {system}"}
    if r["mode"] == "open":
        return {"skipped": "Poisson arrivals: AIConfigurator has no queue"}
    gemm = getattr(common.GEMMQuantMode, GEMM.get(r["weights_dtype"], "bfloat16"))
    kv = common.KVCacheQuantMode.fp8 if r["kv_cache_dtype"] == "fp8" else common.KVCacheQuantMode.bfloat16
    kw: dict = {"tp_size": r["tp"], "gemm_quant_mode": gemm, "kvcache_quant_mode": kv}
    if r["moe"]:
        kw["moe_quant_mode"] = getattr(common.MoEQuantMode, GEMM.get(r["weights_dtype"], "bfloat16"))
        kw["moe_tp_size"] = r["tp"]
        kw["moe_ep_size"] = 1
    db = perf_database.get_database(system, backend, version)
    model = get_model(model_id, config.ModelConfig(**kw), backend)
    be = get_backend(backend)
    isl, osl = r["prompt_tokens"], r["output_tokens"]

    def agg(batch: int) -> dict:
        s = be.run_agg(model, db, config.RuntimeConfig(batch_size=batch, isl=isl, osl=osl), ctx_tokens=isl)
        return s.get_summary_df().iloc[0].to_dict()

    if r["mode"] == "static_batch":
        s = be.run_static(model, db, config.RuntimeConfig(batch_size=r["concurrency"], isl=isl, osl=osl), mode="static")
        out = s.get_summary_df().iloc[0].to_dict()
    elif r["mode"] == "closed":
        out = agg(r["concurrency"])
    else:
        best: dict | None = None
        b = 1
        while b <= r["max_num_seqs"]:
            cand = agg(b)
            if cand["memory"] > GPU_MEMORY_GB[system]:
                break
            if best is None or cand["tokens/s"] > best["tokens/s"]:
                best = cand
            b *= 2
        if best is None:
            return {"skipped": "out of memory at batch 1"}
        out = best
    gpus = r["tp"] * r["pp"]
    return {
        "output_throughput.total": float(out["tokens/s"]),
        "output_throughput_per_gpu.total": float(out["tokens/s"]) / gpus,
        "request_throughput.total": float(out["seq/s"]),
        "ttft": float(out["ttft"]) / 1e3,
        "tpot": float(out["tpot"]) / 1e3,
        "itl": float(out["tpot"]) / 1e3,
        "e2e": float(out["request_latency"]) / 1e3,
        "batch": float(out["bs"]),
        "source": f"{backend} {version} on {system}",
    }


def _samples(r: dict) -> dict:
    """AIConfigurator's time of single mixed steps (``run_mixed``) on a grid of prefill tokens and
    decoding requests, for ``benchmarks/peer_step_source.py``."""
    system = SYSTEMS.get(r["gpu_family"])
    model_id = MODELS.get(r["model"])
    if system is None or model_id is None:
        return {"skipped": "not covered"}
    from aiconfigurator_core.sdk.step_estimate import MixedStepInput

    backend = r["engine"] if r["engine"] in ("vllm", "sglang") else "trtllm"
    version = _version(system, backend)
    if version is None:
        return {"skipped": f"no {backend} data on {system}"}
    gemm = getattr(common.GEMMQuantMode, GEMM.get(r["weights_dtype"], "bfloat16"))
    kv = common.KVCacheQuantMode.fp8 if r["kv_cache_dtype"] == "fp8" else common.KVCacheQuantMode.bfloat16
    kw: dict = {"tp_size": r["tp"], "gemm_quant_mode": gemm, "kvcache_quant_mode": kv}
    if r["moe"]:
        kw["moe_quant_mode"] = getattr(common.MoEQuantMode, GEMM.get(r["weights_dtype"], "bfloat16"))
        kw["moe_tp_size"] = r["tp"]
        kw["moe_ep_size"] = 1
    db = perf_database.get_database(system, backend, version)
    model = get_model(model_id, config.ModelConfig(**kw), backend)
    be = get_backend(backend)
    rc = config.RuntimeConfig(isl=r["prompt_tokens"], osl=r["output_tokens"])
    out = []
    for ctx in sorted({1, min(r["prompt_tokens"], 8192), 2048, 8192}):
        for dec in (0, 1, 4, 16, 64, 256):
            if dec > r["max_num_seqs"]:
                continue
            est = be.run_mixed(model, db, rc, MixedStepInput(context_tokens=ctx, num_decode_requests=dec))
            out.append({"context_tokens": ctx, "num_decodes": dec, "latency_s": float(est.latency_ms) / 1e3})
    return {"samples": out, "source": f"{backend} {version} on {system}"}


def main() -> None:
    rows = json.load(sys.stdin)
    fn = _samples if "--samples" in sys.argv else _row
    result = {}
    for r in rows:
        try:
            result[r["id"]] = fn(r)
        except Exception as err:
            result[r["id"]] = {"skipped": f"{type(err).__name__}: {str(err)[:120]}"}
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
