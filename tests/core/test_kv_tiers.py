"""KV tier arithmetic worked by hand (core/kv_tiers.py)."""

from __future__ import annotations

import math

import pytest

from servecap.core.kv_tiers import (
    NVME_GEN5_READ_BYTES_S,
    PCIE_GEN5_X16_BYTES_S,
    RDMA_400G_BYTES_S,
    KvTier,
    capacity_blocks,
    default_tier,
    load_s,
    with_load_s,
)
from servecap.errors import ServecapError


def test_cited_bandwidths() -> None:
    # PCIe 5.0: 32 GT/s x 16 lanes x 128/130 / 8 bits = 63.015 GB/s per direction
    assert pytest.approx(63.0154e9, rel=1e-5) == PCIE_GEN5_X16_BYTES_S
    assert NVME_GEN5_READ_BYTES_S == 13.0e9
    assert RDMA_400G_BYTES_S == 50.0e9


def test_a_llama_70b_prefix_from_cpu() -> None:
    """Llama-3-70B BF16 KV is 327,680 bytes per token (DESIGN.md): an 8,192-token prefix is
    2,684,354,560 bytes, 42.6 ms over PCIe Gen5 x16, 206.5 ms from a Gen5 NVMe drive."""
    prefix = 327_680 * 8192
    assert prefix == 2_684_354_560
    cpu = default_tier("cpu", 512e9)
    assert load_s(cpu, prefix) == pytest.approx(0.042598, rel=1e-4)
    assert load_s(default_tier("ssd", 4e12), prefix) == pytest.approx(0.206489, rel=1e-4)
    # 16-token blocks of 5,242,880 bytes: 512 GB holds 97,656 of them
    assert capacity_blocks(cpu, 327_680 * 16) == 97_656


def test_layerwise_overlap_by_hand() -> None:
    """80 layers, a 40 ms load and a 100 ms compute: 0.5 + 79 x 1.25 + 1.25 = 100.5 ms layer by
    layer, 140 ms load-then-compute; a load longer than the compute exposes its excess."""
    assert with_load_s(0.040, 0.100, 80) == pytest.approx(0.1005)
    assert with_load_s(0.040, 0.100, 80, layerwise=False) == pytest.approx(0.140)
    assert with_load_s(0.200, 0.100, 80) == pytest.approx(0.0025 + 79 * 0.0025 + 0.00125)
    assert with_load_s(0.0, 0.1, 80) == 0.1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"capacity_bytes": 0.0}, "capacity_bytes"),
        ({"capacity_bytes": -1.0}, "capacity_bytes"),
        ({"capacity_bytes": math.nan}, "capacity_bytes"),
        ({"capacity_bytes": 1e300}, "capacity_bytes"),
        ({"read_bytes_per_s": 1e-300}, "read_bytes_per_s"),
        ({"read_bytes_per_s": math.inf}, "read_bytes_per_s"),
        ({"latency_s": -1.0}, "latency_s"),
    ],
)
def test_hostile_tier_values_are_named(kwargs: dict[str, float], field: str) -> None:
    base = {"capacity_bytes": 1e9, "read_bytes_per_s": 1e9, "latency_s": 0.0}
    with pytest.raises(ServecapError, match=f"tier.cpu.{field}"):
        KvTier("cpu", **{**base, **kwargs})
    with pytest.raises(ServecapError, match="tier='tape'"):
        default_tier("tape", 1e9)
