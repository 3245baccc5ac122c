"""The capacity plan: memory, KV pool, speeds, users and cost of one deployment, in one value.

``plan()`` is a pure function of its inputs; every number it returns is computed by the cited
functions in this package (memory.py, blocks.py, roofline.py, capacity.py, cost.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from servecap.core.blocks import KvCapacity, KvLayout, kv_capacity, kv_layout, require_one_request
from servecap.core.capacity import (
    busy_users,
    compute_bound_batch,
    decode_step,
    kv_batch_limit,
    paged_mean_concurrency,
    slo_batch,
    steady_state,
    ttft_s,
)
from servecap.core.cost import CostBreakdown, cost_breakdown
from servecap.core.kv import kv_bytes_for_context, kv_bytes_per_token, sliding_bytes_per_token
from servecap.core.memory import (
    NON_TORCH_BYTES_PER_GPU,
    MemoryBudget,
    activation_peak_bytes,
    memory_budget,
    stage_layers,
    stage_weights,
)
from servecap.core.params import ParamCounts, param_counts
from servecap.core.roofline import StepCost, lone_request_cost, step_cost
from servecap.errors import InfeasibleError
from servecap.specs.deployment import Deployment
from servecap.specs.engines import engine_profile
from servecap.specs.gpu import gpu_family
from servecap.specs.perf import CostInputs, Efficiency, RequestShape, Slo
from servecap.specs.step_choice import StepChoice, choose_step_model, model_class_of


@dataclass(frozen=True, slots=True)
class Stage:
    weights_bytes_per_gpu: int
    budget: MemoryBudget
    kv: KvCapacity
    draft_bytes_per_gpu: int = 0  # a speculative draft's weights, within weights_bytes_per_gpu


@dataclass(frozen=True, slots=True)
class Plan:
    deployment: Deployment
    request: RequestShape
    slo: Slo
    efficiency: Efficiency
    costs_in: CostInputs
    params: ParamCounts
    stage: Stage  # the pipeline stage with the fewest KV blocks (vLLM takes the minimum)
    step: StepCost
    kv_bytes_per_token_per_gpu: int  # full + sliding + MLA layers: what one more token costs
    kv_bytes_per_request: int  # one request of max_model_len tokens, unpaged, on one GPU
    kv_batch_limit: int  # typical requests (P + O tokens) the pool holds at once
    paged_concurrency: float  # typical requests held on average (each at its current length)
    batch: int  # concurrent requests served within every limit
    batch_limited_by: str
    decode_step_time_s: float  # pure decode step at `batch`, mean context
    tpot_s: float  # steady-state step with chunked prefill at `batch`
    ttft_s: float  # prefill beside `batch` running decodes (no queueing)
    single_request_tpot_s: float
    single_request_ttft_s: float
    bottleneck: str
    compute_bound_batch: int | None
    users_served: int
    cost: CostBreakdown
    warnings: tuple[str, ...] = field(default=())

    @property
    def layout(self) -> KvLayout:
        return self.stage.kv.layout

    @property
    def num_gpu_blocks(self) -> int:
        return self.stage.kv.num_blocks

    @property
    def output_tokens_per_s_per_user(self) -> float:
        return 1.0 / self.tpot_s if self.tpot_s > 0 else 0.0

    @property
    def output_tokens_per_s_total(self) -> float:
        return self.batch / self.tpot_s if self.tpot_s > 0 else 0.0

    @property
    def feasible(self) -> bool:
        return self.batch > 0


def _stages(dep: Deployment) -> list[Stage]:
    model, par, eng = dep.model, dep.parallelism, dep.engine
    groups = stage_layers(model, par.pp)
    activation = eng.activation_bytes
    if activation is None:
        activation = activation_peak_bytes(
            model,
            tp=par.tp,
            max_num_batched_tokens=eng.max_num_batched_tokens,
            max_num_seqs=eng.max_num_seqs,
        )
    non_torch = eng.non_torch_bytes if eng.non_torch_bytes is not None else NON_TORCH_BYTES_PER_GPU
    draft_resident = draft_kv_share = 0.0
    if dep.speculative is not None:  # the draft's weights and KV sit beside the target's (last stage)
        from servecap.core.roofline import draft_cost_of

        d = draft_cost_of(dep)
        draft_resident = d.resident_bytes
        target_kv = kv_bytes_per_token(model, par.tp, dep.kv_dtype) + sliding_bytes_per_token(
            model, par.tp, dep.kv_dtype
        )
        draft_kv_share = d.kv_bytes_per_context_token / (target_kv + d.kv_bytes_per_context_token) if target_kv else 0.0
    stages = []
    for i, layers in enumerate(groups):
        w = stage_weights(
            model,
            layers,
            first=i == 0,
            last=i == len(groups) - 1,
            pp=par.pp,
            tp=par.tp,
            weights_dtype=dep.weights_dtype,
            dp=par.dp,
            redundant_experts=par.redundant_experts,
        )
        last = i == len(groups) - 1
        weights = w.weights_bytes_per_gpu + (int(draft_resident) if last else 0)
        budget = memory_budget(
            total_gpu_memory_bytes=dep.gpu.total_memory_bytes,
            gpu_memory_utilization=eng.gpu_memory_utilization,
            weights_bytes=weights,
            activation_bytes=activation,
            non_torch_bytes=non_torch,
            cudagraph_bytes=eng.cudagraph_bytes,
            kv_cache_memory_bytes=eng.kv_cache_memory_bytes,
            memory_base=engine_profile(eng.engine).memory_base,
        )
        layout = kv_layout(model, layers, tp=par.tp, kv_dtype=dep.kv_dtype, block_size=eng.block_size)
        cap = kv_capacity(
            layout,
            int(budget.kv_budget_bytes * (1.0 - draft_kv_share)) if last else budget.kv_budget_bytes,
            max_model_len=eng.max_model_len,
            max_num_batched_tokens=eng.max_num_batched_tokens,
        )
        stages.append(Stage(weights, budget, cap, weights - w.weights_bytes_per_gpu))
    return stages


def _infeasible_message(dep: Deployment, stage: Stage) -> InfeasibleError:
    b = stage.budget
    usable = b.requested_bytes
    where = f"{dep.num_gpus}x {dep.gpu.id}"
    levers = []
    if not dep.weights_dtype.quantized:
        levers.append("--weights-dtype fp8")
    levers.append(f"--tp {dep.parallelism.tp * 2}")
    if b.weights_bytes >= usable:
        return InfeasibleError(
            "weights_bytes_per_gpu",
            f"{b.weights_bytes / 1e9:.1f} GB",
            f"exceed the {usable / 1e9:.1f} GB usable per GPU on {where} "
            f"(gpu_memory_utilization {b.gpu_memory_utilization:g}) by "
            f"{(b.weights_bytes - usable) / 1e9:.1f} GB; try " + " or ".join(levers),
        )
    return InfeasibleError(
        "kv_budget_bytes",
        f"{b.kv_budget_bytes / 1e9:.2f} GB",
        f"after weights {b.weights_bytes / 1e9:.1f} GB, activations {b.activation_bytes / 1e9:.1f} GB "
        f"and runtime {b.non_torch_bytes / 1e9:.2f} GB, {where} has no room for the KV cache; try "
        + " or ".join([*levers, "--max-num-batched-tokens 2048"]),
    )


def _fitting_len(kv: KvCapacity, max_num_batched_tokens: int) -> int:
    """The longest context (a multiple of the block size) one request of which fits the pool."""
    layout = kv.layout
    lo, hi = 0, kv.num_blocks * layout.block_size + layout.block_size
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if layout.blocks_per_request(mid, max_num_batched_tokens) <= kv.num_blocks:
            lo = mid
        else:
            hi = mid
    return lo // layout.block_size * layout.block_size


def _kv_short_message(dep: Deployment, stage: Stage, err: InfeasibleError) -> InfeasibleError:
    """One max-length request does not fit the KV pool: the same error, with the levers that fix it."""
    levers = []
    fit = _fitting_len(stage.kv, dep.engine.max_num_batched_tokens)
    if fit > 0:
        levers.append(f"--max-model-len {fit}")
    if dep.kv_dtype.bytes_per_element > 1:
        levers.append("--kv-cache-dtype fp8")
    if not dep.weights_dtype.quantized:
        levers.append("--weights-dtype fp8")
    levers.append(f"--tp {dep.parallelism.tp * 2}")
    if stage.budget.gpu_memory_utilization < 0.95 and not stage.budget.kv_budget_overridden:
        levers.append("--gpu-memory-utilization 0.95")
    return InfeasibleError(err.field, err.value, f"{err.problem}; try " + " or ".join(levers))


@dataclass(frozen=True, slots=True)
class DeploymentPieces:
    """What a plan takes from the deployment alone (no request, SLO, efficiency or cost): the
    binding stage's memory and KV pool, its step-cost coefficients and the KV bytes per token."""

    stage: Stage
    step: StepCost
    params: ParamCounts
    kv_bytes_per_token_per_gpu: int
    kv_bytes_per_request: int


