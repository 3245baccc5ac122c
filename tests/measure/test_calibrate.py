"""Calibration: emulator runs of a known configuration give back its coefficients."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from servecap.calibration import load_calibration
from servecap.cli.main import cli
from servecap.cli.options import DeploymentFlags, deployment_from_options
from servecap.core.plan import plan
from servecap.emulator.server import engine_state
from servecap.errors import ServecapError
from servecap.measure.asgi_stream import AsgiClient
from servecap.measure.bench import run_bench
from servecap.measure.calibrate import (
    StepSample,
    Timeline,
    calibrate_runs,
    fit_coefficients,
    step_samples,
    timelines,
)
from servecap.measure.loadgen import LoadConfig
from servecap.results.measured import MeasuredRequest
from servecap.results.store import RunStore
from servecap.specs.perf import Efficiency
from servecap.workload import WorkloadSpec

TRUE = Efficiency(bandwidth_efficiency=0.7, compute_efficiency=0.5, step_overhead_s=0.003, prefill_s_per_token=4e-6)
DEPLOYMENT: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "gpu": "H100",
    "max_model_len": 4096,
    "enable_prefix_caching": True,
}
SPEC = WorkloadSpec.model_validate(
    {
        "arrival": {"kind": "poisson", "rate_per_s": 20.0},
        "prompt_tokens": {"kind": "uniform", "low": 16, "high": 1500},
        "output_tokens": {"kind": "uniform", "low": 16, "high": 64},
        "num_requests": 60,
    }
)


@pytest.fixture(scope="module")
def emulated_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One bench run (real load generator, real engine, in-process) stored like `servecap bench`."""
    import asyncio

    dep, _ = deployment_from_options(DeploymentFlags(model=DEPLOYMENT["model"], gpu="H100", max_model_len=4096))
    state = engine_state(plan(dep, efficiency=TRUE), model_name="m")
    cfg = LoadConfig(base_url="http://emulator", model="m", extra_body={"servecap_timing": True})

    async def go() -> Any:
        try:
            return await run_bench(cfg, SPEC, seed=1, transport=AsgiClient(state.driver_app()))
        finally:
            await state.driver.stop()

    out = asyncio.run(go())
    assert out.errors == {}
    db = tmp_path_factory.mktemp("cal") / "runs.sqlite"
    settings = {
        "workload": SPEC.model_dump(mode="json", by_alias=True),
        "seed": 1,
        "concurrency": None,
        "warmup_s": 0.0,
        "cooldown_s": 0.0,
        "slo": None,
        "deployment": DEPLOYMENT,
    }
    RunStore(db).save_measured(
        run_id="cal-1",
        url="http://emulator",
        model="m",
        mode="open",
        settings=settings,
        requests=out.requests(),
        summary=out.summary,
        wall_duration_s=out.result.wall_duration_s,
    )
    return db, "cal-1"


