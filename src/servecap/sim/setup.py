"""What one engine replica is: its KV pool, scheduler limits and step-time model, from a Plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from servecap.core.blocks import KvLayout
from servecap.core.kv_tiers import KvTier
from servecap.core.plan import Plan
from servecap.core.roofline import StepCost
from servecap.errors import ServecapError
from servecap.sim.kv_tiers import TierSetup
from servecap.specs.model import AttentionKind
from servecap.specs.perf import Efficiency

SchedulingPolicy = Literal["fcfs", "priority"]
POLICIES: tuple[SchedulingPolicy, ...] = ("fcfs", "priority")
KV_LOADS = ("layerwise", "blocking", "async")
KV_STORES = ("on-evict", "on-compute")


def offload_modes(engine: str, kv_load: str = "auto", kv_store: str = "auto") -> tuple[str, str]:
    """How the KV tiers are loaded and fed, ``auto`` taking the engine's own way:

    - vLLM (its native ``OffloadingConnector``, ``--kv-offloading-size``): ``async`` loads (the
      request waits outside the batch for its blocks: ``WAITING_FOR_REMOTE_KVS``) and
      ``on-compute`` stores (every computed block copied to CPU DRAM: ``_get_reqs_to_store``);
      :mod:`servecap.sim.kv_tiers`.
    - the other engines: ``layerwise`` loads taken by the admitting step (LMCache's
      ``use_layerwise``) and ``on-evict`` stores (the tier holds the GPU's eviction victims),
      servecap's first model, kept under those names for every engine.
    """
    if kv_load not in (*KV_LOADS, "auto"):
        raise ServecapError("kv_load", kv_load, f"one of auto, {', '.join(KV_LOADS)}")
    if kv_store not in (*KV_STORES, "auto"):
        raise ServecapError("kv_store", kv_store, f"one of auto, {', '.join(KV_STORES)}")
    vllm = engine == "vllm"
    load = kv_load if kv_load != "auto" else ("async" if vllm else "layerwise")
    store = kv_store if kv_store != "auto" else ("on-compute" if vllm else "on-evict")
    if load == "async" and not vllm:
        raise ServecapError("kv_load", load, f"asynchronous loads are vLLM's offloading connector's (engine {engine})")
    return load, store


@dataclass(frozen=True, slots=True)
class EngineSetup:
    """One replica: KV layout and pool size (from the planner), vLLM scheduler settings, and
    the step-time model's inputs (``step`` from the planner, ``efficiency`` from the planner's
    defaults or a calibration file)."""

    layout: KvLayout
    num_gpu_blocks: int
    step: StepCost
    efficiency: Efficiency
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enable_prefix_caching: bool = True
    waiting_queue_limit: int | None = None
    scheduling_policy: SchedulingPolicy = "fcfs"
    notes: tuple[str, ...] = ()
    engine: str = "vllm"  # the engine profile whose admission rule the scheduler follows
    spec_acceptance: tuple[float, ...] = ()  # speculative decoding: per-position acceptance (core/spec_decode.py)
    kv_tiers: TierSetup | None = None  # KV tiers below GPU memory (sim/kv_tiers.py); None: GPU only

    @property
    def block_size(self) -> int:
        return self.layout.block_size


def prefix_caching_supported(layout: KvLayout) -> bool:
    """Prefix caching is modelled for layouts whose every KV-cache group is full attention or
    MLA (a block per ``block_size`` tokens in each group); sliding-window and state groups cache
    differently in vLLM's hybrid allocator and are simulated without it."""
    return all(g.kind in (AttentionKind.FULL, AttentionKind.MLA) for g in layout.groups)


def kv_fit_tokens(setup: EngineSetup) -> int:
    """The longest context (tokens) whose blocks the whole KV pool holds: ``num_gpu_blocks //
    groups x block_size`` where every group is full attention or MLA (vLLM's "GPU KV cache size",
    :meth:`KvLayout.kv_cache_tokens`), else the longest ``t`` with ``blocks_held(t) <=
    num_gpu_blocks`` (a bisection: the count grows with ``t``), ``max_model_len`` when that fits.
    A request whose context is longer can never run; vLLM refuses at startup a ``max_model_len``
    past it (``check_enough_kv_cache_memory`` in ``vllm/v1/core/kv_cache_utils.py``; its
    ``estimate_max_model_len`` bisects for the longest length that fits, as this does)."""
    layout, total = setup.layout, setup.num_gpu_blocks
    if prefix_caching_supported(layout):
        return layout.kv_cache_tokens(total)
    if layout.blocks_held(setup.max_model_len) <= total:
        return setup.max_model_len
    lo, hi = 0, setup.max_model_len  # blocks_held(lo) fits, blocks_held(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if layout.blocks_held(mid) <= total:
            lo = mid
        else:
            hi = mid
    return lo


