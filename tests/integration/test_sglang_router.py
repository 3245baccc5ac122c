"""SGLang's router (``sglang-router`` from the package registry) in front of four emulator
replicas with prefix caching on 127.0.0.1, on a shared-prefix workload, driven by
``servecap bench``, next to ``servecap fleet simulate`` with ``prefix-affinity`` (the same
"cache affinity unless imbalanced" gate and thresholds) and with ``round-robin``.

16 groups share a 1,024-token prefix; 48 requests (3 a group on average). Round-robin spreads a
group over the replicas, so most prefixes miss; cache-aware keeps a group on one replica, so all
but a group's first request hit. Asserted: the direction and rough size (cache-aware's hit rate
well above round-robin's, measured and simulated) and the simulated hit rate within 0.15 of the
measured one. Bounded: 2 x 48 requests at 12 req/s; every process is stopped at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from servecap.emulator.server import ServerProcess, free_port, stop_process_group

pytestmark = pytest.mark.router

MODEL = ["-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "8192"]
REPLICAS = 4
REQUESTS = 48
# our prefix-affinity defaults (policy/routers.py), passed to sgl-router explicitly
THRESHOLDS = {"cache_threshold": 0.5, "balance_abs_threshold": 32, "balance_rel_threshold": 1.0001}
WORKLOAD = {
    "arrival": {"kind": "poisson", "rate_per_s": 12},
    "num_requests": REQUESTS,
    "prompt_tokens": {"kind": "fixed", "value": 64},
    "output_tokens": {"kind": "fixed", "value": 16},
    "prefix": {"groups": 16, "tokens": 1024},
}
HIT_RATE_TOLERANCE = 0.15


def _have_sglang_router() -> bool:
    try:
        import sglang_router  # noqa: F401
    except ImportError:
        return False
    return True


def _wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("sglang-router did not start")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def emulators() -> Iterator[list[str]]:
    if not _have_sglang_router():
        message = "the SGLang router tests need sglang-router (the dev extra installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with ServerProcess(MODEL, replicas=REPLICAS) as servers:
        yield list(servers.urls)


def _router(policy: str, workers: list[str]) -> tuple[str, subprocess.Popen[bytes]]:
    port, metrics_port = free_port(), free_port()
    args = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--policy", policy, "--prometheus-port", str(metrics_port), "--worker-urls", *workers]
    args += ["--cache-threshold", str(THRESHOLDS["cache_threshold"])]
    args += ["--balance-abs-threshold", str(THRESHOLDS["balance_abs_threshold"])]
    args += ["--balance-rel-threshold", str(THRESHOLDS["balance_rel_threshold"])]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, proc)
    except BaseException:
        stop_process_group(proc)
        raise
    return url, proc


def _counters(url: str) -> tuple[float, float, float]:
    """(requests served, prefix-cache query tokens, prefix-cache hit tokens) of one replica."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    served = queries = hits = 0.0
    for family in text_string_to_metric_families(text):
        total = sum(s.value for s in family.samples if s.name.endswith("_total"))
        if family.name == "vllm:request_success":
            served += total
        elif family.name == "vllm:prefix_cache_queries":
            queries += total
        elif family.name == "vllm:prefix_cache_hits":
            hits += total
    return served, queries, hits


def _servecap(*args: str, cwd: Path) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        [sys.executable, "-m", "servecap", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def measure(policy: str, workers: list[str], tmp_path: Path, seed: int) -> tuple[list[float], float, dict]:  # type: ignore[type-arg]
    """Per-replica request counts, the fleet's prefix hit rate and the bench summary through
    sgl-router with ``policy``."""
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(WORKLOAD))
    url, proc = _router(policy, workers)
    try:
        before = [_counters(u) for u in workers]
        out = _servecap(
            "bench", url, "-m", "meta-llama/Llama-3.1-8B", "--workload", str(workload),
            "--seed", str(seed), "--db", str(tmp_path / f"{policy}.db"), "--json", cwd=tmp_path,
        )  # fmt: skip
        after = [_counters(u) for u in workers]
    finally:
        stop_process_group(proc)
    deltas = [[a - b for a, b in zip(x, y, strict=True)] for x, y in zip(after, before, strict=True)]
    queries, hits = sum(d[1] for d in deltas), sum(d[2] for d in deltas)
    return [d[0] for d in deltas], hits / queries if queries else 0.0, out["runs"][0]["summary"]


def simulate(router: str, tmp_path: Path, seed: int) -> dict:  # type: ignore[type-arg]
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(WORKLOAD))
    fleet_file = tmp_path / "fleet.json"
    pool = {"name": "emulators", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 8192}
    pool |= {"replicas": REPLICAS, "cold_start": "instant"}
    fleet_file.write_text(json.dumps({"pools": [pool], "router": router}))
    return _servecap(
        "fleet", "simulate", "--fleet", str(fleet_file), "--workload", str(workload),
        "--seed", str(seed), "--json", cwd=tmp_path,
    )  # fmt: skip


def test_cache_aware_sgl_router_keeps_prefix_groups_together_as_prefix_affinity_does(
    emulators: list[str], tmp_path: Path
) -> None:
    rr_split, rr_hit, rr_summary = measure("round_robin", emulators, tmp_path, seed=1)
    ca_split, ca_hit, ca_summary = measure("cache_aware", emulators, tmp_path, seed=2)
    assert rr_summary["completed"] == REQUESTS and ca_summary["completed"] == REQUESTS
    assert sum(rr_split) == REQUESTS and sum(ca_split) == REQUESTS
    assert max(rr_split) - min(rr_split) <= 2, rr_split  # round-robin: an even split

    sim_rr = simulate("round-robin", tmp_path, seed=1)["summary"]["prefix_cache_hit_rate"]
    sim_ca = simulate("prefix-affinity", tmp_path, seed=2)["summary"]["prefix_cache_hit_rate"]
    # direction and size: cache-aware hits far more often than round-robin, measured and simulated
    assert ca_hit > rr_hit + 0.3, (ca_hit, rr_hit)
    assert sim_ca > sim_rr + 0.3, (sim_ca, sim_rr)
    # and the simulation lands near the measurement for each policy
    assert abs(sim_rr - rr_hit) <= HIT_RATE_TOLERANCE, (sim_rr, rr_hit)
    assert abs(sim_ca - ca_hit) <= HIT_RATE_TOLERANCE, (sim_ca, ca_hit)
