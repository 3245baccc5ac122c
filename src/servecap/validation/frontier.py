"""Published results of frontier deployments, reproduced by the planner's step model: a wide-EP
MoE deployment's per-node prefill and decode throughput, and speculative-decoding speedups.
Each row names its source, method, model, GPU and engine; docs/validation.md discusses the gaps.

- DeepSeek's "DeepSeek-V3/R1 Inference System Overview" (deepseek-ai/open-infra-index, 2025-03-01):
  H800 nodes; prefill "Routed Expert EP32, MLA/Shared Expert DP32", 4 nodes, 32 redundant
  routed experts; decode EP144 / DP144, 18 nodes, 32 redundant experts; dual micro-batch
  overlap in both; "each H800 node delivers an average throughput of 73.7k tokens/s input
  (including cache hits)" in prefill and "~14.8k tokens/s" output in decode, at an average
  output speed of 20-22 tokens/s per user; 56.3% of input tokens hit the on-disk KV cache.
- DeepSeek-V3 technical report (arXiv:2412.19437, 5.4.3): MTP's second-token acceptance
  85-90% gives "1.8 times TPS".
- vLLM issue #20780 (EAGLE-3 on Llama-3.1-8B-Instruct, batch 1, the H100 of the same author's
  PR #16937 runs): TPOT 7.07 ms without, 4.32 / 4.09 / 4.29 ms at k = 2 / 3 / 7 with mean
  acceptance lengths 2.36 / 2.79 / 3.54.
- SGLang PR #4247 and its docs (EAGLE-3, Llama-3.1-8B-Instruct, MT-Bench, one H100, batch 1):
  158.34 tokens/s without, 373.25 with (acceptance length 5.39 at 8 draft steps).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.core.roofline import BatchShape, StepCost, decode_batch, prefill_batch
from servecap.core.spec_decode import spec_config_from_flags
from servecap.specs.deployment import Deployment
from servecap.specs.perf import Efficiency, RequestShape

DEEPSEEK_PREFILL_NODE_INPUT_TOK_S = 73_700.0
DEEPSEEK_DECODE_NODE_OUTPUT_TOK_S = 14_800.0
DEEPSEEK_USER_TOK_S = 21.0  # "20-22 tokens per second"
DEEPSEEK_CACHE_HIT = 0.563
CONTEXT_TOKENS = 4096  # assumed: the overview gives no prompt length


@dataclass(frozen=True, slots=True)
class Reproduction:
    name: str
    source: str
    published: float
    predicted: float

    @property
    def ratio(self) -> float:
        return self.predicted / self.published


def _deepseek(dp: int, *, mtp: bool = False) -> Deployment:
    m = resolve_model("deepseek-ai/DeepSeek-V3")
    dep = build_deployment(
        m,
        lookup_gpu("H800"),
        tp=1,
        dp=dp,
        ep=dp,
        gpus_per_node=8,
        redundant_experts=32,
        weights_dtype="fp8",
        max_model_len=32768,
        two_batch_overlap=True,
    )
    if mtp:
        dep = replace(dep, speculative=spec_config_from_flags(m, "mtp", None, None, None))
    return dep


def _cost(dep: Deployment) -> StepCost:
    return plan(dep, request=RequestShape(1024, 128)).step


def deepseek_decode_node_tok_s(*, mtp: bool = True, context_tokens: int = CONTEXT_TOKENS) -> float:
    """Output tokens/s per node of the EP144/DP144 decode unit at the largest batch per rank
    whose TPOT stays within 1 / 21 s (the service's 20-22 tokens/s per user)."""
    cost = _cost(_deepseek(144, mtp=mtp))
    eff = Efficiency()
    best = 0.0
    for b in range(1, 1025):
        tpot = cost.step_time(decode_batch(144 * b, context_tokens, None), eff).total_s / cost.spec_tokens_per_step
        if tpot > 1.0 / DEEPSEEK_USER_TOK_S:
            break
        best = 8 * b / tpot
    return best


def deepseek_prefill_node_tok_s(*, prompt_tokens: int = CONTEXT_TOKENS) -> float:
    """Input tokens/s per node of the EP32/DP32 prefill unit, cache hits included: each rank
    computes the uncached 43.7% of a prompt after its cached 56.3% (attention over both)."""
    cost = _cost(_deepseek(32))
    new = round(prompt_tokens * (1.0 - DEEPSEEK_CACHE_HIT))
    one = prefill_batch(new, None, start_tokens=prompt_tokens - new)
    n = 32
    step = BatchShape(
        one.num_tokens * n,
        n,
        one.kv_tokens * n,
        one.window_kv_tokens * n,
        one.attn_pairs * n,
        one.window_attn_pairs * n,
        one.prompt_tokens * n,
    )
    return 8 * prompt_tokens / cost.step_time(step, Efficiency()).total_s


def mtp_speedup(per_rank_batch: int = 1) -> float:
    """DeepSeek-V3 MTP (k = 1, acceptance 0.875) on the EP144 decode unit: TPOT without / with."""
    eff = Efficiency()
    shape = decode_batch(144 * per_rank_batch, CONTEXT_TOKENS, None)
    plain, mtp = _cost(_deepseek(144)), _cost(_deepseek(144, mtp=True))
    return plain.step_time(shape, eff).total_s / (mtp.step_time(shape, eff).total_s / mtp.spec_tokens_per_step)


def eagle3_speedup(k: int, mean_length: float, engine: str = "vllm") -> float:
    """Llama-3.1-8B on one H100, batch 1: single-request TPOT without / with EAGLE-3."""
    m = resolve_model("meta-llama/Llama-3.1-8B")
    dep = build_deployment(m, lookup_gpu("H100"), max_model_len=4096, engine=engine)
    req = RequestShape(128, 256)
    spec = spec_config_from_flags(m, "eagle3", k, f"al={mean_length}", None)
    return (
        plan(dep, request=req).single_request_tpot_s
        / plan(replace(dep, speculative=spec), request=req).single_request_tpot_s
    )


def reproductions() -> list[Reproduction]:
    ds = "DeepSeek-V3/R1 Inference System Overview (H800)"
    return [
        Reproduction(
            "DeepSeek-V3 prefill, input tok/s per node (EP32/DP32)", ds, 73_700.0, deepseek_prefill_node_tok_s()
        ),
        Reproduction(
            "DeepSeek-V3 decode, output tok/s per node (EP144/DP144, MTP)", ds, 14_800.0, deepseek_decode_node_tok_s()
        ),
        Reproduction("DeepSeek-V3 MTP speedup (k=1), H800", "DeepSeek-V3 report 5.4.3", 1.8, mtp_speedup()),
        Reproduction(
            "EAGLE-3 k=2, Llama-3.1-8B, H100, vLLM, batch 1", "vLLM #20780", 7.07 / 4.32, eagle3_speedup(2, 2.36)
        ),
        Reproduction(
            "EAGLE-3 k=3, Llama-3.1-8B, H100, vLLM, batch 1", "vLLM #20780", 7.07 / 4.09, eagle3_speedup(3, 2.79)
        ),
        Reproduction(
            "EAGLE-3 k=7, Llama-3.1-8B, H100, vLLM, batch 1", "vLLM #20780", 7.07 / 4.29, eagle3_speedup(7, 3.54)
        ),
        Reproduction(
            "EAGLE-3 8 steps, Llama-3.1-8B, H100, SGLang, batch 1",
            "SGLang PR #4247 / docs",
            373.25 / 158.34,
            eagle3_speedup(8, 5.39, "sglang"),
        ),
    ]


if __name__ == "__main__":  # pragma: no cover
    for r in reproductions():
        print(
            f"{r.name:62s} published {r.published:>9.2f}  servecap {r.predicted:>9.2f}  ratio {r.ratio:.2f}  ({r.source})"
        )
