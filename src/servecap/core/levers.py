"""What-if levers: how each change moves concurrency, speed and users, re-planned in full.

Each lever is the same deployment with one knob changed and planned again by :func:`plan`, so a
lever's numbers obey every rule the base plan does (a lever that cannot start says why). The
changed layout is first checked as the command line checks a user's (:func:`check_parallelism`):
TP 16 on eight-GPU nodes spans two nodes, which a GPU with no sourced NIC bandwidth cannot price,
so that lever is ruled out with the reason rather than planned.

KV offload to CPU memory (vLLM's CPU offloading / LMCache-style connectors): ``cpu_bytes`` of
host memory per GPU add ``cpu_bytes / kv_bytes_per_token`` tokens of cache for preempted or
prefix-cached requests; bringing one request's KV of ``L`` tokens back costs
``L x kv_bytes_per_token / host_link_bandwidth`` (PCIe Gen5 x16: 64 GB/s one way), added to that
request's TTFT.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from servecap.core.kv import resolve_kv_dtype
from servecap.core.memory import resolve_weight_dtype
from servecap.core.parallel import check_parallelism
from servecap.core.plan import Plan, plan, with_engine
from servecap.errors import ServecapError
from servecap.specs.deployment import Deployment, Parallelism
from servecap.units import GB_BYTES


@dataclass(frozen=True, slots=True)
class Lever:
    name: str
    change: str
    max_concurrency: float | None
    users_served: int | None
    tpot_s: float | None
    ttft_s: float | None
    usd_per_user_month: float | None
    note: str = ""


def _replan(base: Plan, dep: Deployment) -> Plan:
    return plan(dep, request=base.request, slo=base.slo, efficiency=base.efficiency, costs=base.costs_in)


def _row(name: str, change: str, base: Plan, dep: Deployment, note: str = "") -> Lever:
    try:
        check_parallelism(dep.parallelism, dep.model, dep.gpu)
        p = _replan(base, dep)
    except ServecapError as err:
        return Lever(name, change, None, None, None, None, None, f"cannot start: {err}")
    return Lever(
        name, change, p.stage.kv.max_concurrency, p.users_served, p.tpot_s, p.ttft_s, p.cost.usd_per_user_month, note
    )


def levers(base: Plan, *, cpu_offload_bytes: int = 256 * GB_BYTES) -> list[Lever]:
    dep = base.deployment
    rows: list[Lever] = []
    for name in ("fp8", "int4"):
        w = resolve_weight_dtype(name, dep.model)
        if w.name != dep.weights_dtype.name:
            rows.append(_row(f"{name.upper()} weights", f"--weights-dtype {name}", base, replace(dep, weights_dtype=w)))
    if dep.kv_dtype.bytes_per_element > 1:
        rows.append(
            _row(
                "FP8 KV cache", "--kv-cache-dtype fp8", base, replace(dep, kv_dtype=resolve_kv_dtype("fp8", dep.model))
            )
        )
    half = dep.engine.max_model_len // 2
    if half >= base.request.total_tokens:
        rows.append(_row("Half the context", f"--max-model-len {half}", base, with_engine(dep, max_model_len=half)))
    tp2 = dep.parallelism.tp * 2
    heads = dep.model.attention.num_heads if dep.model.attention else (dep.model.mla.num_heads if dep.model.mla else 0)
    if heads and heads % tp2 == 0 and tp2 <= 16:
        rows.append(
            _row(
                f"TP {tp2}",
                f"--tp {tp2}",
                base,
                replace(dep, parallelism=replace(dep.parallelism, tp=tp2)),
                note="twice the GPUs: compare cost per user",
            )
        )
    rows.extend(_frontier_rows(base))
    rows.append(_offload_row(base, cpu_offload_bytes))
    return rows


def _frontier_rows(base: Plan) -> list[Lever]:
    """Speculative decoding on (MTP where the model ships an MTP module, else EAGLE-3) and, for
    a MoE model, attention DP with wide expert parallelism across 2 and 4 nodes (each node's
    GPUs one DP rank apiece, EP over all of them: DeepSeek's and llm-d's layouts)."""
    from servecap.core.spec_decode import spec_config_from_flags

    dep = base.deployment
    rows: list[Lever] = []
    if dep.speculative is None:
        method = "mtp" if dep.model.mtp_layers > 0 else "eagle3"
        spec = spec_config_from_flags(dep.model, method, None, None, None)
        label = "MTP on" if method == "mtp" else "EAGLE-3 on"
        rows.append(
            _row(
                label,
                f"--speculative {method}",
                base,
                replace(dep, speculative=spec),
                note=f"{label}: {spec.source}; pays at small batch, costs compute at large",
            )
        )
    moe = dep.model.moe
    par = dep.parallelism
    if moe is None or dep.gpu.nic_gb_s is None:
        return rows
    for nodes in (2, 4):
        gpus = nodes * par.gpus_per_node
        if gpus <= par.num_gpus:
            continue
        wide = Parallelism(
            tp=1,
            pp=1,
            dp=gpus,
            ep=gpus,
            gpus_per_node=par.gpus_per_node,
            redundant_experts=par.redundant_experts,
            expert_skew=par.expert_skew,
            a2a_mode=par.a2a_mode,
            two_batch_overlap=par.two_batch_overlap,
        )
        try:
            check_parallelism(wide, dep.model, dep.gpu)
        except ServecapError:
            continue
        rows.append(
            _row(
                f"Wide EP over {nodes} nodes",
                f"--tp 1 --dp {gpus} --ep {gpus}",
                base,
                replace(dep, parallelism=wide),
                note=f"Wide EP over {nodes} nodes: {gpus} GPUs, attention DP {gpus} + EP {gpus}: compare cost per user",
            )
        )
    return rows


def _offload_row(base: Plan, cpu_bytes: int) -> Lever:
    per_token = base.kv_bytes_per_token_per_gpu
    link = base.deployment.gpu.host_link_gb_s
    if per_token <= 0 or link is None:
        return Lever(
            "KV offload to CPU",
            f"{cpu_bytes / 1e9:.0f} GB host memory per GPU",
            None,
            None,
            None,
            None,
            None,
            "no host-link bandwidth in the catalog for this GPU",
        )
    tokens = cpu_bytes // per_token
    reload_s = base.request.prompt_tokens * per_token / (link * GB_BYTES)
    extra = tokens / base.deployment.engine.max_model_len
    return Lever(
        "KV offload to CPU",
        f"{cpu_bytes / 1e9:.0f} GB host memory per GPU",
        base.stage.kv.max_concurrency + extra,
        base.users_served,
        base.tpot_s,
        base.ttft_s + reload_s,
        base.cost.usd_per_user_month,
        f"+{tokens:,} tokens of second-tier cache (prefix reuse, preempted requests); reloading a "
        f"{base.request.prompt_tokens}-token prefix costs {reload_s * 1e3:.1f} ms over {link:g} GB/s",
    )
