"""The plan as one JSON-able dict in SI units (bytes, seconds): the `--json` schema.

Keys are documented in docs/json-schema.md; a test keeps the two in step.
"""

from __future__ import annotations

from typing import Any

from servecap.core.plan import Plan

SCHEMA_VERSION = "servecap.plan/1"


def plan_to_dict(p: Plan) -> dict[str, Any]:
    out = _plan_dict(p)
    par, spec = p.deployment.parallelism, p.deployment.speculative
    if par.dp > 1 or par.ep > 1 or par.nodes > 1:  # the layout, where it is more than tp x pp
        out["parallelism"] = {
            "dp": par.dp,
            "ep": par.ep,
            "nodes": par.nodes,
            "gpus_per_node": par.gpus_per_node,
            "redundant_experts": par.redundant_experts,
            "expert_skew": par.expert_skew,
            "a2a_mode": par.a2a_mode,
            "two_batch_overlap": par.two_batch_overlap,
            "expert_load_factor": p.step.expert_load_factor,
        }
    if spec is not None:
        out["speculative"] = {
            "method": spec.method,
            "num_speculative_tokens": spec.num_speculative_tokens,
            "acceptance": list(spec.acceptance),
            "tokens_per_step": p.step.spec_tokens_per_step,
            "source": spec.source,
        }
    return out


def _plan_dict(p: Plan) -> dict[str, Any]:
    dep, eng, st = p.deployment, p.deployment.engine, p.stage
    return {
        "schema": SCHEMA_VERSION,
        "model": dep.model.id,
        "gpu": dep.gpu.id,
        "num_gpus": dep.num_gpus,
        "tp": dep.parallelism.tp,
        "pp": dep.parallelism.pp,
        "weights_dtype": dep.weights_dtype.name,
        "kv_cache_dtype": dep.kv_dtype.name,
        "max_model_len": eng.max_model_len,
        "engine": eng.engine,
        "gpu_memory_utilization": eng.gpu_memory_utilization,
        "max_num_seqs": eng.max_num_seqs,
        "max_num_batched_tokens": eng.max_num_batched_tokens,
        "prompt_tokens": p.request.prompt_tokens,
        "output_tokens": p.request.output_tokens,
        "duty_cycle": p.costs_in.duty_cycle,
        "params_total": p.params.total,
        "params_active": p.params.active,
        "total_gpu_memory_bytes": st.budget.total_gpu_memory_bytes,
        "requested_memory_bytes": st.budget.requested_bytes,
        "weights_bytes_per_gpu": st.weights_bytes_per_gpu,
        "activation_bytes_per_gpu": st.budget.activation_bytes,
        "non_torch_bytes_per_gpu": st.budget.non_torch_bytes,
        "kv_budget_bytes_per_gpu": st.budget.kv_budget_bytes,
        "kv_bytes_per_token_per_gpu": p.kv_bytes_per_token_per_gpu,
        "kv_bytes_per_request_per_gpu": p.kv_bytes_per_request,
        "block_size": p.layout.block_size,
        "kv_cache_groups": len(p.layout.groups),
        "num_gpu_blocks": st.kv.num_blocks,
        "kv_cache_tokens": st.kv.kv_cache_tokens,
        "kv_cache_tokens_at_max_len": st.kv.kv_cache_tokens_at_max_len,
        "max_concurrency": st.kv.max_concurrency,
        "kv_batch_limit": p.kv_batch_limit,
        "paged_concurrency": p.paged_concurrency,
        "batch_size": p.batch,
        "batch_limited_by": p.batch_limited_by,
        "decode_step_time_s": p.decode_step_time_s,
        "tpot_s": p.tpot_s,
        "ttft_s": p.ttft_s,
        "single_request_tpot_s": p.single_request_tpot_s,
        "single_request_ttft_s": p.single_request_ttft_s,
        "output_tokens_per_s_per_user": p.output_tokens_per_s_per_user,
        "output_tokens_per_s_total": p.output_tokens_per_s_total,
        "compute_bound_batch": p.compute_bound_batch,
        "bottleneck": p.bottleneck,
        "users_served": p.users_served,
        "usd_per_hour": p.cost.usd_per_hour,
        "usd_per_user_month": p.cost.usd_per_user_month,
        "usd_per_million_tokens": p.cost.usd_per_million_tokens,
        "usd_per_user_lifetime": p.cost.usd_per_user_lifetime,
        "warnings": list(p.warnings),
    }
