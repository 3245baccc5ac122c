"""``--explain-step``: one decode step of a deployment as its operations, each with its time and
source, adding up to the step time the simulator uses for the same batch."""

from __future__ import annotations

from servecap.core.ops.operation import ROOFLINE, Operation, StepExplanation
from servecap.core.ops.step import OperationStep
from servecap.core.roofline import StepCost, decode_batch
from servecap.specs.deployment import Deployment
from servecap.specs.perf import Efficiency


def explain_decode_step(
    dep: Deployment,
    cost: StepCost,
    eff: Efficiency,
    *,
    batch: int,
    context_tokens: float,
    choice: str | None = None,
) -> StepExplanation:
    """``batch`` sequences each decoding one token over ``context_tokens`` of context.

    Under ``Efficiency.step_model == "operations"`` the step is the operations' sum; under the
    roofline it is ``StepCost.step_time`` and a ``roofline_overlap`` line carries the difference
    between it and the per-operation rooflines. ``eff``'s step model is a concrete one (a plan's
    ``efficiency`` has ``auto`` resolved); ``choice`` says why ``auto`` took it."""
    shape = decode_batch(batch, context_tokens, cost.window_tokens)
    if eff.step_model == "operations":
        ops_model = cost.ops if isinstance(cost.ops, OperationStep) else OperationStep(dep, cost)
        ops = ops_model.operations(shape, eff)
        total = ops_model.time(
            eff,
            shape.num_tokens,
            shape.num_seqs,
            shape.kv_tokens,
            shape.window_kv_tokens,
            shape.attn_pairs,
            shape.window_attn_pairs,
            shape.prompt_tokens,
        )
        return StepExplanation("operations", batch, float(context_tokens), tuple(ops), total, choice)
    ops = OperationStep(dep, cost).operations(shape, eff)  # roofline timers: eff is the roofline's
    total = cost.step_time(shape, eff).total_s
    gap = total - sum(o.time_s for o in ops)
    ops.append(Operation("roofline_overlap", "overlap", 1, gap, 0.0, 0.0, ROOFLINE, batch))
    return StepExplanation("roofline", batch, float(context_tokens), tuple(ops), total, choice)