@lru_cache(maxsize=1024)
def _deployment_pieces(dep: Deployment) -> DeploymentPieces:
    """The request-independent part of :func:`plan`, memoised on the (frozen, hashable)
    deployment: a plan's levers and a server's distinct requests for one deployment reuse it.
    Raises InfeasibleError (not cached) when the deployment cannot start."""
    eng, tp = dep.engine, dep.parallelism.tp
    stage = min(_stages(dep), key=lambda s: s.kv.max_concurrency)
    if stage.budget.kv_budget_bytes <= 0:
        raise _infeasible_message(dep, stage)
    try:
        require_one_request(stage.kv, eng.max_model_len)
    except InfeasibleError as err:
        raise _kv_short_message(dep, stage, err) from None
    return DeploymentPieces(
        stage=stage,
        step=step_cost(dep, stage_weights_bytes=stage.weights_bytes_per_gpu - stage.draft_bytes_per_gpu),
        params=param_counts(dep.model),
        kv_bytes_per_token_per_gpu=kv_bytes_per_token(dep.model, tp, dep.kv_dtype)
        + sliding_bytes_per_token(dep.model, tp, dep.kv_dtype),
        kv_bytes_per_request=kv_bytes_for_context(dep.model, tp, dep.kv_dtype, eng.max_model_len),
    )


