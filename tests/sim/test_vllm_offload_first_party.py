"""vLLM 0.26.0's native CPU offloading on one H200, measured by the project (docs/kv-tiers.md,
"A first-party measurement"), against servecap's tiers on the same workload.

The run (``benchmarks/vllm_sweep/sweep_models.sh``, model ``llama31-8b-fp8-offload``; its files in
``benchmarks/data/vllm_sweep_h200/llama31-8b-fp8-offload/``): Llama-3.1-8B FP8, a 151,200-token
GPU cache (``--gpu-memory-utilization 0.2``), ``--kv-offloading-size 32`` (GiB), prefix caching
on; 48 shared 4,096-token prefixes, each sent 6 times with its own 256-token suffix, 64 output
tokens, 16 concurrent. 246 of the 288 requests finished in about 12 s, then the engine died on an
assertion in the offloading connector's scheduler (``_build_store_jobs``), so the run saved no
result file; what it measured is in the server log's 10 s statistics line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli
from servecap.core.kv_tiers import PCIE_GEN5_X16_BYTES_S

RUN = Path(__file__).parents[2] / "benchmarks/data/vllm_sweep_h200/llama31-8b-fp8-offload"


def _log() -> str:
    return (RUN / "server.log").read_text(encoding="utf-8")


def test_the_logged_hit_rates_and_transfer_rates() -> None:
    """By hand from the log: 43.9% of the prompt tokens looked up hit the GPU cache; the connector
    found 25.2% of the rest (vLLM counts external queries as the tokens the local cache missed),
    0.252 x 0.561 = 14.1% of all: 58.0% cached. Transfers: 30,064,771,072 B stored in 0.5969 s
    of copy time = 50.4 GB/s (GPU to CPU), 10,127,147,008 B loaded in 0.2759 s = 36.7 GB/s (CPU
    to GPU), 58% of PCIe Gen5 x16's 63.0 GB/s per direction that servecap's CPU tier takes."""
    log = _log()
    m = re.search(r"Prefix cache hit rate: ([\d.]+)%, External prefix cache hit rate: ([\d.]+)%", log)
    assert m is not None
    local, external_of_missed = float(m[1]) / 100, float(m[2]) / 100
    assert (local, external_of_missed) == (0.439, 0.252)
    assert external_of_missed * (1 - local) == pytest.approx(0.1414, abs=1e-4)

    def metric(name: str) -> float:
        found = re.search(rf"vllm:{name}=([\d.e+-]+)", log)
        assert found is not None, name
        return float(found[1])

    store_bytes_s = metric("kv_offload_store_bytes") / metric("kv_offload_store_time")
    load_bytes_s = metric("kv_offload_load_bytes") / metric("kv_offload_load_time")
    assert store_bytes_s == pytest.approx(50.37e9, rel=1e-3)
    assert load_bytes_s == pytest.approx(36.70e9, rel=1e-3)
    assert load_bytes_s / PCIE_GEN5_X16_BYTES_S == pytest.approx(0.583, abs=1e-3)
    assert "assert len(offload_keys) == len(offload_block_ids)" in log  # why the run stopped


WORKLOAD = """\
name: vllm-offload-prefix-repetition
users: {count: 16, think_time_s: 0, turns: 1}
prompt_tokens: 256
output_tokens: 64
prefix: {groups: 48, tokens: 4096, share: 1.0}
num_requests: 246
"""


def _simulate(tmp_path: Path, kv_load: str, kv_store: str) -> dict[str, Any]:
    path = tmp_path / "w.yaml"
    path.write_text(WORKLOAD)
    args = ["simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H200", "-w", "fp8", "--max-model-len", "8192"]
    args += ["--kv-cache-memory-bytes", "19818086400", "--cpu-kv-gib", "32", "--workload", str(path), "--json"]
    args += ["--kv-load", kv_load, "--kv-store", kv_store]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def test_servecap_on_the_same_workload(tmp_path: Path) -> None:
    """servecap's answer for the 246 finished requests with the tier as a victim cache whose
    loads the admitting step takes (``--kv-load layerwise --kv-store on-evict``), with the GPU
    cache vLLM logged (9,450
    blocks of 16 tokens x 131,072 B = 19,818,086,400 B) and the 32 GiB CPU tier: about the same
    run time (10.9 s simulated against about 12 s measured) and the GPU cache's share 6 points
    above the measured 43.9%, but a CPU share of 24.4% against the measured 14.1% (these shares
    move by up to 3 points with small timing changes: 47.7 / 23.2% and 11.7 s at a 6.7 ms
    per-request cost, docs/kv-tiers.md). A block is
    loadable from the CPU tier only once its write (at the tier's write bandwidth) has ended, as
    vLLM 0.26.0's asynchronous store jobs (its offloading scheduler and CPU offloading manager: a
    lookup meeting a pending block returns HIT_PENDING). What servecap's tier still does not do:
    a request meeting a pending block waits for it (here it computes it); a request with
    transfers in flight is not scheduled; the lookup stops at the first missing chunk; vLLM
    stores every block as it is computed (``_get_reqs_to_store``) where servecap writes the GPU's
    victims. The offload block is 16 tokens in this run (30,064,771,072 B stored in 14,336
    allocated blocks = 2,097,152 B = 16 x 131,072 B), the same as servecap's. The measured CPU
    share has two readings: the scheduler's counter (14.1%, requests in flight included) and the
    worker's completed loads (10,127,147,008 B = 77,264 tokens, about 7% of the 246 finished
    requests' 1,070,592 prompt tokens); servecap is above both. How much of the gap each
    difference explains is not measured yet (docs/kv-tiers.md). The figures
    (with the default step model: the operations for dense vLLM on H200, specs.step_choice, with
    their 0.71 ms step overhead) are pinned so that the
    document's comparison cannot go stale."""
    out = _simulate(tmp_path, "layerwise", "on-evict")
    tiers = out["kv_tiers"]
    assert out["completed"] == 246
    assert out["duration_s"] == pytest.approx(10.93, abs=0.02)
    assert tiers["gpu"]["fraction"] == pytest.approx(0.499, abs=0.001)
    assert tiers["cpu"]["fraction"] == pytest.approx(0.244, abs=0.001)
    # the ceiling: every prefix's first request misses; 4,096 of 4,352 prompt tokens can hit
    first_seen = 48
    assert tiers["gpu"]["fraction"] + tiers["cpu"]["fraction"] <= (246 - first_seen) / 246 * 4096 / 4352 + 0.02


