"""Where the two layouts meet: every fleet feature x {co-located, P/D} x {exact, sketched} is
honoured by the one core (autoscaler policies, the router's choice, cold starts, failures and
retries, records, the gateway stage), and a sketched run's percentiles are within the sketch's
stated error of the exact run's on the same seed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fleet_helpers import open_loop, setup_8b

from servecap.catalog import resolve_model
from servecap.core.kv_transfer import kv_footprint
from servecap.errors import ServecapError
from servecap.fleet import INSTANT, ColdStart, FleetResult, FleetSpec, Phase, Pool, simulate_fleet
from servecap.fleet.layouts import make_fleet
from servecap.fleet.pd_spec import PdRouterSpec
from servecap.policy.autoscalers import AUTOSCALERS, AutoscalerSettings
from servecap.policy.gateway.config import gateway_from_dict
from servecap.results.sketch import DEFAULT_RELATIVE_ACCURACY
from servecap.specs.dtypes import kv_dtype_named
from servecap.workload import RequestArrays, generate_arrays

_FP = kv_footprint(resolve_model("meta-llama/Llama-3.1-8B"), 1, kv_dtype_named("bf16"), 3.35e12)
LAYOUTS = ("co-located", "pd")
METHODS = ("exact", "sketched")


def layout(kind: str, replicas: int = 2, router: str = "least-outstanding", **pool_kw: Any) -> FleetSpec:
    """Two pools' worth: one ``both`` pool of ``replicas`` or a prefill and a decode pool of
    ``replicas`` each; ``pool_kw`` goes to the pool that serves the answers (``both``/decode)."""
    base = Pool("main", setup_8b(), replicas=replicas, cold_start=INSTANT, kv=_FP)
    if kind == "co-located":
        return FleetSpec((replace(base, **pool_kw),), router=router)
    p = replace(base, name="p", role="prefill")
    d = replace(base, name="d", role="decode", **pool_kw)
    return FleetSpec((p, d), pd_router=PdRouterSpec(router, router))


def run(spec: FleetSpec, work: Any, method: str, **kw: Any) -> FleetResult:
    return simulate_fleet(spec, work, 0, stream=method == "sketched", **kw)


def arrays(n: int = 120, rate: float = 12.0, prompt: int = 512, output: int = 64) -> RequestArrays:
    return generate_arrays(open_loop(rate, n, prompt, output), np.random.default_rng(0))


def serving_pool(kind: str) -> str:
    return "main" if kind == "co-located" else "d"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("policy", list(AUTOSCALERS))
def test_every_autoscaler_policy_is_honoured(policy: str, kind: str, method: str) -> None:
    scaler = AutoscalerSettings(signal="inflight", target=2.0, interval_s=2.0, max_replicas=4, policy=policy)
    spec = layout(kind, replicas=1, autoscaler=scaler)
    fleet = make_fleet(spec, 0)
    assert type(fleet.autoscalers[-1]) is AUTOSCALERS[policy]
    res = run(spec, arrays(200, 30.0, 512, 128), method)
    assert res.scale_events and {pool for _, pool, _, _ in res.scale_events} == {serving_pool(kind)}
    assert res.summary.completed == 200


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", LAYOUTS)
def test_the_routers_choice_reaches_the_replicas(kind: str, method: str) -> None:
    res = run(layout(kind, router="round-robin"), arrays(), method)
    # round-robin: 120 requests split 60/60 on each side's two replicas
    assert [r.routed for r in res.replicas] == [60] * len(res.replicas)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", LAYOUTS)
def test_a_cold_start_is_the_pools_phases(kind: str, method: str) -> None:
    fixed = ColdStart(Phase(1.0), Phase(0.5), float("inf"), Phase(0.25), Phase(0.25))
    scaler = AutoscalerSettings(signal="inflight", target=2.0, interval_s=2.0, max_replicas=3)
    res = run(layout(kind, replicas=1, autoscaler=scaler, cold_start=fixed), arrays(200, 30.0, 512, 128), method)
    started = [r for r in res.replicas if r.requested_s > 0 and r.ready_s is not None]
    assert started and all(r.ready_s is not None and abs(r.ready_s - r.requested_s - 2.0) < 1e-9 for r in started)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", LAYOUTS)
def test_a_crashed_replicas_requests_are_retried_once_each(kind: str, method: str) -> None:
    res = run(layout(kind, crash_at_s=(3.0,)), arrays(), method)
    assert res.retried > 0
    assert sum(res.outcomes.values()) == 120 and res.outcomes["ok"] == 120
    assert sum(1 for r in res.replicas if r.state == "failed") == 1


@pytest.mark.parametrize("kind", LAYOUTS)
def test_records_on_both_sinks(kind: str, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    exact = run(layout(kind), arrays(), "exact")
    assert len(exact.columns) == 120 and exact.replica_of and min(exact.replica_of) >= 0
    path = tmp_path / "records.parquet"
    run(layout(kind), arrays(), "sketched", records=path)
    assert pq.read_table(path).num_rows == 120


@pytest.mark.parametrize("kind", LAYOUTS)
def test_sketched_percentiles_are_within_the_sketchs_error_of_exact(kind: str) -> None:
    work = arrays(200, 16.0, 1500, 100)
    exact, sketch = run(layout(kind), work, "exact"), run(layout(kind), work, "sketched")
    assert sketch.summary.percentile_method == "sketch" and exact.summary.percentile_method == "exact"
    assert sketch.summary.completed == exact.summary.completed
    # DDSketch: every quantile within α of the exact value at its rank (α for the sketch's own
    # value, another α between neighbouring ranks of the exact method's interpolation)
    tol = 2 * DEFAULT_RELATIVE_ACCURACY
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        a, b = getattr(exact.summary, name), getattr(sketch.summary, name)
        for q in ("p50", "p99"):
            x, y = getattr(a, q), getattr(b, q)
            assert abs(y - x) <= tol * x + 1e-9, (name, q, x, y)
    assert (exact.pd is None) == (sketch.pd is None) == (kind == "co-located")


@pytest.mark.parametrize("kind", LAYOUTS)
def test_the_gateway_stage_runs_exact_and_the_sketch_says_why_not(kind: str) -> None:
    gw = gateway_from_dict({"rate_limits": {"default": {"rpm": 300.0, "burst_requests": 5}}})
    spec = replace(layout(kind), gateway=gw)
    res = run(spec, arrays(100, 20.0, 256, 32), "exact")
    assert res.gateway is not None and res.outcomes.get("rate_limited_rpm", 0) > 0
    with pytest.raises(ServecapError, match="gateway stage keeps every request's record"):
        run(spec, arrays(100, 20.0, 256, 32), "sketched")


# the features that take a fleet *file*: sweeps (any executor), monitor replay

_POOL = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 4096, "cold_start": "instant"}


def fleet_file(kind: str) -> dict[str, Any]:
    if kind == "co-located":
        return {"pools": [{**_POOL, "name": "main", "replicas": 2}], "router": "round-robin"}
    return {
        "pools": [
            {**_POOL, "name": "p", "role": "prefill", "replicas": 2},
            {**_POOL, "name": "d", "role": "decode", "replicas": 2},
        ],
        "router": "round-robin",  # both sides (a P/D fleet file's router: key)
        "kv_link": {"kind": "infiniband"},
    }


def _sweep(kind: str, seeds: int = 1) -> list[Any]:
    from servecap.app.fleet_sweep import sweep_from_dict, sweep_points

    work = {"arrival": {"kind": "poisson", "rate_per_s": 8}, "prompt_tokens": 512, "output_tokens": 32}
    sweep = {
        "fleet": fleet_file(kind),
        "workload": {**work, "num_requests": 60},
        "axes": {"fleet.pools.0.replicas": [1, 2]},
        "seeds": seeds,
    }
    return sweep_points(sweep_from_dict(sweep))


@pytest.mark.parametrize("kind", LAYOUTS)
def test_a_sweep_runs_each_point_on_its_layout(kind: str) -> None:
    """Each sweep point is the fleet simulate run of its file (a P/D point simulates P/D: the
    same summary as fleet_simulate on the same P/D file, KV hand-off included)."""
    from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate
    from servecap.app.fleet_sweep import run_sweep
    from servecap.distributed import make_executor
    from servecap.fleet.file_schema import fleet_from_dict
    from servecap.workload import workload_from_dict

    points = _sweep(kind)
    swept = run_sweep(points, make_executor("serial"))
    assert not swept.errors
    for point, got in zip(points, swept.results, strict=True):
        assert got is not None and got.row["completed"] == 60
        direct = FleetSimulateRequest(fleet=fleet_from_dict(point.fleet), workload=workload_from_dict(point.workload))
        _, res = fleet_simulate(direct)
        assert (res.pd is not None) == (kind == "pd") and got.summary == res.summary


@pytest.fixture(scope="module")
def ray_executor() -> Any:
    """The Ray executor for both layouts, on the local Ray instance the tests share (local_ray,
    tests/conftest.py): its start is the slow part."""
    pytest.importorskip("ray")
    from servecap.distributed import make_executor

    ex = make_executor("ray", workers=2, max_retries=1)
    try:
        yield ex
    finally:
        ex.close()


@pytest.mark.ray
@pytest.mark.usefixtures("local_ray")
@pytest.mark.parametrize("kind", LAYOUTS)
def test_a_sweep_on_ray_matches_serial_on_each_layout(kind: str, ray_executor: Any) -> None:
    """Bounded: 2 points of 60 requests, two seeds streamed into sketches that Ray workers ship
    back; the same rows and sketches as in this process."""
    from servecap.app.fleet_sweep import run_sweep
    from servecap.distributed import make_executor

    points = _sweep(kind, seeds=2)
    serial = run_sweep(points, make_executor("serial"))
    remote = run_sweep(points, ray_executor)
    assert not remote.errors
    for a, b in zip(serial.results, remote.results, strict=True):
        assert a is not None and b is not None and a.sketches is not None
        assert (a.row, a.sketches) == (b.row, b.sketches)


@pytest.mark.parametrize("kind", LAYOUTS)
def test_monitor_replay_runs_a_pool_or_refuses_a_pd_fleet_in_one_line(kind: str, tmp_path: Path) -> None:
    """`monitor replay` shadows one pool under its recorded traffic: a co-located pool replays;
    a P/D fleet's pools serve every request together, so replaying one is refused in one line."""
    import yaml

    from servecap.app.monitor_replay import replay
    from servecap.monitor.history import load_history
    from servecap.monitor.store import MonitorStore
    from servecap.monitor.window import WindowStats

    db, path = tmp_path / "m.sqlite", tmp_path / "fleet.yaml"
    store = MonitorStore(db, ["http://a/metrics"])
    for i in range(1, 13):  # two minutes at 4 req/s, one replica, every 10 s
        for url in ("http://a/metrics", "fleet"):
            store.add_up(WindowStats(url, 10.0, 5, 0, 0.1, 4.0, 4.0 * 512, 4.0 * 32, 0.0, 0.0, {}), 10.0 * i)
    store.close()
    path.write_text(yaml.safe_dump(fleet_file(kind)), encoding="utf-8")
    history = load_history(db)
    if kind == "co-located":
        response, _ = replay(history, path)
        assert response.pool == "main" and len(response.minutes) == 2
        return
    for pool in (None, "p", "d"):
        with pytest.raises(ServecapError, match="P/D fleet's prefill and decode pools serve every request") as err:
            replay(history, path, pool=pool)
        assert "\n" not in str(err.value) and err.value.field == "fleet"
