"""A fleet run that streams into sketches agrees with the exact run on the same requests:
percentiles (p50 to p99.9) within the sketch's relative error, counts and SLO attainment equal;
per-request records round-trip through Parquet; the chunked source holds a bounded slice."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from fleet_helpers import fleet, open_loop, prefix_arrays

from servecap.cli.main import cli
from servecap.errors import ServecapError
from servecap.fleet import Pool, simulate_fleet
from servecap.fleet.stream_source import ChunkedSource, chunked, draw_chunks
from servecap.results.summary import RunSummary
from servecap.specs.perf import Slo
from servecap.workload import RequestArrays, generate_arrays, workload_from_dict

ALPHA = 0.01
CHAT: dict[str, Any] = {
    "prompt_tokens": {"kind": "lognormal", "median": 400, "sigma": 0.8, "max": 4000},
    "output_tokens": {"kind": "lognormal", "median": 120, "sigma": 0.7, "max": 1000},
}
MIX: dict[str, Any] = {
    **CHAT,
    "arrival": {"kind": "poisson", "rate_per_s": 40},
    "num_requests": 3000,
    "tenants": [
        {"name": "acme", "share": 3, "classes": [{"name": "chat"}, {"name": "batch"}]},
        {"name": "free", "share": 1},
    ],
}


def _chat(rate: float, n: int, seed: int = 0) -> RequestArrays:
    wl = workload_from_dict({**CHAT, "arrival": {"kind": "poisson", "rate_per_s": rate}, "num_requests": n})
    return generate_arrays(wl, np.random.default_rng(seed))


def _two_pools() -> Any:
    base = fleet(2, "least-outstanding", slo=Slo(0.3, 0.03))
    p = base.pools[0]
    return dataclasses.replace(base, pools=(p, Pool("b", p.setup, replicas=2, cold_start=p.cold_start)))


CASES = {
    "chat, least-outstanding": lambda: (fleet(4, "least-outstanding", slo=Slo(0.5, 0.05)), _chat(60.0, 5000)),
    "overloaded, round-robin": lambda: (fleet(2, "round-robin", slo=Slo(1.0, 0.05)), _chat(45.0, 3000, 1)),
    "prefixes, prefix-affinity": lambda: (
        fleet(3, "prefix-affinity", slo=Slo(0.2, 0.04)),
        prefix_arrays(4000, 50.0, 8, 1024, 128, 64),
    ),
    "two pools": lambda: (_two_pools(), _chat(50.0, 4000, 2)),
}


def _close(got: float | None, exact: float | None) -> bool:
    if exact is None:  # no values (a group's ITL: token gaps are pooled over the run only)
        return got is None
    assert got is not None
    return abs(got - exact) <= ALPHA * abs(exact) + 1e-12


def _check_summary(got: RunSummary, exact: RunSummary) -> None:
    for key in ("num_requests", "completed", "errors", "rejected", "preemptions", "prompt_tokens"):
        assert getattr(got, key) == getattr(exact, key), key
    if exact.slo_attainment is not None:
        assert got.slo_attainment is not None
        assert abs(got.slo_attainment - exact.slo_attainment) <= 0.001  # 0.1 percentage point (it is exact)
    assert got.throughput_req_s == pytest.approx(exact.throughput_req_s)
    for key in ("ttft_s", "tpot_s", "e2e_s", "queue_time_s", "itl_s"):
        g, e = getattr(got, key), getattr(exact, key)
        assert g.count == e.count and g.max == pytest.approx(e.max) and g.mean == pytest.approx(e.mean, nan_ok=True)
        for q in ("p50", "p90", "p95", "p99"):
            assert _close(getattr(g, q), getattr(e, q)), (key, q, getattr(g, q), getattr(e, q))


@pytest.mark.parametrize("case", list(CASES))
def test_streaming_agrees_with_exact_on_the_same_requests(case: str) -> None:
    spec, arrays = CASES[case]()
    exact = simulate_fleet(spec, arrays, 0)
    got = simulate_fleet(spec, arrays, 0, stream=True)
    assert got.summary.percentile_method == "sketch" and got.summary.relative_error == ALPHA
    assert got.outcomes == exact.outcomes and got.gpu_hours == pytest.approx(exact.gpu_hours)
    assert [r.routed for r in got.replicas] == [r.routed for r in exact.replicas]  # the same run
    _check_summary(got.summary, exact.summary)
    # p99.9 from the run's sketch against the exact records
    c = exact.columns
    ok = np.isfinite(c.end_s)
    sk = got.sketches
    assert sk is not None
    for metric, values in (("ttft_s", c.first_token_s - c.arrival_s), ("e2e_s", c.end_s - c.arrival_s)):
        assert _close(sk.total.sketches[metric].quantile(0.999), float(np.percentile(values[ok], 99.9)))
    if len(spec.pools) > 1:
        assert set(got.by_pool) == {"main", "b"}
        assert sum(s.num_requests for s in got.by_pool.values()) == exact.summary.completed
    # the rolling p99 TTFT of the time series, to the windows' granularity
    ts_got, ts_exact = np.array(got.timeseries.p99_ttft_s), np.array(exact.timeseries.p99_ttft_s)
    assert len(ts_got) == len(ts_exact)
    assert np.median(np.abs(ts_got - ts_exact) / np.maximum(ts_exact, 1e-9)) < 0.05


def test_tenants_and_classes_stream_per_group() -> None:
    wl = workload_from_dict(MIX)
    arrays = generate_arrays(wl, np.random.default_rng(5))
    spec = fleet(3, "least-outstanding", slo=Slo(0.5, 0.05))
    exact = simulate_fleet(spec, arrays, 5)
    got = simulate_fleet(spec, arrays, 5, stream=True)
    assert set(got.by_tenant) == set(exact.by_tenant) and set(got.by_class) == set(exact.by_class)
    for name in exact.by_tenant:
        _check_summary(got.by_tenant[name], exact.by_tenant[name])
    for name in exact.by_class:
        _check_summary(got.by_class[name], exact.by_class[name])


def test_records_round_trip_through_parquet(tmp_path: Path) -> None:
    spec = fleet(3, "least-outstanding", slo=Slo(0.5, 0.05))
    arrays = _chat(40.0, 2500, 3)
    path = tmp_path / "records.parquet"
    res = simulate_fleet(spec, arrays, 0, records=path)
    exact = simulate_fleet(spec, arrays, 0)
    table = pq.read_table(path)
    t = {name: np.asarray(table[name].to_pylist()) for name in table.column_names}
    order = np.argsort(t["request_id"])
    assert len(order) == len(arrays) == res.summary.num_requests
    assert t["request_id"][order].tolist() == list(range(len(arrays)))
    c = exact.columns
    np.testing.assert_allclose(t["arrival_s"][order], c.arrival_s)
    np.testing.assert_allclose(t["end_s"][order], c.end_s)
    np.testing.assert_allclose(t["ttft_s"][order], c.first_token_s - c.arrival_s)
    assert (t["error"] == "").sum() == exact.summary.completed
    assert set(t["pool"].tolist()) == {"main"}


def test_chunked_source_lets_go_of_taken_chunks() -> None:
    arrays = _chat(10.0, 1000)
    src = ChunkedSource(chunked(arrays, 100), len(arrays))
    ids = []
    for _ in range(350):
        ids.append(src.pop().request_id)
    assert ids == list(range(350)) and src.live_chunks == 4
    pos, rows = src.take(np.array(ids[:250], dtype=np.int64))
    np.testing.assert_array_equal(rows.arrival_s[np.argsort(pos)], arrays.arrival_s[:250])
    assert src.live_chunks == 2  # chunks 0 and 1 taken whole; 2 and 3 are not
    while src.next_arrival_s() != float("inf"):
        src.pop()
    assert src.issued == 1000


def test_drawn_chunks_are_deterministic_and_stop_where_asked() -> None:
    wl = open_loop(20.0, 1000)
    a = [c.arrival_s for c in draw_chunks(wl, np.random.default_rng(0), 300)]
    b = [c.arrival_s for c in draw_chunks(wl, np.random.default_rng(0), 300)]
    assert [len(x) for x in a] == [300, 300, 300, 100]
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    t = np.concatenate(a)
    assert np.all(np.diff(t) > 0) and t[-1] == pytest.approx(50.0, rel=0.15)
    day = workload_from_dict(
        {**CHAT, "arrival": {"kind": "diurnal", "rate_per_s": 5, "period_s": 100.0}, "duration_s": 300.0}
    )
    d = np.concatenate([c.arrival_s for c in draw_chunks(day, np.random.default_rng(1), 256)])
    assert d[-1] < 300.0 and len(d) == pytest.approx(1500, rel=0.1) and np.all(np.diff(d) > 0)


def test_streaming_refuses_gateways_and_closed_loops() -> None:
    users = workload_from_dict({**CHAT, "users": {"count": 5, "think_time_s": 1.0}, "num_requests": 20})
    with pytest.raises(ServecapError, match="closed-loop"):
        simulate_fleet(fleet(2), users, 0, stream=True)


def test_cli_sketch_records_and_exact(tmp_path: Path) -> None:
    args = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--max-model-len", "4096"]
    args += ["--replicas", "2", "--router", "least-outstanding", "--rate", "20", "--ttft-slo-ms", "500"]
    args += ["--num-requests", "600", "--prompt-tokens", "256", "--output-tokens", "32", "--json"]
    path = tmp_path / "r.parquet"
    res = CliRunner().invoke(cli, [*args, "--records", str(path)])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["summary"]["percentiles"] == {"method": "sketch", "relative_error": ALPHA}
    assert d["records_path"] == str(path) and pq.read_metadata(path).num_rows == 600
    assert len(d["replica_utilization"]["0"]) == len(d["timeseries"]["time_s"])
    exact = CliRunner().invoke(cli, [*args, "--exact"])
    assert json.loads(exact.stdout)["summary"]["percentiles"]["method"] == "exact"
    both = CliRunner().invoke(cli, [*args, "--exact", "--records", str(path)])
    assert isinstance(both.exception, ServecapError) and "records" in str(both.exception)


def test_a_saved_streaming_run_keeps_summary_and_sketches(tmp_path: Path) -> None:
    from servecap.results.sketch_set import RunSketches

    db = tmp_path / "runs.db"
    args = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--max-model-len", "4096"]
    args += ["--replicas", "2", "--rate", "20", "--num-requests", "300", "--prompt-tokens", "256"]
    args += ["--output-tokens", "32", "--sketch", "--save", "--db", str(db), "--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    ran = json.loads(res.stdout)
    shown = CliRunner().invoke(cli, ["runs", "show", "last", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["summary"]["ttft_s"]["p99"] == ran["summary"]["ttft_s"]["p99"]
    sk = CliRunner().invoke(cli, ["runs", "show", "last", "--sketches", "--json", "--db", str(db)])
    assert sk.exit_code == 0, sk.output
    back = RunSketches.from_dict(json.loads(sk.stdout))
    assert back.total.num_requests == 300
    assert back.total.summary(ran["summary"]["duration_s"]).ttft_s.p99 == ran["summary"]["ttft_s"]["p99"]
    # issue 32: without --json, percentile tables per group and window, not a million bucket counts
    table = CliRunner().invoke(cli, ["runs", "show", "last", "--sketches", "--db", str(db)])
    assert table.exit_code == 0, table.output
    p99 = ran["summary"]["ttft_s"]["p99"] * 1e3
    (whole,) = [ln for ln in table.stdout.splitlines() if ln.startswith("│ all ")]
    assert f"{p99:,.0f}" in whole and "300" in whole
    assert "first tokens" in table.stdout and "-15 s │" in table.stdout  # the windows
    assert len(table.stdout.splitlines()) < 40 and '"bins"' not in table.stdout


def test_two_seeds_merge_into_the_sketch_of_their_pooled_requests() -> None:
    spec = fleet(3, "least-outstanding", slo=Slo(0.5, 0.05))
    runs = [
        (simulate_fleet(spec, a, 0, stream=True), simulate_fleet(spec, a, 0))
        for a in (_chat(40, 2000, 7), _chat(40, 2000, 8))
    ]
    pooled = runs[0][0].sketches
    other = runs[1][0].sketches
    assert pooled is not None and other is not None
    pooled.merge(other)
    cols = [exact.columns for _, exact in runs]
    ttft = np.concatenate([c.first_token_s - c.arrival_s for c in cols])
    ok = np.isfinite(ttft)
    merged = pooled.total.summary(1.0)
    assert merged.num_requests == 4000 and merged.completed == int(ok.sum())
    for q, key in ((50, "p50"), (90, "p90"), (99, "p99")):
        assert _close(getattr(merged.ttft_s, key), float(np.percentile(ttft[ok], q)))
    assert merged.slo_attainment == pytest.approx(
        sum(exact.summary.slo_attainment or 0.0 for _, exact in runs) / 2, abs=1e-12
    )


def test_above_the_threshold_fleet_simulate_streams_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import servecap.app.fleet_simulate as app_fleet

    monkeypatch.setattr(app_fleet, "STREAM_ABOVE_REQUESTS", 250)
    args = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--max-model-len", "4096"]
    args += ["--replicas", "2", "--rate", "20", "--prompt-tokens", "256", "--output-tokens", "32", "--json"]
    big = json.loads(CliRunner().invoke(cli, [*args, "--num-requests", "300"]).stdout)
    assert big["summary"]["percentiles"]["method"] == "sketch"
    assert any("above 250" in n for n in big["notes"])
    small = json.loads(CliRunner().invoke(cli, [*args, "--num-requests", "200"]).stdout)
    assert small["summary"]["percentiles"]["method"] == "exact"
    exact = json.loads(CliRunner().invoke(cli, [*args, "--num-requests", "300", "--exact"]).stdout)
    assert exact["summary"]["percentiles"]["method"] == "exact"
