"""`--step-model auto`'s recorded training evidence (specs.step_choice.TRAINING_EVIDENCE) against the
corpus: recomputed by validation.step_evidence, by hand on a small case, and in full (slow)."""

from __future__ import annotations

import math

import pytest

from servecap.specs.step_choice import TRAINING_EVIDENCE
from servecap.validation.evaluate import Comparison
from servecap.validation.step_evidence import evidence_from, training_evidence


def _value(chip: str, measured: float, predicted: float, *, model_class: str = "dense") -> Comparison:
    return Comparison(
        full_id=f"src/{chip}-{measured}",
        source="src",
        gpu=chip,
        gpu_family=chip,
        split="train",
        metric="tpot.median",
        family="tpot",
        measured=measured,
        predicted=predicted,
        where="",
        engine="vllm",
        vendor="NVIDIA",
        model_class=model_class,
    )


def test_evidence_by_hand() -> None:
    # nine H200 values (a chip class: 9 >= 8) and one A100 value (too few for its chip)
    h200 = [_value("H200", 1.0, 1.0 + 0.01 * i) for i in range(9)]
    a100 = [_value("A100", 1.0, 2.0)]
    roof = h200 + a100
    ops = [_value(c.gpu_family, c.measured, c.measured * 1.05) for c in roof]
    ev = evidence_from(roof, ops)
    # H200: |log| of 1.00 ... 1.08, median log(1.04); operations log(1.05) everywhere
    assert ev[("dense", "nvidia", "vllm", "H200")] == (9, round(math.log(1.04), 3), round(math.log(1.05), 3))
    assert ("dense", "nvidia", "vllm", "A100") not in ev  # one value: its chip does not decide
    # the class holds all ten: median of log(1.00 ... 1.08) and log(2): log(1.045)
    assert ev[("dense", "nvidia", "vllm")][0] == 10
    assert ev[("dense", "nvidia", "vllm")][1] == round((math.log(1.04) + math.log(1.05)) / 2, 3)
    assert set(ev) == {
        ("dense", "nvidia", "vllm", "H200"),
        ("dense", "nvidia", "vllm"),
        ("dense", "nvidia"),
        ("nvidia",),
        ("dense",),
    }


@pytest.mark.slow
def test_recorded_evidence_matches_the_corpus() -> None:
    """Re-record with ``PYTHONPATH=src python benchmarks/step_model_choice.py`` (it prints the lines)."""
    assert training_evidence() == TRAINING_EVIDENCE
