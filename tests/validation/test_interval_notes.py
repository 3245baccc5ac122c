"""The interval's note on what the corpus lacks (model class, engine version) and its widening
where the step's time comes from the roofline fallback."""

from __future__ import annotations

import pytest

from servecap.validation.interval import Residual, first_version, interval, model_class_of


def _pool() -> tuple[Residual, ...]:
    errs = [-0.2, -0.1, -0.05, 0.0, 0.02, 0.05, 0.08, 0.1, 0.15, 0.3]
    return tuple(
        Residual("vllm", "H100", "throughput", "train", e, model_class="dense", engine_version="0.26.0") for e in errs
    )


def test_fallback_share_scales_the_log_width() -> None:
    # 10 values: k = floor(0.1 x 11) = 1, bounds -0.2 and +0.3; p = 100 ->
    # [100 / 1.3, 100 / 0.8] = [76.92, 125]; with half the step from the fallback the log-width
    # is x 1.5: [100 / 1.3^1.5, 100 / 0.8^1.5] = [67.47, 139.75]
    base = interval(100.0, metric="throughput", engine="vllm", gpu_family="H100", residuals=_pool())
    wide = interval(100.0, metric="throughput", engine="vllm", gpu_family="H100", residuals=_pool(), fallback_share=0.5)
    assert (base.low, base.high) == pytest.approx((100 / 1.3, 100 / 0.8))
    assert (wide.low, wide.high) == pytest.approx((100 / 1.3**1.5, 100 / 0.8**1.5))
    assert "50% of the step's operation time from the roofline fallback" in wide.note


def test_note_says_the_corpus_has_no_value_of_the_class_or_version() -> None:
    iv = interval(
        1.0,
        metric="throughput",
        engine="vllm",
        gpu_family="H100",
        residuals=_pool(),
        model_class="moe>100B",
        engine_version="0.30 (a later release)",
    )
    assert not iv.close
    assert "no throughput value of a moe>100B model" in iv.note
    assert "no vllm throughput value at version 0.30 or later (its vllm versions: 0.26)" in iv.note
    close = interval(
        1.0,
        metric="throughput",
        engine="vllm",
        gpu_family="H100",
        residuals=_pool(),
        model_class="dense",
        engine_version="V1 engine (0.11 and later)",
    )
    assert close.close and "corpus has no" not in close.note


def test_class_and_version_helpers() -> None:
    assert model_class_of(False, 70e9) == "dense"
    assert model_class_of(True, 30.5e9) == "moe<=100B"
    assert model_class_of(True, 671e9) == "moe>100B"
    assert first_version("0.26.0 (PyTorch 2.11.0+cu130)") == (0, 26)
    assert first_version("1.0 (PyTorch backend, per the page)") == (1, 0)
    assert first_version("not printed") is None
