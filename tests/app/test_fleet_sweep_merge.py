"""``servecap sweep`` merges through sketches: a streamed point ships its sketches back, its seeds
merge into the sketch of their pooled requests (bucket counts equal), the merged percentiles (per
point, per pool, the whole sweep) are within the sketch's relative error of the exact ones over
the pooled requests (read back from each run's Parquet records), and serial and process-pool
sweeps give identical figures."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate
from servecap.app.fleet_sweep import (
    SweepPoint,
    merge_points,
    run_point,
    run_sweep,
    sweep_from_dict,
    sweep_points,
    with_overrides,
)
from servecap.cli.main import cli
from servecap.distributed import make_executor
from servecap.errors import ServecapError
from servecap.fleet.file_schema import fleet_from_dict
from servecap.results.sketch import QuantileSketch
from servecap.results.sketch_set import RunSketches
from servecap.workload import workload_from_dict

ALPHA = 0.01
POOL = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 4096}
FLEET = {
    "pools": [{"name": "main", **POOL, "replicas": 2}, {"name": "b", **POOL, "replicas": 1}],
    "router": "least-outstanding",
    "slo": {"ttft_ms": 60, "tpot_ms": 20},
}
WORKLOAD = {
    "arrival": {"kind": "poisson", "rate_per_s": 30},
    "prompt_tokens": {"kind": "lognormal", "median": 400, "sigma": 0.8, "max": 3000},
    "output_tokens": {"kind": "lognormal", "median": 60, "sigma": 0.7, "max": 400},
    "num_requests": 400,
}


def _sweep(**kw: Any) -> dict[str, Any]:
    return {"fleet": FLEET, "workload": WORKLOAD, "axes": {"workload.arrival.rate_per_s": [30, 60]}, "seeds": 2, **kw}


def _exact(point: SweepPoint, seed: int, path: Path) -> dict[str, np.ndarray]:
    """The same run as the sweep's task, every request's record written to ``path``."""
    request = FleetSimulateRequest(
        fleet=fleet_from_dict(point.fleet),
        workload=workload_from_dict(point.workload),
        seed=seed,
        percentiles="sketch",
    )
    fleet_simulate(request, records=path)
    t = pq.read_table(path)
    return {k: t.column(k).to_numpy(zero_copy_only=False) for k in ("ttft_s", "tpot_s", "pool", "error")}


def _pooled(parts: list[dict[str, np.ndarray]], key: str, pool: str | None = None) -> np.ndarray:
    v = np.concatenate([p[key] for p in parts]).astype(np.float64)
    if pool is not None:
        v = v[np.concatenate([p["pool"] for p in parts]) == pool]
    return v[np.isfinite(v)]


def _close(got: float | None, exact: float) -> bool:
    assert got is not None
    return abs(got - exact) <= ALPHA * abs(exact) + 1e-12


def test_seeds_merge_into_the_sketch_of_their_pooled_requests(tmp_path: Path) -> None:
    points = sweep_points(sweep_from_dict(_sweep()))
    assert [p.seeds for p in points] == [(0, 1), (0, 1)] and all(p.percentiles == "sketch" for p in points)
    run = run_sweep(points, make_executor("serial"))
    assert not run.errors
    every: list[dict[str, np.ndarray]] = []
    for p, r in zip(points, run.results, strict=True):
        assert r is not None and r.sketches is not None and r.seeds == (0, 1)
        parts = [_exact(p, s, tmp_path / f"{p.index}-{s}.parquet") for s in p.seeds]
        every += parts
        ttft = _pooled(parts, "ttft_s")
        merged = RunSketches.from_dict(r.sketches)
        # bucket counts of the merged seeds equal those of one sketch fed the pooled values
        fresh = QuantileSketch(ALPHA)
        fresh.add_array(ttft)
        got, want = merged.total.sketches["ttft_s"].to_dict(), fresh.to_dict()
        for key in ("positive", "negative", "zero_count", "count", "min", "max"):
            assert got[key] == want[key], key
        # the point's summary: percentiles from the merged sketch, counters added
        s = r.summary
        assert s.num_requests == 2 * WORKLOAD["num_requests"] and s.completed == len(ttft)
        assert r.row["requests"] == s.num_requests and r.row["seeds"] == [0, 1]
        assert sum(r.row["outcomes"].values()) == s.num_requests
        for q, key in ((50, "p50"), (90, "p90"), (99, "p99")):
            assert _close(getattr(s.ttft_s, key), float(np.percentile(ttft, q))), key
        assert _close(s.tpot_s.p99, float(np.percentile(_pooled(parts, "tpot_s"), 99)))
        # the engines' figures and the cost: combined over the seeds' own runs
        alone = [run_point(dataclasses.replace(p, seed=seed)) for seed in p.seeds]
        assert s.preemptions == sum(a.summary.preemptions for a in alone)
        assert s.max_queue_depth == max(a.summary.max_queue_depth or 0 for a in alone)
        assert s.duration_s == pytest.approx(sum(a.summary.duration_s for a in alone))
        assert r.row["cost_usd"] == pytest.approx(sum(a.row["cost_usd"] for a in alone))
        assert r.row["throughput_req_s"] == pytest.approx(s.completed / s.duration_s)
        by_seed = r.row["ttft_p99_s_by_seed"]
        assert len(by_seed) == 2 and by_seed[0] != by_seed[1]  # two seeds, two runs
        # SLO attainment over the pooled requests (counters add: it is exact)
        ttft_all = np.concatenate([q["ttft_s"] for q in parts]).astype(np.float64)
        tpot_all = np.concatenate([q["tpot_s"] for q in parts]).astype(np.float64)
        met = (ttft_all <= 0.060) & (np.isnan(tpot_all) | (tpot_all <= 0.020))
        assert s.slo_attainment == pytest.approx(float(met.mean()), abs=1e-12) and 0 < met.mean() < 1
    # the whole sweep and each pool: every point's seeds pooled
    m = merge_points(run)
    assert m is not None and m.points == 2 and set(m.by_pool) == {"main", "b"}
    assert m.summary.num_requests == 4 * WORKLOAD["num_requests"]
    ttft_all = _pooled(every, "ttft_s")
    for q, key in ((50, "p50"), (99, "p99")):
        assert _close(getattr(m.summary.ttft_s, key), float(np.percentile(ttft_all, q))), key
        for pool, ps in m.by_pool.items():
            assert _close(getattr(ps.ttft_s, key), float(np.percentile(_pooled(every, "ttft_s", pool), q)))
    assert sum(ps.num_requests for ps in m.by_pool.values()) == m.summary.completed


def test_serial_and_process_pool_give_identical_merged_results() -> None:
    points = sweep_points(sweep_from_dict(_sweep(workload={**WORKLOAD, "num_requests": 150})))
    serial = run_sweep(points, make_executor("serial"))
    ex = make_executor("process", workers=2)
    try:
        pool = run_sweep(points, ex)
    finally:
        ex.close()
    assert not serial.errors and not pool.errors
    for a, b in zip(serial.results, pool.results, strict=True):
        assert a is not None and b is not None
        assert a.row == b.row and a.summary == b.summary
        assert a.sketches == b.sketches
    ma, mb = merge_points(serial), merge_points(pool)
    assert ma is not None and ma == mb


def test_one_seed_streamed_ships_its_sketches_and_exact_points_do_not_merge() -> None:
    one = run_sweep(sweep_points(sweep_from_dict(_sweep(seeds=1, percentiles="sketch"))), make_executor("serial"))
    assert all(r is not None and r.sketches is not None and "seeds" not in r.row for r in one.results)
    assert merge_points(one) is not None
    exact = run_sweep(sweep_points(sweep_from_dict(_sweep(seeds=1))), make_executor("serial"))
    assert all(r is not None and r.sketches is None and len(r.records) == 400 for r in exact.results)
    assert merge_points(exact) is None  # exact points keep records, not sketches


def test_seeds_need_a_point_that_streams() -> None:
    with pytest.raises(ServecapError) as err:
        sweep_from_dict(_sweep(percentiles="exact"))
    assert err.value.field == "sweep.seeds" and err.value.value == 2
    with pytest.raises(ServecapError) as err2:
        with_overrides(sweep_from_dict(_sweep(seeds=1)), seeds=0)
    assert err2.value.field.startswith("sweep.seeds")
    many = {"workload.arrival.rate_per_s": list(range(1, 12))}
    with pytest.raises(ServecapError) as err_runs:  # 11 points x 1,000 seeds: more runs than a sweep takes
        sweep_points(sweep_from_dict(_sweep(seeds=1_000, axes=many)))
    assert err_runs.value.field == "sweep.seeds" and "runs" in err_runs.value.problem
    users = {**WORKLOAD, "users": {"count": 5, "think_time_s": 1.0}, "arrival": None}
    users.pop("arrival")
    with pytest.raises(ServecapError) as err3:
        sweep_points(sweep_from_dict(_sweep(workload=users, axes={"fleet.router": ["round-robin"]})))
    assert err3.value.field == "percentiles" and "sweep point 0" in err3.value.problem


def test_cli_seeds_store_each_points_merged_sketches(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    small = {**WORKLOAD, "num_requests": 120}
    path.write_text(yaml.safe_dump(_sweep(seeds=1, workload=small, label="seeds")), encoding="utf-8")
    db = tmp_path / "runs.db"
    args = ["sweep", str(path), "--executor", "serial", "--db", str(db), "--seeds", "3"]
    res = CliRunner().invoke(cli, [*args, "--json", "--html", str(tmp_path / "seeds.html")])
    assert res.exit_code == 0, res.output
    assert "each on 3 seeds merged through their sketches" in (tmp_path / "seeds.html").read_text(encoding="utf-8")
    d = json.loads(res.stdout)
    assert [p["seeds"] for p in d["points"]] == [[0, 1, 2], [0, 1, 2]]
    assert all(p["requests"] == 360 for p in d["points"])
    assert d["merged"]["points"] == 2 and d["merged"]["summary"]["num_requests"] == 720
    assert d["merged"]["summary"]["percentiles"] == {"method": "sketch", "relative_error": ALPHA}
    with sqlite3.connect(db) as con:
        stored = con.execute("SELECT sketch_json FROM sketches").fetchall()
    assert len(stored) == 2
    assert sorted(RunSketches.from_dict(json.loads(s)).total.num_requests for (s,) in stored) == [360, 360]
    page = tmp_path / "sweep.html"
    text = CliRunner().invoke(
        cli, ["sweep", str(path), "--executor", "serial", "--no-store", "--sketch", "--html", str(page)]
    )
    assert text.exit_code == 0, text.output
    assert "merged, all points (2 points, 240 requests)" in text.stdout and "merged, pool main" in text.stdout
    html = page.read_text(encoding="utf-8")
    assert "Every point merged" in html and "all points: 240 requests" in html and "pool b:" in html
