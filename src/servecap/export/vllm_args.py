"""A pool's plan as vLLM engine arguments: the keyword names of vLLM's ``EngineArgs`` (Ray Serve
LLM's ``engine_kwargs``) and the ``vllm serve`` flags they come from (``--max-model-len`` for
``max_model_len``; booleans as ``--flag`` / ``--no-flag``).

What the plan says and what vLLM is told:

=========================== ============================================================
plan                        vLLM
=========================== ============================================================
``model``                   ``--model`` (a Hugging Face id; a local path is kept, with a warning)
``tp`` / ``pp``             ``--tensor-parallel-size`` / ``--pipeline-parallel-size`` (when > 1)
``max_model_len``           ``--max-model-len``
``gpu_memory_utilization``  ``--gpu-memory-utilization``
``max_num_seqs``            ``--max-num-seqs``
``max_num_batched_tokens``  ``--max-num-batched-tokens``
``kv_cache_dtype``          ``--kv-cache-dtype``: 16-bit -> ``auto`` (the model's dtype, the same
                            bytes), ``fp8`` -> ``fp8``; ``fp32`` has no flag (warning)
``weights_dtype``           ``fp8`` -> ``--quantization fp8`` (vLLM's online FP8); 16-bit -> none;
                            ``int8``/``int4``/``nvfp4``/``mxfp4`` come from a pre-quantized
                            checkpoint, so no flag (warning)
``block_size``              ``--block-size`` when not vLLM's default 16
pool ``enable_prefix_caching`` ``--enable-prefix-caching`` / ``--no-enable-prefix-caching``
pool ``kv_cache_memory_bytes`` ``--kv-cache-memory-bytes``
``parallelism`` /           attention DP, expert parallelism, EPLB, all-to-all kernels, dual
``speculative``             batch overlap, ``--speculative-config``
                            (:mod:`servecap.export.frontier_args`)
=========================== ============================================================
"""

from __future__ import annotations

from servecap.export.source import PoolExport, plan_float, plan_int

EngineValue = str | int | float | bool
"""One vLLM ``EngineArgs`` keyword's value: every flag an export writes is a scalar."""
EngineKwargs = dict[str, EngineValue]
"""vLLM ``EngineArgs`` keywords, in the order their flags are written."""

VLLM_DEFAULT_BLOCK_SIZE = 16
_SIXTEEN_BIT = ("bf16", "fp16")


def engine_kwargs(pool: PoolExport, warnings: list[str]) -> EngineKwargs:
    """vLLM ``EngineArgs`` keywords for ``pool``; what cannot be said is appended to ``warnings``."""
    p = pool.plan
    model = str(p["model"])
    if model.endswith(".json") or model.startswith((".", "/")):
        warnings.append(
            f"{pool.name}: model {model!r} is a local config, not a Hugging Face id: "
            "replace it with the model's id or the path the server mounts"
        )
    kw: EngineKwargs = {"model": model, "tensor_parallel_size": plan_int(p, "tp")}
    if plan_int(p, "pp") > 1:
        kw["pipeline_parallel_size"] = plan_int(p, "pp")
    kw["max_model_len"] = plan_int(p, "max_model_len")
    kw["gpu_memory_utilization"] = plan_float(p, "gpu_memory_utilization")
    kw["max_num_seqs"] = plan_int(p, "max_num_seqs")
    kw["max_num_batched_tokens"] = plan_int(p, "max_num_batched_tokens")
    kv = str(p["kv_cache_dtype"])
    if kv in _SIXTEEN_BIT:
        kw["kv_cache_dtype"] = "auto"
    elif kv == "fp8":
        kw["kv_cache_dtype"] = "fp8"
    else:
        kw["kv_cache_dtype"] = "auto"
        warnings.append(f"{pool.name}: kv_cache_dtype {kv!r} has no vLLM --kv-cache-dtype value: 'auto' written")
    weights = str(p["weights_dtype"])
    if weights == "fp8":
        kw["quantization"] = "fp8"
    elif weights not in (*_SIXTEEN_BIT, "fp32"):
        warnings.append(
            f"{pool.name}: weights_dtype {weights!r} is read by vLLM from a pre-quantized checkpoint "
            "(no flag written): point the model at one"
        )
    if plan_int(p, "block_size") != VLLM_DEFAULT_BLOCK_SIZE:
        kw["block_size"] = plan_int(p, "block_size")
    kw["enable_prefix_caching"] = pool.enable_prefix_caching
    if pool.kv_cache_memory_bytes is not None:
        kw["kv_cache_memory_bytes"] = pool.kv_cache_memory_bytes
    if pool.max_waiting is not None:
        warnings.append(
            f"{pool.name}: max_waiting {pool.max_waiting} has no vLLM flag (vLLM's waiting queue is unbounded): "
            "not written; bound it at the gateway"
        )
    from servecap.export.frontier_args import vllm_kwargs  # the parallel layout, speculative decoding

    kw.update(vllm_kwargs(pool, warnings))
    from servecap.export.vllm_offload import vllm_offload_kwargs  # KV tiers: vLLM's native CPU offloading

    kw.update(vllm_offload_kwargs(pool, warnings))
    return kw


def cli_args(kwargs: EngineKwargs) -> list[str]:
    """``vllm serve`` flags for ``kwargs`` (``model`` first, as ``--model``)."""
    args: list[str] = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + key.replace("_", "-"))
        else:
            args.extend([flag, _text(value)])
    return args


def _text(value: EngineValue) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
