"""The shadow autoscaler on a real recording (issue 20, "shadow"): `servecap emulate` on
127.0.0.1 driven by the bench library at 0.5 req/s, then 8 req/s (a known step), recorded by the
monitor into its SQLite store; `monitor replay` of that store through a fleet file's autoscaler
gives the scale events `fleet simulate` gives for the same autoscaler and step, at the same times
within the monitor's sampling. Bounded: about 35 s of wall clock, little CPU; every process ends."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from servecap.app.bench import BenchRequest, BenchStep, bench
from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate
from servecap.app.monitor import MonitorSettings, run_monitor
from servecap.app.monitor_replay import replay
from servecap.emulator.server import free_port
from servecap.fleet.file_schema import load_fleet_file
from servecap.monitor.history import load_history
from servecap.workload import WorkloadSpec

pytestmark = pytest.mark.slow

LOW_REQ_S, HIGH_REQ_S, STEP_AT_S, END_S = 0.5, 8.0, 10.0, 22.0
PROMPT, OUTPUT = 256, 32
INTERVAL_S = 1.0  # the monitor's sampling (and its window)
# one replica of an 8B on an L40S; the autoscaler adds a second when the in-flight requests pass
# 3 per replica: about 0.3 in flight at 0.5 req/s, about 6 at 8 req/s
FLEET = """
pools:
  - name: l40s
    model: meta-llama/Llama-3.1-8B
    gpu: L40S
    max_model_len: 4096
    cold_start: instant
    autoscaler: {signal: inflight, target: 3, interval_s: 2, min_replicas: 1, max_replicas: 2,
                 upscale_stabilization_s: 0, downscale_stabilization_s: 600}
router: least-outstanding
slo: {ttft_ms: 1000, tpot_ms: 50}
"""


def _step(start_s: float) -> WorkloadSpec:
    """Nothing until ``start_s``, then the low rate, then the high rate from ``STEP_AT_S`` on."""
    steps = [{"start_s": 0.0, "rate_per_s": 0.0}] if start_s > 0 else []
    steps += [{"start_s": start_s, "rate_per_s": LOW_REQ_S}, {"start_s": start_s + STEP_AT_S, "rate_per_s": HIGH_REQ_S}]
    arrival = {"kind": "schedule", "rate": {"kind": "piecewise", "steps": steps}}
    return WorkloadSpec.model_validate(
        {"arrival": arrival, "prompt_tokens": PROMPT, "output_tokens": OUTPUT, "duration_s": start_s + END_S}
    )


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    port = free_port("127.0.0.1")
    url = f"http://127.0.0.1:{port}"
    args = ["emulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "L40S", "-l", "4096", "--port", str(port)]
    proc = subprocess.Popen([sys.executable, "-m", "servecap", *args], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("servecap emulate did not start")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_replay_of_a_recorded_step_gives_fleet_simulates_scale_events(emulator: str, tmp_path: Path) -> None:
    db = tmp_path / "monitor.sqlite"
    # the monitor's clock, injected: its first reading is the history's 0 (exact, however late the
    # first report comes on a loaded machine); the bench waits for it on an event, not a sleep
    monitor_started = threading.Event()
    zero: list[float] = []

    def clock() -> float:
        now = time.monotonic()
        if not zero:
            zero.append(now)
            monitor_started.set()
        return now

    settings = MonitorSettings(
        urls=(emulator,), interval_s=INTERVAL_S, window_s=INTERVAL_S, duration_s=END_S + 4, db=db, timeout_s=1.0
    )
    monitor = threading.Thread(target=lambda: asyncio.run(run_monitor(settings, lambda _r: None, clock=clock)))
    monitor.start()
    try:
        assert monitor_started.wait(timeout=60), "the monitor did not start"
        started = time.monotonic()
        measured = bench(BenchRequest(url=emulator, steps=[BenchStep(workload=_step(0.0))], store=False, seed=0))
    finally:
        monitor.join()
    run = measured.runs[0]
    assert run.failed_requests == 0 and run.summary.completed > 60
    offset_s = started - zero[0]  # the bench's start on the history's clock

    history = load_history(db)
    assert history.step_s == pytest.approx(INTERVAL_S, abs=0.05)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    shadow, _ = replay(history, fleet, seed=0)
    f = load_fleet_file(fleet).model_copy(update={"timeseries_interval_s": INTERVAL_S})
    nominal, _ = fleet_simulate(FleetSimulateRequest(fleet=f, workload=_step(offset_s), seed=0), base_dir=tmp_path)

    # the same decisions: one scale-up from 1 to 2 replicas, after the step, in both
    assert [(e["from"], e["to"]) for e in shadow.scale_events] == [(1, 2)], shadow.scale_events
    assert [(e["from"], e["to"]) for e in nominal.scale_events] == [(1, 2)], nominal.scale_events
    step_s = offset_s + STEP_AT_S
    replayed, simulated = shadow.scale_events[0]["time_s"], nominal.scale_events[0]["time_s"]
    assert replayed > step_s and simulated > step_s
    # at the same time within the monitor's sampling: its rate counts the requests completed in
    # the window ending at a sample, so the step shows up to a window plus a request's E2E late,
    # and the autoscaler acts on its next tick (every 2 s)
    late_s = INTERVAL_S + (run.summary.e2e_s.p99 or 0.0) + 2.0
    assert simulated - 2.0 <= replayed <= simulated + late_s, (replayed, simulated, late_s)
