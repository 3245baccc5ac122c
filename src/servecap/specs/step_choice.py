"""Which step model answers a question nobody chose one for (``--step-model auto``, the default).

servecap has two step models (``specs.perf.Efficiency.step_model``): the roofline (one
``max(memory, compute)`` over the whole step with fitted efficiencies, ``core/roofline.py``) and
the step as the sum of its operations (measured kernel tables where they cover an operation,
``core/ops``). Neither is better everywhere, so ``auto`` picks one per class of deployment — the
model class (dense, MoE with at most 100B parameters, MoE above), the GPU's vendor and the engine
family (TensorRT-LLM or the others) — by the evidence of the corpus's **training** rows only
(``split_of = "train"``); the held-out rows are reported, never used to choose
(docs/validation.md, "The default step model"; ``benchmarks/step_model_choice.py`` recomputes
:data:`TRAINING_EVIDENCE` and the decisions from the corpus).

The rule, fixed before the held-out rows were looked at:

1. the evidence of a class is the median |log(predicted / measured)| of its training rows'
   throughput, TPOT/ITL, TTFT and E2E values, under each step model;
2. a class runs on the operations only on a clear win: at least ``MIN_VALUES`` (8, the rule the
   per-family fits use, ``validation.fit.MIN_FAMILY_VALUES``) training values, and the
   operations' median at most 3/4 of the roofline's and at least 2 points lower; everywhere else
   the roofline (the model the fitted defaults were fitted on) stays;
3. a deployment is judged by the most specific class that has training values:
   (class, vendor, engine family), then (class, vendor), then (vendor), then (class); a class
   with no training values at any level keeps the roofline;
4. above those, the GPU chip (``specs.gpu.gpu_family``: H100, H200, A100, ...) within
   (class, vendor, engine family) decides where it alone has at least ``MIN_VALUES`` training
   values (added when the dense vLLM class on NVIDIA was found to mix chips whose training
   evidence disagrees: H200 22.1% under the roofline against 8.8% under the operations, H100 8.0%
   against 9.5%); a chip with fewer values leaves the decision to the classes of rule 3.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_VALUES = 8
"""Training values a class needs before its evidence can move it off the roofline."""

TRAINING_EVIDENCE: dict[tuple[str, ...], tuple[int, float, float]] = {
    ("dense", "amd", "vllm", "MI300X"): (23, 0.307, 0.087),
    ("dense", "nvidia", "trtllm", "H100"): (14, 0.097, 0.131),
    ("dense", "nvidia", "vllm", "A100"): (24, 0.034, 0.032),
    ("dense", "nvidia", "vllm", "H100"): (50, 0.08, 0.096),
    ("dense", "nvidia", "vllm", "H200"): (40, 0.221, 0.059),
    ("dense", "nvidia", "vllm", "RTX-4090"): (17, 0.165, 0.16),
    ("moe<=100B", "nvidia", "vllm", "H200"): (30, 0.225, 0.43),
    ("moe>100B", "nvidia", "vllm", "H200"): (10, 0.575, 0.107),
    ("dense", "amd", "vllm"): (23, 0.307, 0.087),
    ("dense", "nvidia", "trtllm"): (23, 0.097, 0.112),
    ("dense", "nvidia", "vllm"): (131, 0.133, 0.066),
    ("moe<=100B", "nvidia", "vllm"): (30, 0.225, 0.43),
    ("moe>100B", "nvidia", "trtllm"): (1, 0.043, 0.456),
    ("moe>100B", "nvidia", "vllm"): (14, 0.556, 0.103),
    ("dense", "amd"): (23, 0.307, 0.087),
    ("dense", "nvidia"): (154, 0.118, 0.078),
    ("moe<=100B", "nvidia"): (30, 0.225, 0.43),
    ("moe>100B", "nvidia"): (15, 0.54, 0.103),
    ("amd",): (23, 0.307, 0.087),
    ("dense",): (177, 0.133, 0.081),
    ("moe<=100B",): (30, 0.225, 0.43),
    ("moe>100B",): (15, 0.54, 0.103),
    ("nvidia",): (199, 0.134, 0.099),
}
"""Class -> (training values, roofline's median |log error|, the operations' median |log error|),
over the throughput, TPOT/ITL, TTFT and E2E values of the corpus's training rows: the corpus of
2026-11-28 at 112 rows (the training half's 222 such values) with the shipped defaults, as
``validation.step_evidence.training_evidence`` computes it (rounded to three decimals).
``tests/validation/test_step_evidence.py`` (slow) recomputes it and fails when it no longer
matches the corpus and the defaults; ``benchmarks/step_model_choice.py`` prints the classes that
moved and the lines to paste here (docs/validation.md, "The default step model"). The classes are
(model class, GPU vendor, engine family, GPU chip) for the chips with at least ``MIN_VALUES``
training values, (model class, vendor, engine family), (model class, vendor), (vendor) and (model
class). Recorded before on the 104-row corpus with that day's defaults (vLLM's H200 step overhead
the global 2.07 ms), the broader classes read dense / NVIDIA / vLLM (111, 0.088, 0.102), dense /
NVIDIA (132, 0.092, 0.103), dense (155, 0.111, 0.101) and NVIDIA (177, 0.117, 0.112), all on the
roofline; recomputed, all four are clear wins of the operations."""


@dataclass(frozen=True, slots=True)
class StepChoice:
    """The step model ``auto`` chose, the class that decided and why (a sentence)."""

    model: str  # "roofline" or "operations"
    cell: tuple[str, ...]  # the class whose training evidence decided; () where none had any
    reason: str


def model_class_of(is_moe: bool, total_params: float) -> str:
    """``dense``, ``moe<=100B`` or ``moe>100B``: the classes ``servecap validate`` reports apart
    and ``auto`` chooses a step model for."""
    if not is_moe:
        return "dense"
    return "moe<=100B" if total_params <= 100e9 else "moe>100B"


def engine_family(engine: str) -> str:
    """``trtllm`` for the TensorRT-LLM profiles, else the profile's id (vllm, sglang, ...)."""
    return "trtllm" if engine.startswith("trtllm") else engine