def auto_step_model(dep: Deployment, total_params: float | None = None) -> StepChoice:
    """The step model ``Efficiency.step_model = "auto"`` runs for ``dep`` (specs.step_choice:
    by its model class, GPU vendor, engine and GPU chip, on the training rows' evidence)."""
    total = param_counts(dep.model).total if total_params is None else total_params
    return choose_step_model(
        model_class_of(dep.model.moe is not None, total), dep.gpu.vendor, dep.engine.engine, gpu_family(dep.gpu.id)
    )


def plan(
    dep: Deployment,
    *,
    request: RequestShape | None = None,
    slo: Slo | None = None,
    efficiency: Efficiency | None = None,
    costs: CostInputs | None = None,
) -> Plan:
    """Plan one deployment. Raises InfeasibleError (saying which number failed) when it cannot
    start: weights over the usable memory, no KV budget, or one max-length request not fitting."""
    request = request or RequestShape()
    slo = slo or Slo()
    eff = efficiency or Efficiency()
    costs = costs or CostInputs()
    eng = dep.engine
    pieces = _deployment_pieces(dep)
    stage, cost = pieces.stage, pieces.step
    if eff.step_model == "auto":  # the class's choice by the training rows' evidence (specs.step_choice)
        eff = replace(eff, step_model=auto_step_model(dep, pieces.params.total).model)
    if eff.step_model == "operations" and cost.ops is None:
        from servecap.core.ops import OperationStep  # local: the default roofline never loads it

        cost.ops = OperationStep(dep, cost, ep=dep.parallelism.ep)  # once per deployment: the pieces are memoised
    if request.total_tokens > eng.max_model_len:
        raise InfeasibleError(
            "prompt_tokens",
            request.prompt_tokens,
            f"with {request.output_tokens:,} output tokens the request needs {request.total_tokens:,} tokens, "
            f"beyond max_model_len {eng.max_model_len:,}: vLLM refuses it; shorten the request or raise "
            "--max-model-len",
        )

    warnings: list[str] = []
    tp = dep.parallelism.tp
    trained = dep.model.max_position_embeddings
    if eng.rope_scaling is not None and 0 < trained < eng.max_model_len:
        warnings.append(
            f"max_model_len {eng.max_model_len:,} is beyond the {trained:,} tokens the model was trained on: "
            f"RoPE scaling ({eng.rope_scaling.rope_type}, factor {eng.rope_scaling.factor:g}) stretches it; "
            "long-range quality is not guaranteed and static YaRN can lower quality on short prompts"
        )
    # attention data parallelism: dp ranks, each with its own KV pool and limits; the replica's
    # batch is their sum and the step prices it rank by rank (core/roofline.py StepCost.dp)
    dp = dep.parallelism.dp
    kv_limit = kv_batch_limit(stage.kv.layout, stage.kv.num_blocks, request) * dp
    chosen = slo_batch(
        cost,
        request,
        eff,
        slo,
        kv_limit=kv_limit,
        max_num_seqs=eng.max_num_seqs * dp,
        max_num_batched_tokens=eng.max_num_batched_tokens * dp,
    )
    batch = chosen.batch
    if batch == 0:
        warnings.append(f"no batch size meets the SLOs ({chosen.limited_by})")
    b = max(batch, 1)
    steady = steady_state(cost, b, request, eff, eng.max_num_batched_tokens * dp)
    pure = decode_step(cost, b, request.mean_held_tokens, eff)
    ttft = ttft_s(cost, b, request, eff, eng.max_num_batched_tokens)
    single_tpot = decode_step(cost, 1, request.mean_held_tokens, eff).total_s / cost.spec_tokens_per_step
    single_ttft = ttft_s(lone_request_cost(cost), 0, request, eff, eng.max_num_batched_tokens)
    users, money = _users_and_money(dep, batch, steady.tpot_s, costs)
    if money.usd_per_hour is None:  # no rent given, none in the catalog
        warnings.append(f"no rent price for {dep.gpu.id} in the catalog: pass --price-per-hour")
    if dep.gpu.memory_gib_reported is None:
        warnings.append(
            f"total GPU memory taken as {dep.gpu.total_memory_basis}; the driver reports a little "
            "less (an A100-40GB reports 39.50 GiB)"
        )
    if not stage.budget.kv_budget_overridden:
        warnings.append(
            "activation and runtime memory are estimates; pass --kv-cache-memory-bytes "
            "with the 'Available KV cache memory' vLLM logs to match it exactly"
        )
    if tp > 1 and dep.model.attention is not None and dep.model.attention.num_kv_heads < tp:
        warnings.append(f"tp {tp} exceeds the {dep.model.attention.num_kv_heads} KV heads: KV heads are replicated")
    spec = dep.speculative
    if spec is not None and spec.acceptance_low is not None and spec.acceptance_high is not None:
        # the published acceptance spread carried to the TPOT (core/spec_decode.py)
        from servecap.core.spec_decode import expected_tokens_per_step

        ends = []
        for acc in (spec.acceptance_low, spec.acceptance_high):
            c = replace(cost, spec_tokens_per_step=expected_tokens_per_step(acc))
            ends.append(steady_state(c, b, request, eff, eng.max_num_batched_tokens * dp).tpot_s)
        warnings.append(
            f"speculative {spec.method}: TPOT {ends[1] * 1e3:.1f}-{ends[0] * 1e3:.1f} ms at batch {b} across the "
            f"published acceptance spread ({', '.join(f'{a:g}' for a in spec.acceptance_low)} to "
            f"{', '.join(f'{a:g}' for a in spec.acceptance_high)})"
        )
    warnings.extend(dep.model.notes)
    return Plan(
        deployment=dep,
        request=request,
        slo=slo,
        efficiency=eff,
        costs_in=costs,
        params=pieces.params,
        stage=stage,
        step=cost,
        kv_bytes_per_token_per_gpu=pieces.kv_bytes_per_token_per_gpu,
        kv_bytes_per_request=pieces.kv_bytes_per_request,
        kv_batch_limit=kv_limit,
        paged_concurrency=paged_mean_concurrency(stage.kv.layout, stage.kv.num_blocks, request) * dp,
        batch=batch,
        batch_limited_by=chosen.limited_by,
        decode_step_time_s=pure.total_s,
        tpot_s=steady.tpot_s,
        ttft_s=ttft,
        single_request_tpot_s=single_tpot,
        single_request_ttft_s=single_ttft,
        bottleneck=steady.bottleneck,
        compute_bound_batch=compute_bound_batch(cost, request.mean_held_tokens, eff),
        users_served=users,
        cost=money,
        warnings=tuple(warnings),
    )


