"""Parameter counts within 1% of the published figure for every catalog model.

Where the publisher only prints a size label ("405B", "3.3B active"), the check is that our count
is within one unit of the label's last digit (labels are rounded or truncated: Qwen3-30B-A3B's
3.353B active is printed "3.3B"), and the test says so. Active-parameter conventions differ: gpt-oss and DeepSeek leave the input-embedding table
out of "active" (a lookup, not a matmul); Mixtral and Qwen count it. The catalog records which.
"""

from __future__ import annotations

import math

import pytest

from servecap.catalog.models import load_catalog_model, model_catalog
from servecap.core.params import param_counts

ROWS = model_catalog()


def _label_tolerance(value: float) -> float:
    """One unit of the last significant digit of a label like 405e9 or 3.3e9."""
    digits = len(f"{value / 10 ** math.floor(math.log10(value)):.10g}".replace(".", "").rstrip("0"))
    return 1.0 * 10 ** (math.floor(math.log10(value)) - digits + 1)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_total_params(row) -> None:  # type: ignore[no-untyped-def]
    assert row.published_params_total is not None
    ours = param_counts(load_catalog_model(row.id)).total
    if abs(ours / row.published_params_total - 1) <= 0.01:
        return
    assert row.published_params_rounded, f"{row.id}: {ours / 1e9:.3f}B vs {row.published_params_total / 1e9}B"
    assert abs(ours - row.published_params_total) <= _label_tolerance(row.published_params_total)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_active_params(row) -> None:  # type: ignore[no-untyped-def]
    assert row.published_params_active is not None
    counts = param_counts(load_catalog_model(row.id))
    ours = counts.active if row.active_counts_input_embedding else counts.active - counts.embedding
    if abs(ours / row.published_params_active - 1) <= 0.01:
        return
    assert row.published_params_rounded, f"{row.id}: {ours / 1e9:.3f}B vs {row.published_params_active / 1e9}B"
    assert abs(ours - row.published_params_active) <= _label_tolerance(row.published_params_active)


def test_llama8b_by_hand() -> None:
    """embed 128,256 x 4,096 x 2 (untied) = 1,050,673,152; per layer: q 4096^2 + k,v 2 x 4096 x
    1024 + o 4096^2 = 41,943,040; MLP 3 x 4096 x 14336 = 176,160,768; norms 8,192;
    x 32 = 6,979,584,000; + final norm 4,096 -> 8,030,261,248 (the checkpoint's exact count)."""
    assert param_counts(load_catalog_model("meta-llama/Llama-3.1-8B")).total == 8_030_261_248


def test_deepseek_v3_by_hand() -> None:
    """671.0B total without the MTP module; active 36.6B counting the output head but not the
    input embedding (DeepSeek's corrected model card)."""
    c = param_counts(load_catalog_model("deepseek-ai/DeepSeek-V3"))
    assert c.total == pytest.approx(671.03e9, rel=1e-4)
    assert c.active - c.embedding == pytest.approx(36.63e9, rel=1e-3)


def test_gpt_oss_active_excludes_input_embedding() -> None:
    """gpt-oss-120b's card: 116.83B total, 5.13B active; 201,088 x 2,880 = 579M embedding left out."""
    c = param_counts(load_catalog_model("openai/gpt-oss-120b"))
    assert c.total == pytest.approx(116.83e9, rel=1e-3)
    assert c.active - c.embedding == pytest.approx(5.13e9, rel=2e-3)


def test_label_tolerance() -> None:
    assert _label_tolerance(405e9) == 1e9
    assert _label_tolerance(3e9) == 1e9
    assert _label_tolerance(70.6e9) == pytest.approx(0.1e9)


def test_gemma3_vision_tower_by_hand() -> None:
    """SigLIP: 27 x 15,239,504 + patch 678,528 + positions 4,096 x 1,152 + post-LN 2,304 +
    projector 1,152 x 5,376 + 1,152 = 423,060,336. The published exact count, 27,432,062,576,
    comes from a conversion with 262,144 embedding rows; the hub config has 262,208, so ours is
    64 x 5,376 = 344,064 parameters more."""
    c = param_counts(load_catalog_model("google/gemma-3-27b-it"))
    assert c.vision == 423_060_336
    assert c.total == 27_432_062_576 + 64 * 5_376