def clear_win(values: int, roofline: float, operations: float) -> bool:
    """Rule 2: enough training values, and the operations' median at most 3/4 of the
    roofline's and at least 2 points lower."""
    return values >= MIN_VALUES and operations <= 0.75 * roofline and roofline - operations >= 0.02


def candidate_cells(model_class: str, vendor: str, engine: str, chip: str = "") -> tuple[tuple[str, ...], ...]:
    """The classes a deployment belongs to, most specific first (rules 3 and 4)."""
    vendor = vendor.lower()
    fam = engine_family(engine)
    broad = ((model_class, vendor, fam), (model_class, vendor), (vendor,), (model_class,))
    return (((model_class, vendor, fam, chip),) if chip else ()) + broad


def choose_step_model(model_class: str, vendor: str, engine: str, chip: str = "") -> StepChoice:
    """The step model for a deployment of ``model_class`` (:func:`model_class_of`) on a GPU of
    ``vendor`` served by ``engine`` (an engine profile id); ``chip`` is the GPU's chip
    (``specs.gpu.gpu_family``), "" where unknown (then rule 3 alone decides)."""
    fam = engine_family(engine)
    vendor = vendor.lower()
    for cell in candidate_cells(model_class, vendor, engine, chip):
        ev = TRAINING_EVIDENCE.get(cell)
        if ev is None or (len(cell) == 4 and ev[0] < MIN_VALUES):
            continue
        n, roof, ops = ev
        model = "operations" if clear_win(n, roof, ops) else "roofline"
        what = "/".join(cell)
        reason = (
            f"auto: {model} for {what} (training rows, {n} values: median |log error| roofline {roof:.1%}, "
            f"operations {ops:.1%}"
        )
        if model == "roofline" and n < MIN_VALUES:
            reason += f"; under {MIN_VALUES} values, the roofline stays"
        return StepChoice(model, cell, reason + ")")
    return StepChoice("roofline", (), f"auto: roofline (no training rows for {model_class}/{vendor}/{fam})")
