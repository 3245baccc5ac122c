"""KV tiers in a fleet: the shared remote store is read across replicas (a prefix computed on one
replica is loaded on another), per-tier hits reach the fleet's JSON, and the tiers lift the hit
rate on the agentic sample under least-outstanding routing (fleet/shared_kv_store.py)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from servecap.cli.main import cli
from servecap.core.kv_tiers import KvTier
from servecap.fleet.shared_kv_store import SharedKvStores
from servecap.sim.kv_tiers import TierSetup, TierStore

BASE = [
    "fleet",
    "simulate",
    "--model",
    "meta-llama/Llama-3.1-8B",
    "--gpu",
    "H100",
    "--replicas",
    "4",
    "--router",
    "least-outstanding",
    "--max-model-len",
    "16384",
    "--kv-cache-memory-bytes",
    "3000000000",
    "--trace",
    "sample:agentic",
    "--json",
]


def _summary(*extra: str) -> dict[str, object]:
    out = CliRunner().invoke(cli, [*BASE, *extra])
    assert out.exit_code == 0, out.output
    s: dict[str, object] = json.loads(out.stdout)["summary"]
    return s


def test_one_store_per_block_format() -> None:
    stores = SharedKvStores()
    a = TierSetup((KvTier("remote", 1e9, 1e10),), 1000, 1, 1)
    b = TierSetup((KvTier("cpu", 1e9, 1e10),), 1000, 1, 1)
    assert stores.store_for(a) is stores.store_for(a) is not None
    assert stores.store_for(b) is None and stores.store_for(None) is None
    other = TierSetup((KvTier("remote", 1e9, 1e10),), 2000, 1, 1)
    assert stores.store_for(other) is not stores.store_for(a)
    one, two = TierStore(a, stores.store_for(a)), TierStore(a, stores.store_for(a))
    one.demote(42)
    # replica two reads what replica one evicted once its write ended: 1,000 bytes at 1e10 B/s
    assert two.find([42], 0, 1) == [0]
    two.now_s = 1000 / 1e10
    assert two.find([42], 0, 1) == [1]


def test_tiers_in_the_fleet_lift_the_hit_rate_and_report_each_tier() -> None:
    base = _summary()
    assert "kv_tiers" not in base
    tiered = _summary("--cpu-kv-gib", "4", "--remote-kv-tib", "1")
    tiers = tiered["kv_tiers"]
    assert isinstance(tiers, dict)
    assert set(tiers) == {"query_tokens", "gpu", "cpu", "remote"}
    assert tiers["cpu"]["tokens"] > 0 and tiers["remote"]["tokens"] > 0  # reuse across replicas
    found = sum(v["fraction"] for k, v in tiers.items() if k != "query_tokens")
    assert isinstance(base["prefix_cache_hit_rate"], float)
    assert found > base["prefix_cache_hit_rate"] + 0.2


def test_routing_by_the_tiers_blocks_beats_least_outstanding_with_tiers() -> None:
    """With a CPU tier and the shared store on the agentic sample, the precise scorer (GPU blocks
    over tier blocks over the store's) keeps more of each prompt in GPU memory than
    least-outstanding, finds more in all, and cuts the p99 TTFT (figures at the time of writing:
    GPU hits 0.67 vs 0.40, all tiers 0.79 vs 0.70, p99 TTFT 0.28 s vs 1.85 s)."""
    tiers = ("--cpu-kv-gib", "4", "--remote-kv-tib", "1")
    lo = _summary(*tiers)
    precise = _summary(*tiers, "--router", "precise-prefix")  # the last --router wins

    def found(s: dict[str, object]) -> float:
        t = s["kv_tiers"]
        assert isinstance(t, dict)
        return float(sum(v["fraction"] for k, v in t.items() if k != "query_tokens"))

    def gpu(s: dict[str, object]) -> float:
        t = s["kv_tiers"]
        assert isinstance(t, dict)
        return float(t["gpu"]["fraction"])

    def p99(s: dict[str, object]) -> float:
        ttft = s["ttft_s"]
        assert isinstance(ttft, dict)
        return float(ttft["p99"])

    assert lo["completed"] == precise["completed"]
    assert gpu(precise) > gpu(lo) + 0.15
    assert found(precise) > found(lo) + 0.05
    assert p99(precise) < p99(lo) / 2
