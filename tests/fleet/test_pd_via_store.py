"""The P/D hand-off through the shared remote store (``kv_link.via: store``; vLLM's
MooncakeStoreConnector): the prefill puts the prompt's blocks the store lacks, the decode side
gets them all; hand-worked times and the store's hit rate (fleet/pd/fleet.py, core/kv_tiers.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fleet_helpers import setup_8b
from test_pd_fleet import _FP, Recording

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.kv_tiers import default_tier, store_hand_off_s
from servecap.core.plan import plan
from servecap.errors import ServecapError
from servecap.fleet import INSTANT, FleetSpec, Pool
from servecap.fleet.pd.fleet import PdFleet
from servecap.fleet.pd.stats import pd_rows, pd_stats
from servecap.fleet.pd_spec import KvLinkSpec
from servecap.sim import EngineSetup, engine_setup_from_plan
from servecap.sim.loop import run_loop
from servecap.sim.observer import Observer
from servecap.sim.traffic import OpenLoopSource
from servecap.specs import RequestShape
from servecap.workload import RequestArrays

# Llama-3.1-8B, BF16 KV, block 16: 2 x 8 KV heads x 128 x 2 bytes x 32 layers = 131,072 bytes a
# token -> 2,097,152 bytes a block on its one GPU
BLOCK_BYTES = 2 * 8 * 128 * 2 * 32 * 16
REMOTE_BYTES_S = 50e9  # a 400 Gb/s NIC (core/kv_tiers.py)


def _tiered_setup() -> EngineSetup:
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    return engine_setup_from_plan(plan(dep, request=RequestShape(512, 128)), kv_tiers=(default_tier("remote", 2**40),))


def _spec(setup: EngineSetup, via: str = "store") -> FleetSpec:
    p = Pool("p", setup, replicas=1, cold_start=INSTANT, role="prefill", kv=_FP)
    d = Pool("d", setup, replicas=1, cold_start=INSTANT, role="decode", kv=_FP)
    return FleetSpec((p, d), kv_link=KvLinkSpec(via=via))  # type: ignore[arg-type]


def _two_requests_sharing_a_prefix() -> RequestArrays:
    """Two 1,024-token prompts 10 s apart, both starting with the same 512-token prefix."""
    return RequestArrays(
        np.array([0.0, 10.0]),
        np.array([1024, 1024], dtype=np.int64),
        np.array([4, 4], dtype=np.int64),
        np.array([0, 0], dtype=np.int64),
        np.array([512, 512], dtype=np.int64),
    )


def test_hand_worked_store_hand_off() -> None:
    setup = _tiered_setup()
    assert setup.kv_tiers is not None and setup.kv_tiers.key_bytes_per_gpu == BLOCK_BYTES
    fleet = PdFleet(_spec(setup), 0)
    rec = Recording(fleet)
    run_loop(OpenLoopSource(_two_requests_sharing_a_prefix()), rec, Observer(fleet.gauges, 1.0))
    assert len(rec.records) == 2
    t = fleet.times()
    # first request: the store is empty, the prefill puts all 64 blocks (1,024 / 16), then the
    # decode side gets 64: 2 x 64 x 2,097,152 / 50e9 = 2 x 2.68435456 ms
    one = 64 * BLOCK_BYTES / REMOTE_BYTES_S
    assert one == pytest.approx(2.68435456e-3)
    assert t.transfer_s[0] == pytest.approx(2 * one, rel=1e-9)
    # second: the 32 prefix blocks are in the store, only the 32 others are put:
    # 1.34217728 + 2.68435456 = 4.02653184 ms
    assert t.transfer_s[1] == pytest.approx(4.02653184e-3, rel=1e-9)
    assert store_hand_off_s(default_tier("remote", 2**40), 32, 64, BLOCK_BYTES) == pytest.approx((one / 2, one))
    s = pd_stats(fleet, 20.0)
    assert (s.store_blocks, s.store_hit_blocks) == (128, 32)
    assert s.store_hit_rate == 0.25
    assert s.store_put_gb == pytest.approx(96 * BLOCK_BYTES / 1e9)
    assert ("hand-off via the shared store", "25.0% of 128 blocks already there; 0.2 GB put") in pd_rows(s)
    for r in fleet.replicas:
        assert r.engine.pool.used == 0


def test_the_direct_link_is_unchanged_and_reports_no_store() -> None:
    fleet = PdFleet(_spec(_tiered_setup(), via="direct"), 0)
    run_loop(OpenLoopSource(_two_requests_sharing_a_prefix()), Recording(fleet), Observer(fleet.gauges, 1.0))
    # InfiniBand NDR: 5 us + 100 us + 64 x 2,097,152 / 50e9 (core/kv_transfer.py), either request
    assert fleet.times().transfer_s == pytest.approx([5e-6 + 100e-6 + 2.68435456e-3] * 2)
    s = pd_stats(fleet, 20.0)
    assert s.store_blocks == 0 and not any(k.startswith("hand-off via") for k, _ in pd_rows(s))


def test_via_store_needs_the_pools_remote_store() -> None:
    with pytest.raises(ServecapError, match=r"kv_link\.via"):
        PdFleet(_spec(setup_8b()), 0)
    with pytest.raises(ServecapError, match=r"kv_link\.via"):
        KvLinkSpec(via="nowhere")  # type: ignore[arg-type]


def test_the_flags_and_the_fleet_file_take_the_store_hand_off(tmp_path: Path) -> None:
    import json

    import yaml
    from click.testing import CliRunner

    from servecap.cli.main import cli

    base = ["fleet", "simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "--trace", "sample:agentic", "--json"]
    pd = ["--prefill-replicas", "1", "--decode-replicas", "1", "--remote-kv-tib", "1"]
    out = CliRunner().invoke(cli, [*base, *pd, "--kv-via", "store"])
    assert out.exit_code == 0, out.output
    s = json.loads(out.stdout)["pd"]
    assert s["store_blocks"] > 0 and 0.5 < s["store_hit_blocks"] / s["store_blocks"] < 1
    pools = [
        {"name": n, "model": "Qwen/Qwen3-0.6B", "gpu": "H100", "replicas": 1, "role": n, "remote_kv_tib": 1}
        for n in ("prefill", "decode")
    ]
    f = tmp_path / "pd.yaml"
    f.write_text(yaml.safe_dump({"pools": pools, "kv_link": {"via": "store"}}))
    by_file = CliRunner().invoke(cli, ["fleet", "simulate", "--fleet", str(f), "--trace", "sample:agentic", "--json"])
    assert by_file.exit_code == 0, by_file.output
    assert json.loads(by_file.stdout)["pd"]["store_blocks"] == s["store_blocks"]
    for flags, named in (([*pd[:4], "--kv-via", "store"], "kv_link.via"), (["--kv-via", "store"], "kv_via")):
        bad = CliRunner().invoke(cli, [*base, *flags])
        assert bad.exit_code != 0 and isinstance(bad.exception, ServecapError), bad.output
        assert named in str(bad.exception)
