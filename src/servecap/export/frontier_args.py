"""A plan's parallel layout and speculative decoding as vLLM and SGLang flags.

=============================== ======================================== ==========================================
plan                            vLLM (``vllm serve``)                    SGLang (``sglang.launch_server``)
=============================== ======================================== ==========================================
attention DP ``dp``             ``--data-parallel-size dp``              ``--dp dp --enable-dp-attention``
                                                                         (``--tp`` counts every GPU: ``tp x dp``)
``ep > 1``                      ``--enable-expert-parallel`` (EP is      ``--ep-size ep``
                                ``tp x dp``; another ``ep`` is named)
more than one node              ``--data-parallel-size-local`` (ranks    ``--nnodes N`` (``--node-rank`` and
                                a node), start rank and address per      ``--dist-init-addr`` per node: named)
                                node named
``redundant_experts``           ``--enable-eplb --eplb-config            ``--enable-eplb
                                {"num_redundant_experts": r}``           --ep-num-redundant-experts r``
``a2a_mode`` normal/low_latency ``--all2all-backend deepep_high_         ``--moe-a2a-backend deepep
                                throughput`` / ``deepep_low_latency``    --deepep-mode normal|low_latency|auto``
``two_batch_overlap``           ``--enable-dbo``                         ``--enable-two-batch-overlap``
speculative ``mtp``             ``--speculative-config {"method":        ``--speculative-algorithm EAGLE``
                                "mtp", "num_speculative_tokens": k}``    (SGLang's NextN/MTP path) ``--speculative-
                                                                         num-steps k --speculative-eagle-topk 1
                                                                         --speculative-num-draft-tokens k+1``
``eagle`` / ``eagle3``          ``{"method": "eagle3", "model": ...,     ``EAGLE`` / ``EAGLE3`` with
                                ...}`` (the head's path: named)          ``--speculative-draft-model-path`` (named)
``ngram``                       ``{"method": "ngram", ...}``             ``NGRAM``
``draft``                       ``{"method": "draft_model", "model":     ``STANDALONE`` with the draft's path
                                draft, ...}``
=============================== ======================================== ==========================================

Not flags (named in the warnings): the acceptance rates (measured, not set: ``monitor`` reads
them back from ``vllm:spec_decode_*``), the expert skew (the traffic's), the NIC.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from servecap.export.source import PoolExport, plan_int

EngineValue = str | int | float | bool


def parallelism_of(plan: Mapping[str, object]) -> Mapping[str, object]:
    """The plan's ``parallelism`` block (absent: tp x pp on one node)."""
    par = plan.get("parallelism")
    return par if isinstance(par, Mapping) else {}


def speculative_of(plan: Mapping[str, object]) -> Mapping[str, object] | None:
    spec = plan.get("speculative")
    return spec if isinstance(spec, Mapping) else None


