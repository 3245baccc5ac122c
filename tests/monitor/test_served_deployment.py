"""Issue 32: `monitor` without deployment flags read "+940%" headroom from the KV pool alone,
unlabelled, though the emulator serves its deployment. It now takes the served deployment (the
engine model's SLO headroom), and the KV-only bound says what it leaves out."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator

import httpx
import pytest

from servecap.emulator.server import ServerThread, engine_state
from servecap.monitor.headroom import Headroom, capacity_from_cache_config
from servecap.monitor.snapshot import CacheConfig

DEPLOYMENT = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 2048}


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    from servecap.catalog import lookup_gpu, resolve_model
    from servecap.core.defaults import build_deployment
    from servecap.core.plan import plan

    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=2048)
    with ServerThread(engine_state(plan(dep), model_name="m", deployment_options=dict(DEPLOYMENT))) as srv:
        yield srv.url


def test_monitor_takes_the_emulators_served_deployment(served: str) -> None:
    def load() -> None:
        with httpx.Client(timeout=30) as c:
            for _ in range(12):
                c.post(served + "/v1/completions", json={"model": "m", "prompt": "x " * 60, "max_tokens": 8})

    worker = threading.Thread(target=load)
    worker.start()
    try:
        args = ["monitor", served, "--once", "--json", "--interval-s", "1.5", "--no-store"]
        res = subprocess.run(
            [sys.executable, "-m", "servecap", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        worker.join()
    assert res.returncode == 0, res.stderr
    assert f"the deployment from {served}/servecap/deployment" in res.stderr
    data = json.loads(res.stdout)
    assert data["headroom"] is None or data["headroom"]["capacity_source"] == "engine_model"
    if data["headroom"] is None:  # no request finished inside the window: the engine model says so
        assert any("no headroom yet" in n for n in data["notes"])


def test_kv_only_headroom_says_what_it_leaves_out() -> None:
    cache = CacheConfig(num_gpu_blocks=28125, block_size=16, gpu_memory_utilization=0.9, cache_dtype="auto")
    cap = capacity_from_cache_config(cache, 1152)  # 28,125 // 72 = 390 requests
    h = Headroom(1, 7.0, cap, 7.0 / 390, 390 / 7.0 - 1, False)
    assert "the KV cache fills at about +5471% traffic (the KV pool's bound only" in h.summary()
    assert "--model/--gpu" in h.summary()