def _users_and_money(dep: Deployment, batch: int, tpot_s: float, costs: CostInputs) -> tuple[int, CostBreakdown]:
    """The users a batch serves at ``costs.duty_cycle`` and what they cost (the plan's last step)."""
    users = busy_users(batch, costs.duty_cycle)  # the 99th percentile in flight fits the batch
    rent = costs.rent_usd_per_gpu_hour if costs.rent_usd_per_gpu_hour is not None else dep.gpu.rent_usd_per_hour
    buy = costs.purchase_usd_per_gpu if costs.purchase_usd_per_gpu is not None else dep.gpu.purchase_usd
    money = cost_breakdown(
        rent_usd_per_gpu_hour=rent,
        purchase_usd_per_gpu=buy,
        num_gpus=dep.num_gpus,
        users=users,
        output_tokens_per_s=batch / tpot_s if batch else 0.0,
        lifetime_years=costs.lifetime_years,
    )
    return users, money


def with_duty_cycle(p: Plan, duty_cycle: float) -> Plan:
    """``p`` at another duty cycle: the users and the cost are the only numbers it changes, so
    this is :func:`plan` with ``costs.duty_cycle`` replaced, without planning the batch again."""
    costs = replace(p.costs_in, duty_cycle=duty_cycle)
    users, money = _users_and_money(p.deployment, p.batch, p.tpot_s, costs)
    return replace(p, costs_in=costs, users_served=users, cost=money)


def with_engine(dep: Deployment, **changes: object) -> Deployment:
    """A copy of ``dep`` with some engine settings changed."""
    return replace(dep, engine=replace(dep.engine, **changes))  # type: ignore[arg-type]
