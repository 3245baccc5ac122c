"""A fleet file's KV tiers exported: vLLM's native offloading flags, LMCache's settings (YAML and
environment), KServe's kvCacheOffloading, and every tier a target cannot hold named in the
warnings (app/export/kv_tiers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servecap.app.export import export
from servecap.core.kv_tiers import DRAM_USD_PER_GIB_HOUR, SSD_USD_PER_GIB_MONTH, tier_usd_per_month
from servecap.errors import ServecapError


def _fleet(tmp_path: Path, **tiers: object) -> Path:
    pool = {"name": "main", "model": "meta-llama/Llama-3.1-70B", "gpu": "H100", "tp": 4, "replicas": 2, **tiers}
    f = tmp_path / "fleet.yaml"
    f.write_text(yaml.safe_dump({"pools": [pool]}))
    return f


def test_every_tier_in_every_engine(tmp_path: Path) -> None:
    res = export("kv-tiers", _fleet(tmp_path, cpu_kv_gib=512, ssd_kv_gib=2048, remote_kv_tib=4))
    main = yaml.safe_load(res.text)["main"]
    assert main["vllm_native_args"] == ["--kv-offloading-backend", "native", "--kv-offloading-size", "512"]
    lm = main["lmcache"]["config_yaml"]
    # LMCache sizes are per GPU worker, in GB: 512 GiB x 2^30 / 1e9 / 4 GPUs = 137.439 GB
    assert lm["local_cpu"] is True and lm["max_local_cpu_size"] == pytest.approx(137.439)
    assert lm["max_local_disk_size"] == pytest.approx(2048 * 2**30 / 1e9 / 4, rel=1e-5)
    assert lm["remote_url"].startswith("lm://") and lm["use_layerwise"] is True
    assert main["lmcache"]["env"]["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "137.439"
    ks = main["kserve"]["spec"]["kvCacheOffloading"]
    assert ks == {
        "cpu": "512Gi",
        "evictionPolicy": "lru",
        "secondary": [{"fileSystem": {"emptyDir": {"size": "2048Gi"}}}],
    }
    joined = "\n".join(res.warnings)
    # what does not map: vLLM native has no SSD/remote tier and no layer-wise load; the store's size
    assert "ssd_kv_gib 2048 has no vLLM native" in joined
    assert "remote_kv_tib 4 has no vLLM native" in joined
    assert "not layer by layer" in joined
    assert "LMCache has no setting for the store's size" in joined
    assert "no kvCacheOffloading field" in joined


def test_the_serving_targets_carry_the_native_flags(tmp_path: Path) -> None:
    res = export("kserve", _fleet(tmp_path, cpu_kv_gib=256, kv_load="blocking"))
    args = yaml.safe_load(res.text.split("\n", 2)[2])["spec"]["predictor"]["model"]["args"]
    i = args.index("--kv-offloading-size")
    assert args[i - 2 : i + 2] == ["--kv-offloading-backend", "native", "--kv-offloading-size", "256"]
    assert not any("layer by layer" in w for w in res.warnings)


def test_a_pool_without_tiers_is_named(tmp_path: Path) -> None:
    res = export("kv-tiers", _fleet(tmp_path))
    assert any("no KV tier below GPU memory" in w for w in res.warnings)


def test_tier_prices_by_hand() -> None:
    """512 GiB of DRAM at $0.004237/GiB-hour for 730 h: $1,583.62 a month; 1 TiB of SSD
    persistent disk at $0.17/GiB-month: $174.08."""
    assert DRAM_USD_PER_GIB_HOUR == 0.004237 and pytest.approx(0.17) == SSD_USD_PER_GIB_MONTH
    assert tier_usd_per_month("cpu", 512, 730) == pytest.approx(1583.6, abs=0.05)
    assert tier_usd_per_month("remote", 1024, 730) == pytest.approx(3167.2, abs=0.05)
    assert tier_usd_per_month("ssd", 1024, 730) == pytest.approx(174.08)
    with pytest.raises(ServecapError):
        tier_usd_per_month("tape", 1, 730)
