"""A real router from the package registry (vLLM's router, ``vllm-router``) in front of two
emulator replicas on 127.0.0.1, driven by ``servecap bench``, next to ``servecap fleet simulate``
of the same fleet and policy.

Round-robin must split the requests evenly, in the measurement as in the simulation, and every
request must succeed through the router (it adds fields of its own, which the emulator ignores as
vLLM does). Bounded: 60 requests at 10 req/s; every process is stopped at the end."""

from __future__ import annotations

import json
import os
import shutil
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

ROUTER = shutil.which("vllm-router") or str(Path(sys.executable).parent / "vllm-router")
MODEL = ["-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "8192"]
REQUESTS = 60


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[str, list[str]]]:
    if not Path(ROUTER).exists():
        message = "the router tests need vllm-router (the dev extra installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with ServerProcess(MODEL, replicas=2) as emulators:
        port, metrics_port = free_port(), free_port()
        router = subprocess.Popen(
            [
                ROUTER,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--policy",
                "round_robin",
                "--prometheus-port",
                str(metrics_port),
                "--worker-urls",
                *emulators.urls,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(url + "/v1/models", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if router.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("vllm-router did not start")
                time.sleep(0.2)
            yield url, emulators.urls
        finally:
            stop_process_group(router)


def _served(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "vllm:request_success":
            total += sum(s.value for s in family.samples if s.name.endswith("_total"))
    return total


def _servecap(*args: str, cwd: Path) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        [sys.executable, "-m", "servecap", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_round_robin_through_vllm_router_matches_the_fleet_simulation(
    fleet: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, replicas = fleet
    before = [_served(u) for u in replicas]
    measured = _servecap(
        "bench",
        url,
        "-m",
        "meta-llama/Llama-3.1-8B",
        "--rate",
        "10",
        "--num-requests",
        str(REQUESTS),
        "--seed",
        "1",
        "--db",
        str(tmp_path / "runs.db"),
        "--json",
        cwd=tmp_path,
    )
    shares = [_served(u) - b for u, b in zip(replicas, before, strict=True)]
    run = measured["runs"][0]
    assert run["summary"]["completed"] == REQUESTS, run["summary"]
    assert sum(shares) == REQUESTS
    assert max(shares) - min(shares) <= 2, shares  # round-robin: an even split (a probe may land on either)

    fleet_file = tmp_path / "fleet.json"
    fleet_file.write_text(
        json.dumps(
            {
                "pools": [
                    {
                        "name": "emulators",
                        "model": "meta-llama/Llama-3.1-8B",
                        "gpu": "H100",
                        "max_model_len": 8192,
                        "replicas": 2,
                        "cold_start": "instant",
                    }
                ],
                "router": "round-robin",
            }
        )
    )
    simulated = _servecap(
        "fleet",
        "simulate",
        "--fleet",
        str(fleet_file),
        "--rate",
        "10",
        "--num-requests",
        str(REQUESTS),
        "--seed",
        "1",
        "--json",
        cwd=tmp_path,
    )
    routed = sorted(r["routed"] for r in simulated["replicas"])
    assert routed == [REQUESTS // 2, REQUESTS // 2]
    assert sorted(round(s) for s in shares) in ([REQUESTS // 2, REQUESTS // 2], [REQUESTS // 2 - 1, REQUESTS // 2 + 1])
    # the emulators run the simulator's engine model: at 5 req/s a replica, TTFT agrees to within 2x
    sim_p50 = simulated["summary"]["ttft_s"]["p50"]
    meas_p50 = run["summary"]["ttft_s"]["p50"]
    assert 0.5 * sim_p50 < meas_p50 < 2.5 * sim_p50 + 0.02, (meas_p50, sim_p50)