def test_servecap_with_vllm_connector_modes(tmp_path: Path) -> None:
    """The same run with the tier modelled as vLLM's connector works (``--kv-load async --kv-store
    on-compute``: every computed block copied to CPU DRAM after its step; a request with blocks
    there waits outside the batch for their load while the next ones are scheduled; a request
    meeting a block still being stored or loaded waits: sim/kv_tiers.py). The GPU cache finds
    more (51.0% against 49.9%: a loaded prefix is cached in GPU memory when its load ends, and a request
    meeting it while it loads waits for it instead of computing it again), the CPU tier about
    about the same (24.7%), the run is shorter (10.71 s against 10.93 s: loads no longer stall the
    batch). Both shares stay above the measured 43.9% and 14.1%, and the sum (75.8%) is at the
    ceiling (75.8%)
    where vLLM's counters say 58.0%: the mechanisms are not what keeps the model above the
    measurement (docs/kv-tiers.md, "A first-party measurement")."""
    out = _simulate(tmp_path, "async", "on-compute")
    tiers = out["kv_tiers"]
    assert out["completed"] == 246
    assert out["duration_s"] == pytest.approx(10.71, abs=0.02)
    assert tiers["gpu"]["fraction"] == pytest.approx(0.510, abs=0.001)
    assert tiers["cpu"]["fraction"] == pytest.approx(0.247, abs=0.001)
    assert tiers["gpu"]["fraction"] + tiers["cpu"]["fraction"] <= (246 - 48) / 246 * 4096 / 4352 + 0.02