def engine_setup_from_plan(
    plan: Plan,
    *,
    enable_prefix_caching: bool = True,
    waiting_queue_limit: int | None = None,
    scheduling_policy: str = "fcfs",
    efficiency: Efficiency | None = None,
    kv_tiers: tuple[KvTier, ...] = (),
    kv_layerwise: bool = True,
    kv_load: str | None = None,
    kv_store: str = "on-evict",
) -> EngineSetup:
    """The engine of ``plan``'s deployment. ``efficiency`` defaults to the plan's (which is a
    calibration file's when the plan was made with one). ``kv_tiers``: tiers below GPU memory
    (cpu, ssd, remote; :mod:`servecap.sim.kv_tiers`), each capacity for the whole replica;
    ``kv_layerwise``: loads overlap the compute layer by layer (LMCache ``use_layerwise``);
    ``kv_load`` (``layerwise``, ``blocking``, ``async``, ``auto``; given, it replaces
    ``kv_layerwise``) and ``kv_store`` (``on-evict``, ``on-compute``, ``auto``): how the tiers
    are loaded and fed (:func:`offload_modes`)."""
    eng = plan.deployment.engine
    if waiting_queue_limit is not None and waiting_queue_limit < 0:
        raise ServecapError("waiting_queue_limit", waiting_queue_limit, "must be >= 0")
    if scheduling_policy not in POLICIES:
        raise ServecapError("scheduling_policy", scheduling_policy, f"must be one of {', '.join(POLICIES)}")
    if eng.max_num_batched_tokens < eng.max_num_seqs:
        # vLLM's SchedulerConfig refuses this too: every running request must fit one step
        raise ServecapError(
            "max_num_batched_tokens",
            eng.max_num_batched_tokens,
            f"must be >= max_num_seqs ({eng.max_num_seqs})",
        )
    if plan.num_gpu_blocks <= 0:
        raise ServecapError("num_gpu_blocks", plan.num_gpu_blocks, "the KV pool is empty")
    notes: list[str] = []
    caching = enable_prefix_caching
    if caching and not prefix_caching_supported(plan.layout):
        caching = False
        notes.append("prefix caching not simulated for sliding-window/hybrid KV layouts")
    tiers: TierSetup | None = None
    if kv_tiers:
        if not caching:
            raise ServecapError(
                "kv_tiers", [t.name for t in kv_tiers], "KV tiers hold prefix-cache blocks: they need prefix caching"
            )
        par = plan.deployment.parallelism
        load, store = offload_modes(
            eng.engine, kv_load if kv_load is not None else ("layerwise" if kv_layerwise else "blocking"), kv_store
        )
        tiers = TierSetup(
            tuple(kv_tiers),
            key_bytes_per_gpu=len(plan.layout.groups) * plan.layout.bytes_per_block,
            gpus=par.num_gpus,
            num_layers=max(1, plan.deployment.model.num_layers // par.pp),
            layerwise=load == "layerwise",
            async_load=load == "async",
            store_on_compute=store == "on-compute",
        )
        how = {
            "layerwise": "loads overlap the compute layer by layer",
            "blocking": "load, then compute",
            "async": "loads asynchronous: a request waits outside the batch for its blocks",
        }[load]
        notes.append(
            "KV tiers: "
            + ", ".join(f"{t.name} {t.capacity_bytes / 2**30:,.0f} GiB" for t in kv_tiers)
            + (f" ({how}; every computed block stored)" if store == "on-compute" else f" ({how})")
        )
    policy: SchedulingPolicy = "priority" if scheduling_policy == "priority" else "fcfs"
    # attention data parallelism: the dp ranks' pools and limits, scheduled as one balanced pool
    # (the step prices a rank's share: core/roofline.py StepCost.dp)
    dp = plan.deployment.parallelism.dp
    if dp > 1:
        notes.append(
            f"attention DP {dp}: the ranks' KV pools and batch limits pooled, each step spread evenly over the "
            "ranks (a balanced pool)"
        )
    return EngineSetup(
        layout=plan.layout,
        num_gpu_blocks=plan.num_gpu_blocks * dp,
        step=plan.step,
        efficiency=_concrete(efficiency, plan),
        max_num_seqs=eng.max_num_seqs * dp,
        max_num_batched_tokens=eng.max_num_batched_tokens * dp,
        max_model_len=eng.max_model_len,
        enable_prefix_caching=caching,
        waiting_queue_limit=waiting_queue_limit,
        scheduling_policy=policy,
        notes=tuple(notes),
        engine=eng.engine,
        spec_acceptance=spec.acceptance if (spec := plan.deployment.speculative) is not None else (),
        kv_tiers=tiers,
    )


def _concrete(efficiency: Efficiency | None, plan: Plan) -> Efficiency:
    """``efficiency`` (else the plan's), its ``auto`` step model the one the plan chose for its
    deployment (``core.plan`` resolves it; specs.step_choice)."""
    if efficiency is None:
        return plan.efficiency
    if efficiency.step_model == "auto":
        from dataclasses import replace

        return replace(efficiency, step_model=plan.efficiency.step_model)
    return efficiency
