"""The rule behind `--step-model auto` (specs.step_choice), by hand from TRAINING_EVIDENCE."""

from __future__ import annotations

import pytest

from servecap.specs.step_choice import TRAINING_EVIDENCE, choose_step_model, clear_win, model_class_of


@pytest.mark.parametrize(
    ("cls", "vendor", "engine", "model", "cell", "chip"),
    [
        # DeepSeek-class MoE on NVIDIA under vLLM: 14 training values, roofline 55.6% -> 10.3%
        ("moe>100B", "NVIDIA", "vllm", "operations", ("moe>100B", "nvidia", "vllm"), ""),
        # Qwen3-235B under TensorRT-LLM: one training value (roofline 4.3%, operations 45.6%):
        # under 8 values nothing moves off the roofline
        ("moe>100B", "nvidia", "trtllm-max-utilization", "roofline", ("moe>100B", "nvidia", "trtllm"), ""),
        # SGLang has no training rows of its own: the class on NVIDIA decides (15 values)
        ("moe>100B", "nvidia", "sglang", "operations", ("moe>100B", "nvidia"), ""),
        # MI300X: 23 values, 30.7% -> 8.7%; an AMD MoE (no rows) takes the vendor's evidence
        ("dense", "amd", "vllm", "operations", ("dense", "amd", "vllm"), ""),
        ("moe<=100B", "amd", "vllm", "operations", ("amd",), ""),
        # dense models under vLLM on NVIDIA, no chip given: 131 training values, 13.3% -> 6.6%
        ("dense", "nvidia", "vllm", "operations", ("dense", "nvidia", "vllm"), ""),
        # SGLang has no dense rows: dense on NVIDIA decides (154 values, 11.8% -> 7.8%)
        ("dense", "nvidia", "sglang", "operations", ("dense", "nvidia"), ""),
        # dense under TensorRT-LLM and small MoE on NVIDIA: the roofline is at least as good in training
        ("dense", "nvidia", "trtllm", "roofline", ("dense", "nvidia", "trtllm"), ""),
        ("moe<=100B", "nvidia", "vllm", "roofline", ("moe<=100B", "nvidia", "vllm"), ""),
        # the chip level (8+ training values of one chip): the dense vLLM H200 rows favour the
        # operations (40 values, 22.1% -> 5.9%), H100's the roofline (50 values, 8.0% vs 9.6%)
        ("dense", "nvidia", "vllm", "operations", ("dense", "nvidia", "vllm", "H200"), "H200"),
        ("dense", "nvidia", "vllm", "roofline", ("dense", "nvidia", "vllm", "H100"), "H100"),
        # a chip without training values (B200) or with fewer than 8 (TensorRT-LLM on H200: 7)
        # leaves it to the broader classes
        ("dense", "nvidia", "vllm", "operations", ("dense", "nvidia", "vllm"), "B200"),
        ("dense", "nvidia", "trtllm", "roofline", ("dense", "nvidia", "trtllm"), "H200"),
        ("moe>100B", "nvidia", "vllm", "operations", ("moe>100B", "nvidia", "vllm"), "B200"),
        # a vendor the corpus has no row of: the model class decides
        ("dense", "intel", "vllm", "operations", ("dense",), ""),
        ("moe>100B", "intel", "vllm", "operations", ("moe>100B",), ""),
    ],
)
def test_the_most_specific_class_with_training_values_decides(
    cls: str, vendor: str, engine: str, model: str, cell: tuple[str, ...], chip: str
) -> None:
    choice = choose_step_model(cls, vendor, engine, chip)
    assert (choice.model, choice.cell) == (model, cell)
    assert choice.reason.startswith(f"auto: {model} for {'/'.join(cell)} (training rows, ")


def test_clear_win_rule() -> None:
    assert clear_win(8, 0.10, 0.075)  # 3/4 and 2.5 points: a win
    assert not clear_win(7, 0.50, 0.10)  # too few values
    assert not clear_win(100, 0.10, 0.0751)  # above 3/4
    assert not clear_win(100, 0.06, 0.041)  # 3/4, but under 2 points
    decided = {c: clear_win(*ev) for c, ev in TRAINING_EVIDENCE.items()}
    assert {c for c, win in decided.items() if win} == {
        ("dense", "amd", "vllm", "MI300X"),
        ("dense", "nvidia", "vllm", "H200"),
        ("moe>100B", "nvidia", "vllm", "H200"),
        ("dense", "amd", "vllm"),
        ("dense", "nvidia", "vllm"),
        ("dense", "amd"),
        ("dense", "nvidia"),
        ("amd",),
        ("nvidia",),
        ("dense",),
        ("moe>100B", "nvidia", "vllm"),
        ("moe>100B", "nvidia"),
        ("moe>100B",),
    }


def test_model_classes() -> None:
    assert model_class_of(False, 405e9) == "dense"
    assert model_class_of(True, 100e9) == "moe<=100B"
    assert model_class_of(True, 671e9) == "moe>100B"