def test_calibrate_cli_recovers_the_emulators_coefficients(emulated_run: tuple[Path, str], tmp_path: Path) -> None:
    db, run = emulated_run
    out = tmp_path / "cal.json"
    res = CliRunner().invoke(cli, ["calibrate", run, "--db", str(db), "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["source"] == "server" and info["num_samples"] > 100 and info["compute_bound"] > 5
    cal = load_calibration(out)
    assert (cal.model, cal.gpu, cal.tp) == ("meta-llama/Llama-3.1-8B", "H100-SXM", 1)
    got = cal.efficiency()
    for name in ("bandwidth_efficiency", "compute_efficiency", "step_overhead_s", "prefill_s_per_token"):
        assert getattr(got, name) == pytest.approx(getattr(TRUE, name), rel=0.05), name
    # the file is what plan accepts
    res = CliRunner().invoke(
        cli, ["plan", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--calibration", str(out), "--json"]
    )
    assert res.exit_code == 0, res.output


def _as_a_client_saw(requests: list[MeasuredRequest], delay_s: float, seed: int) -> list[MeasuredRequest]:
    """The server's own token times as a client would record them: each arrival late by a delay
    drawn uniformly up to ``delay_s`` (the network's and the client's jitter, ~1 ms per
    docs/measure.md), the server's receipt as the send time, and no server times left."""
    rng = np.random.default_rng(seed)
    out = []
    for r in requests:
        st = r.server_timing or {}
        times = np.asarray(st["token_times_s"], dtype=float)
        late = np.maximum.accumulate(times + rng.uniform(0.0, delay_s, len(times)))
        out.append(
            dataclasses.replace(
                r, token_times_s=tuple(late.tolist()), sent_s=float(st["received_s"]), server_timing=None
            )
        )
    return out


def test_client_clock_fit_is_close(emulated_run: tuple[Path, str]) -> None:
    """The client's arrival times (what a real server gives) go through the same fit. The
    in-process client's own times carry this machine's load (on a busy 2-core machine, tens of
    milliseconds), so the accuracy is checked on the server's exact schedule seen through a
    client's jitter of a known size: 1 ms, as documented; the fit is good to a few percent and its
    residual is below the jitter."""
    db, run = emulated_run
    dep, _ = deployment_from_options(DeploymentFlags(model=DEPLOYMENT["model"], gpu="H100", max_model_len=4096))
    requests = RunStore(db).get_requests(run)
    kwargs: dict[str, Any] = {"source": "client", "max_num_batched_tokens": dep.engine.max_num_batched_tokens}
    # the run's real client times are what the client clock reads: a time per chunk, at most one
    # per token the server reports (tokens can share a chunk when the client lags; their spread
    # is this machine's load, not the fit's: no accuracy check on them)
    lines, used = timelines(requests, "client")
    assert used == "client" and len(lines) == len(requests) == 60
    for line, r in zip(lines, requests, strict=True):
        assert line.token_times_s == r.token_times_s
        assert 0 < len(line.token_times_s) <= len((r.server_timing or {})["token_times_s"])
    # the same steps seen through 1 ms of client jitter
    delay_s = 1e-3
    fit, stats, used = calibrate_runs([_as_a_client_saw(requests, delay_s, seed=0)], plan(dep).step, **kwargs)
    assert used == "client" and stats[0].usable > 100
    assert fit.efficiency.bandwidth_efficiency == pytest.approx(TRUE.bandwidth_efficiency, rel=0.1)
    assert fit.efficiency.compute_efficiency == pytest.approx(TRUE.compute_efficiency, rel=0.1)
    assert fit.num_compute_bound > 0 and fit.rmse_s < delay_s


def test_accuracy_cli_side_by_side(emulated_run: tuple[Path, str], tmp_path: Path) -> None:
    db, run = emulated_run
    cal = tmp_path / "true.json"
    cal.write_text(
        json.dumps(
            {
                "model": "meta-llama/Llama-3.1-8B",
                "gpu": "H100",
                "coefficients": {
                    "bandwidth_efficiency": 0.7,
                    "compute_efficiency": 0.5,
                    "step_overhead_s": 0.003,
                    "prefill_s_per_token": 4e-6,
                },
            }
        )
    )
    res = CliRunner().invoke(cli, ["accuracy", run, "--db", str(db), "--calibration", str(cal), "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["metric"]: r for r in json.loads(res.output)["metrics"]}
    assert rows["completed"]["measured"] == rows["completed"]["predicted"] == 60
    # same engine, same coefficients, same request stream: decode timing agrees closely
    assert abs(rows["tpot_s.p50"]["error"]) < 0.10
    assert abs(rows["e2e_s.p50"]["error"]) < 0.15
    human = CliRunner().invoke(cli, ["accuracy", run, "--db", str(db)])
    assert human.exit_code == 0 and "measured vs predicted" in human.output


def _sample(m: float, c: float, p: int, eff: Efficiency) -> StepSample:
    dur = (
        max(m / eff.bandwidth_efficiency_on(""), c / eff.compute_efficiency_at("bf16"))
        + eff.step_overhead_s
        + eff.prefill_s_per_token * p
    )
    return StepSample(0.0, dur, m, c, 0.0, p, p + 1, 1)


def test_fit_on_hand_made_steps() -> None:
    eff = Efficiency(bandwidth_efficiency=0.8, compute_efficiency=0.4, step_overhead_s=0.002, prefill_s_per_token=1e-6)
    # memory-bound decodes (5-6 ms at full bandwidth), small and large prefills
    steps = [_sample(0.005 + 0.0002 * i, 0.0001 * i, 10 * i, eff) for i in range(8)]
    steps += [_sample(0.005, 0.004 * i, 500 * i, eff) for i in range(2, 8)]
    fit = fit_coefficients(steps)
    assert fit.fixed == () and fit.r2 == pytest.approx(1.0)
    for name in ("bandwidth_efficiency", "compute_efficiency", "step_overhead_s", "prefill_s_per_token"):
        assert getattr(fit.efficiency, name) == pytest.approx(getattr(eff, name), rel=1e-6), name


def test_noisy_collinear_prefill_cost_is_not_fitted() -> None:
    """Compute time grows with the prompt like the per-token prefill cost does: with 0.5 ms of
    timing noise the two cannot be told apart, so the prefill cost keeps its default (reported)
    instead of trading off against compute efficiency, which comes back within 5%."""
    rng = np.random.default_rng(3)
    eff = Efficiency(bandwidth_efficiency=0.8, compute_efficiency=0.6, step_overhead_s=0.002)
    steps = [_sample(0.005 + 0.0002 * (i % 10), 0.0001, 0, eff) for i in range(400)]
    steps += [_sample(0.005, 2e-5 * p + 1e-10 * p * p, p, eff) for p in range(1000, 8000, 20)]  # ~ prompt
    noisy = [
        StepSample(
            x.end_s,
            x.duration_s + float(rng.normal(0, 5e-4)),
            x.memory_s,
            x.compute_s,
            x.comm_s,
            x.prompt_tokens,
            x.num_tokens,
            x.num_decodes,
        )
        for x in steps
    ]
    fit = fit_coefficients(noisy)
    assert "prefill_s_per_token" in fit.fixed and fit.efficiency.prefill_s_per_token == 0.0
    assert fit.efficiency.compute_efficiency == pytest.approx(0.6, rel=0.05)
    assert fit.efficiency.bandwidth_efficiency == pytest.approx(0.8, rel=0.05)


def test_fit_names_what_the_data_cannot_determine() -> None:
    eff = Efficiency(bandwidth_efficiency=0.8, step_overhead_s=0.002)
    steps = [_sample(0.005 + 0.0003 * i, 0.0, 0, eff) for i in range(6)]  # decode only
    fit = fit_coefficients(steps, fit_prefill=False)
    assert "compute_efficiency" in fit.fixed
    # left at its start: the default for BF16 GEMMs (Efficiency() leaves it to the dtype)
    assert fit.efficiency.compute_efficiency == Efficiency().compute_efficiency_at("bf16")
    assert fit.efficiency.bandwidth_efficiency == pytest.approx(0.8)
    with pytest.raises(ServecapError, match="too few usable steps"):
        fit_coefficients(steps[:3])


def test_steps_from_token_times() -> None:
    dep, _ = deployment_from_options(DeploymentFlags(model="meta-llama/Llama-3.1-8B", gpu="H100", max_model_len=4096))
    cost = plan(dep).step
    # request 0 decodes at 10, 20, 30 ms; request 1 is prefilled in the step ending at 30 ms
    # (first token) and decodes at 40 ms; request 2 has a prompt too big for one step
    lines = [
        Timeline(100, 0, 0.0, (0.010, 0.020, 0.030)),
        Timeline(50, 16, 0.015, (0.030, 0.040)),
        Timeline(9000, 0, 0.025, (0.0601,)),
    ]
    samples, stats = step_samples(lines, cost, max_num_batched_tokens=8192, gap_s=1e-3)
    assert stats.steps == 5
    # 20 ms: decode of request 0 (context 101); 30 ms: its decode + 34-token prefill of request 1;
    # 40 ms: request 1 decodes alone but the chunked prefill of request 2 (sent at 25 ms) taints it
    assert [round(s.end_s, 3) for s in samples] == [0.020, 0.030]
    assert [s.duration_s for s in samples] == pytest.approx([0.010, 0.010])
    assert [(s.num_decodes, s.prompt_tokens) for s in samples] == [(1, 0), (1, 34)]
    assert samples[1].memory_s > samples[0].memory_s
    assert np.isfinite(samples[0].compute_s)


def test_calibration_request_overhead_default_and_bad_value(tmp_path: Path) -> None:
    """A file without ``request_overhead_s`` takes the default (calibrate fits step times, not
    the server's per-request cost); a negative one is refused naming the field."""
    from servecap.specs.perf import DEFAULT_REQUEST_OVERHEAD_S

    base = {
        "model": "meta-llama/Llama-3.1-8B",
        "gpu": "H100",
        "coefficients": {"bandwidth_efficiency": 0.7, "compute_efficiency": 0.5, "step_overhead_s": 0.002},
    }
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(base))
    assert load_calibration(path).efficiency().request_overhead_s == DEFAULT_REQUEST_OVERHEAD_S
    base["coefficients"]["request_overhead_s"] = 0.011  # type: ignore[index]
    path.write_text(json.dumps(base))
    assert load_calibration(path).efficiency().request_overhead_s == 0.011
    base["coefficients"]["request_overhead_s"] = -1  # type: ignore[index]
    path.write_text(json.dumps(base))
    with pytest.raises(ServecapError, match=r"calibration\.coefficients\.request_overhead_s=-1"):
        load_calibration(path)


def _copy_db(db: Path, tmp_path: Path) -> Path:
    import shutil

    out = tmp_path / "runs.sqlite"
    shutil.copy(db, out)
    return out


def test_last_is_the_last_usable_measured_run(emulated_run: tuple[Path, str], tmp_path: Path) -> None:
    """Defect 10: `last` picked a newer simulated or failed run; now it skips them and says so."""
    from dataclasses import replace

    db, run = emulated_run
    db = _copy_db(db, tmp_path)
    store = RunStore(db)
    stored = store.get_run(run)
    store.save_simulated(
        run_id="sim-2", model="m", mode="open", settings={}, records=[], summary=stored.summary, created_at="2999-01-01"
    )
    store.save_measured(
        run_id="failed-3",
        url="http://x",
        model="m",
        mode="open",
        settings={"deployment": DEPLOYMENT},
        requests=[],
        summary=replace(stored.summary, completed=0),
        wall_duration_s=1.0,
        interrupted=True,
        created_at="2999-01-02",
    )
    res = CliRunner().invoke(cli, ["accuracy", "last", "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["run_id"] == run
    (note,) = [n for n in data["notes"] if "skipped newer" in n]
    assert "failed-3 (no request completed (interrupted))" in note and "sim-2 (a simulated run)" in note
    res = CliRunner().invoke(cli, ["calibrate", "last", "--db", str(db), "-o", str(tmp_path / "c.json"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "c.json").read_text())["fit"]["runs"] == [run]  # fitted on the usable run
    # nothing usable: one error naming what was skipped
    empty = tmp_path / "empty.sqlite"
    RunStore(empty).save_simulated(
        run_id="only-sim", model="m", mode="open", settings={}, records=[], summary=stored.summary
    )
    res = CliRunner().invoke(cli, ["accuracy", "last", "--db", str(empty)])
    assert res.exit_code != 0 and "only-sim (a simulated run)" in str(res.exception)


def test_accuracy_on_an_interrupted_run_cuts_the_simulation(emulated_run: tuple[Path, str], tmp_path: Path) -> None:
    """Defect 14: an interrupted run compared its completed requests with the whole simulation
    ("completed 27 vs 300"); now the simulation stops at the same time."""
    db, run = emulated_run
    db = _copy_db(db, tmp_path)
    store = RunStore(db)
    stored = store.get_run(run)
    requests = store.get_requests(run)
    cut = 1.5  # seconds into the run
    kept = [r for r in requests if r.scheduled_s <= cut]
    from servecap.measure.records import to_records
    from servecap.results import summarize

    done = [r for r in to_records(kept) if r.end_s is not None and r.end_s <= cut]
    store.save_measured(
        run_id="cut-1",
        url="http://emulator",
        model="m",
        mode="open",
        settings=stored.settings,
        requests=[r for r in kept if r.end_s is not None and r.end_s <= cut],
        summary=summarize(done, duration_s=cut),
        wall_duration_s=cut,
        interrupted=True,
    )
    cal = tmp_path / "true.json"
    coefficients = {"bandwidth_efficiency": 0.7, "compute_efficiency": 0.5, "step_overhead_s": 0.003}
    coefficients["prefill_s_per_token"] = 4e-6
    cal.write_text(json.dumps({"model": DEPLOYMENT["model"], "gpu": "H100", "coefficients": coefficients}))
    res = CliRunner().invoke(cli, ["accuracy", "cut-1", "--db", str(db), "--calibration", str(cal), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    rows = {r["metric"]: r for r in out["metrics"]}
    measured, predicted = rows["completed"]["measured"], rows["completed"]["predicted"]
    assert measured == len(done) < 60
    assert abs(predicted - measured) <= max(3, 0.15 * measured)  # not 60
    assert any("cut at the same time" in n for n in out["notes"])
