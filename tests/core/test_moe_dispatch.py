"""MoE expert parallelism: all-to-all bytes and times, EPLB's imbalance, links, worked by hand."""

from __future__ import annotations

import pytest

from servecap.core.comm import Links, group_link, p2p_s, ring_allreduce_s
from servecap.core.moe_dispatch import (
    a2a_bytes,
    a2a_latency_s,
    a2a_seconds_per_token,
    combine_bytes_per_copy,
    dispatch_bytes_per_copy,
    expert_load_factor,
    gpu_loads,
    remote_nodes_per_token,
    replica_counts,
    resolve_mode,
    zipf_loads,
)

H800 = Links(intra_bytes_s=200e9, inter_bytes_s=50e9)


def test_deepseek_v3_all_to_all_bytes_at_ep32_by_hand() -> None:
    """DeepSeek-V3 (hidden 7168, top-8) at EP 32 on 4 nodes of 8 GPUs, 128 tokens per GPU (the
    setting of DeepEP's low-latency table):

    dispatch copy = 7168 FP8 bytes + ceil(7168/128) = 56 float32 scales x 4 B = 7,392 B
    copies        = 128 x 8 = 1,024;  dispatch = 1,024 x 7,392 = 7,569,408 B per GPU per layer
    to the 7 other GPUs of the node: 7/32 -> 1,655,808 B; to the 24 GPUs of other nodes:
    24/32 -> 5,677,056 B; combine copy = 7168 x 2 = 14,336 B -> 14,680,064 B, 3,211,264 intra,
    11,010,048 inter."""
    d_copy = dispatch_bytes_per_copy(7168)
    c_copy = combine_bytes_per_copy(7168)
    assert d_copy == 7392
    assert c_copy == 14336
    d = a2a_bytes(128, 8, 32, 8, d_copy)
    assert d.total_bytes == 7_569_408
    assert d.intra_node_bytes == 1_655_808
    assert d.inter_node_bytes == 5_677_056
    c = a2a_bytes(128, 8, 32, 8, c_copy)
    assert (c.total_bytes, c.intra_node_bytes, c.inter_node_bytes) == (14_680_064, 3_211_264, 11_010_048)
    assert c.remote_bytes == 14_221_312


def test_low_latency_time_matches_deepeps_table() -> None:
    """DeepEP README, EP 32 low-latency: dispatch 155 us at 48 GB/s, combine 273 us at 53 GB/s.
    Our bytes over the same bandwidths: 7,569,408 / 48e9 = 157.7 us and 14,680,064 / 53e9 =
    277.0 us (the README's times are of the same bytes, rounded): within 2%."""
    per_token = a2a_seconds_per_token(hidden=7168, top_k=8, ep=32, gpus_per_node=8, mode="low_latency", links=H800)
    want = 7_569_408 / 48e9 + 14_680_064 / 53e9
    assert per_token * 128 == pytest.approx(want, rel=1e-12)
    assert per_token * 128 == pytest.approx(155e-6 + 273e-6, rel=0.02)


def test_normal_mode_sends_a_token_once_per_node() -> None:
    # 4 nodes, top-8: each other node is missed by all 8 picks with (3/4)^8
    assert remote_nodes_per_token(8, 4) == pytest.approx(3 * (1 - 0.75**8))
    assert remote_nodes_per_token(8, 1) == 0.0
    t = a2a_seconds_per_token(hidden=7168, top_k=8, ep=32, gpus_per_node=8, mode="normal", links=H800)
    # RDMA: 2.6997 nodes x 7,392 B / 58 GB/s (+ combine at 57 GB/s) bounds it (NVLink is faster)
    rdma = remote_nodes_per_token(8, 4) * (7392 / 58e9 + 14336 / 57e9)
    assert t == pytest.approx(rdma, rel=1e-12)