def _int(block: Mapping[str, object], key: str, default: int) -> int:
    value = block.get(key, default)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def vllm_kwargs(pool: PoolExport, warnings: list[str]) -> dict[str, EngineValue]:
    """vLLM ``EngineArgs`` keywords for the pool's layout and speculative decoding."""
    p, name = pool.plan, pool.name
    par = parallelism_of(p)
    kw: dict[str, EngineValue] = {}
    tp = plan_int(p, "tp")
    dp, ep = _int(par, "dp", 1), _int(par, "ep", 1)
    nodes, per_node = _int(par, "nodes", 1), _int(par, "gpus_per_node", 8)
    if dp > 1:
        kw["data_parallel_size"] = dp
    if ep > 1:
        kw["enable_expert_parallel"] = True
        if ep != tp * dp:
            warnings.append(f"{name}: ep {ep}: vLLM's expert parallelism spans tp x dp = {tp * dp} GPUs (not {ep})")
    if nodes > 1:
        kw["data_parallel_size_local"] = max(1, per_node // max(1, tp))
        warnings.append(
            f"{name}: {nodes} nodes: start each node's server with its --data-parallel-start-rank, "
            "--data-parallel-address and --data-parallel-rpc-port (followers --headless): not written"
        )
    redundant = _int(par, "redundant_experts", 0)
    if redundant > 0:
        kw["enable_eplb"] = True
        kw["eplb_config"] = json.dumps({"num_redundant_experts": redundant}, separators=(",", ":"))
    mode = par.get("a2a_mode", "auto")
    if ep > 1 and mode in ("normal", "low_latency"):
        kw["all2all_backend"] = "deepep_high_throughput" if mode == "normal" else "deepep_low_latency"
    if par.get("two_batch_overlap") is True:
        kw["enable_dbo"] = True
    skew = par.get("expert_skew", 0.0)
    if isinstance(skew, int | float) and skew > 0:
        warnings.append(f"{name}: expert_skew {skew:g} describes the traffic: no flag")
    spec = speculative_of(p)
    if spec is not None:
        method, k = str(spec.get("method")), _int(spec, "num_speculative_tokens", 1)
        config: dict[str, object] = {"method": method, "num_speculative_tokens": k}
        if method in ("eagle", "eagle3"):
            config["model"] = "<draft head path>"
            warnings.append(f"{name}: speculative {method}: put the EAGLE head's path in --speculative-config model")
        elif method == "draft":
            config = {"method": "draft_model", "model": "<draft model path>", "num_speculative_tokens": k}
            warnings.append(f"{name}: speculative draft: put the draft model's path in --speculative-config model")
        kw["speculative_config"] = json.dumps(config, separators=(",", ":"))
        warnings.append(
            f"{name}: speculative acceptance {spec.get('acceptance')} is measured, not set: no flag "
            "(servecap monitor fits it from vllm:spec_decode_*)"
        )
    return kw


SGLANG_SPEC = {"mtp": "EAGLE", "eagle": "EAGLE", "eagle3": "EAGLE3", "ngram": "NGRAM", "draft": "STANDALONE"}


def sglang_args(pool: PoolExport, warnings: list[str]) -> list[str]:
    """``sglang.launch_server`` flags for the pool's parallel layout and speculative decoding
    (``--tp`` included: SGLang's counts every GPU of the DP-attention replica)."""
    p, name = pool.plan, pool.name
    par = parallelism_of(p)
    tp, pp = plan_int(p, "tp"), plan_int(p, "pp")
    dp, ep = _int(par, "dp", 1), _int(par, "ep", 1)
    nodes = _int(par, "nodes", 1)
    args = ["--tp", str(tp * dp)]
    if pp > 1:
        args += ["--pp-size", str(pp)]
    if dp > 1:
        args += ["--dp", str(dp), "--enable-dp-attention"]
        if tp > 1:
            warnings.append(f"{name}: SGLang's DP attention runs tp x dp = {tp * dp} attention ranks of 1 GPU each")
    if ep > 1:
        args += ["--ep-size", str(ep)]
    if nodes > 1:
        args += ["--nnodes", str(nodes)]
        warnings.append(f"{name}: {nodes} nodes: give each node --node-rank and --dist-init-addr: not written")
    redundant = _int(par, "redundant_experts", 0)
    if redundant > 0:
        args += ["--enable-eplb", "--ep-num-redundant-experts", str(redundant)]
    mode = par.get("a2a_mode", "auto")
    if ep > 1 and isinstance(mode, str):
        args += ["--moe-a2a-backend", "deepep", "--deepep-mode", mode]
    if par.get("two_batch_overlap") is True:
        args.append("--enable-two-batch-overlap")
    spec = speculative_of(p)
    if spec is not None:
        method, k = str(spec.get("method")), _int(spec, "num_speculative_tokens", 1)
        args += ["--speculative-algorithm", SGLANG_SPEC.get(method, method.upper())]
        if method != "ngram":
            args += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", "1"]
        args += ["--speculative-num-draft-tokens", str(k + 1)]
        if method in ("eagle", "eagle3", "draft"):
            args += ["--speculative-draft-model-path", "<draft path>"]
            warnings.append(f"{name}: speculative {method}: put the draft's path in --speculative-draft-model-path")
    return args