def test_one_node_uses_the_scale_up_link() -> None:
    links = Links(intra_bytes_s=160e9, inter_bytes_s=None)
    t = a2a_seconds_per_token(hidden=7168, top_k=8, ep=8, gpus_per_node=8, mode="low_latency", links=links)
    # 7/8 of the 8 copies leave the GPU, at DeepEP's 153 (dispatch) / 158 (combine) GB/s of 160
    assert t == pytest.approx(7 * 7392 / 153e9 + 7 * 14336 / 158e9, rel=1e-12)
    assert a2a_seconds_per_token(hidden=7168, top_k=8, ep=1, gpus_per_node=8, mode="normal", links=links) == 0.0
    with pytest.raises(ValueError):
        a2a_seconds_per_token(hidden=7168, top_k=8, ep=16, gpus_per_node=8, mode="normal", links=links)


def test_nic_scales_the_measured_bandwidth() -> None:
    fast = Links(intra_bytes_s=200e9, inter_bytes_s=100e9)
    slow = a2a_seconds_per_token(hidden=7168, top_k=8, ep=64, gpus_per_node=8, mode="low_latency", links=H800)
    quick = a2a_seconds_per_token(hidden=7168, top_k=8, ep=64, gpus_per_node=8, mode="low_latency", links=fast)
    assert quick == pytest.approx(slow / 2)


def test_mode_and_latency() -> None:
    assert resolve_mode("auto", 128) == "low_latency"
    assert resolve_mode("auto", 4096) == "normal"
    assert resolve_mode("normal", 1) == "normal"
    assert a2a_latency_s(32, 8, H800) == pytest.approx(2 * 10e-6)
    assert a2a_latency_s(1, 8, H800) == 0.0


def test_eplb_placement_by_hand() -> None:
    """4 experts with Zipf(1) loads 1, 1/2, 1/3, 1/4 (sum 25/12) on 2 GPUs.

    No redundant experts: contiguous, GPU 0 = 1 + 1/2 = 1.5, mean 25/24: factor 1.44.
    Two redundant: replicas go to expert 0 (1/1 the highest), then expert 0 again (1/2 ties
    expert 1's 1/2; the lower index wins): counts 3, 1, 1, 1, replica loads 1/3 x 3, 1/2, 1/3,
    1/4. Packing heaviest first onto the least loaded GPU with a free slot (3 each):
    1/2 -> G0; 1/3 -> G1; 1/3 -> G1 (1/3 < 1/2); 1/3 -> G0 (1/2 < 2/3); 1/3 -> G1 (2/3 < 5/6,
    G1 now full); 1/4 -> G0: G0 = 13/12, G1 = 1: factor (13/12) / (25/24) = 26/25 = 1.04."""
    loads = zipf_loads(4, 1.0)
    assert replica_counts(loads, 2) == [3, 1, 1, 1]
    assert expert_load_factor(4, 2, 0, 1.0) == pytest.approx(1.44)
    assert sorted(gpu_loads(loads, 2, 2)) == pytest.approx([1.0, 13 / 12])
    assert expert_load_factor(4, 2, 2, 1.0) == pytest.approx(1.04)
    assert expert_load_factor(256, 32, 0, 0.0) == 1.0
    # redundancy never makes DeepSeek-V3's busiest GPU busier
    assert expert_load_factor(256, 32, 32, 1.0) < expert_load_factor(256, 32, 0, 1.0)


def test_links_and_collectives() -> None:
    links = Links(intra_bytes_s=450e9, inter_bytes_s=50e9, intra_latency_s=1e-5, inter_latency_s=2e-5)
    assert group_link(links, 8, 8) == (450e9, 1e-5)
    assert group_link(links, 16, 8) == (50e9, 2e-5)
    # ring: 2 (8-1)/8 x 1 MB / 450 GB/s + 10 us
    assert ring_allreduce_s(1e6, 8, 450e9, 1e-5) == pytest.approx(2 * 7 / 8 * 1e6 / 450e9 + 1e-5)
    assert ring_allreduce_s(1e6, 1, 450e9, 1e-5) == 0.0
    assert p2p_s(1e6, 50e9, 1e-5) == pytest.approx(2e-5 + 1e-5)
    assert p2p_s(0.0, 50e9, 1e-5) == 0.0
    with pytest.raises(ValueError):
        group_link(Links(450e9, None), 16, 8)
