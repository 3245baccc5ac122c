"""Workloads: validation errors, draws, arrival statistics, traces, closed-loop users."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from servecap.errors import ServecapError
from servecap.workload import (
    ClosedLoopUsers,
    generate_arrays,
    generate_requests,
    load_trace,
    load_workload,
    workload_from_dict,
    workload_from_flags,
)

SAMPLE = Path(__file__).parents[2] / "src/servecap/workload/data/sample_trace.jsonl"


@pytest.mark.parametrize(
    ("raw", "field", "text"),
    [
        (
            {"arrival": {"kind": "poisson", "rate": 3}, "prompt_tokens": 1, "output_tokens": 1, "num_requests": 2},
            "workload.arrival",
            "did you mean: rate_per_s",
        ),
        (
            {"arrival": {"kind": "poison", "rate_per_s": 3}, "prompt_tokens": 1, "output_tokens": 1, "num_requests": 2},
            "workload.arrival.kind",
            "expected one of",
        ),
        (
            {
                "arrival": {"kind": "poisson", "rate_per_s": -1},
                "prompt_tokens": 1,
                "output_tokens": 1,
                "num_requests": 2,
            },
            "workload.arrival.rate_per_s",
            "greater than 0",
        ),
        (
            {"arrival": {"kind": "poisson", "rate_per_s": 1}, "prompt_tokens": 1, "output_tokens": 1},
            "workload",
            "num_requests",
        ),
        (
            {
                "users": {"count": 2},
                "arrival": {"kind": "poisson", "rate_per_s": 1},
                "prompt_tokens": 1,
                "output_tokens": 1,
                "num_requests": 2,
            },
            "workload",
            "exactly one",
        ),
        (
            {
                "arrival": {"kind": "poisson", "rate_per_s": 1},
                "prompt_tokens": {"kind": "uniform", "low": 9, "high": 2},
                "output_tokens": 1,
                "num_requests": 2,
            },
            "workload.prompt_tokens",
            "must be >= low",
        ),
    ],
)
def test_bad_workloads_name_the_field(raw: dict, field: str, text: str) -> None:
    with pytest.raises(ServecapError) as err:
        workload_from_dict(raw)
    assert err.value.field == field
    assert text in str(err.value)


def test_bad_files(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "w.yaml"
    bad_yaml.write_text("arrival: [unclosed\n")
    with pytest.raises(ServecapError, match="malformed YAML"):
        load_workload(bad_yaml)
    with pytest.raises(ServecapError, match="no such file"):
        load_workload(tmp_path / "missing.yaml")
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokns\n0,1,1\n")
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"arrival": {"kind": "trace", "path": "t.csv"}}))
    with pytest.raises(ServecapError, match="did you mean: output_tokens"):
        generate_requests(load_workload(w), np.random.default_rng(0))
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n0.5,-4,1\n")
    with pytest.raises(ServecapError) as err:
        generate_requests(load_workload(w), np.random.default_rng(0))
    assert err.value.field == "t.csv:3.prompt_tokens"


def test_same_seed_same_stream_and_draw_statistics() -> None:
    w = workload_from_dict(
        {
            "arrival": {"kind": "gamma", "rate_per_s": 10.0, "cv": 3.0},
            "prompt_tokens": {
                "kind": "mixture",
                "components": [{"weight": 9, "dist": 100}, {"weight": 1, "dist": 5000}],
            },
            "output_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.5},
            "num_requests": 20000,
        }
    )
    a = generate_requests(w, np.random.default_rng(1))
    assert a == generate_requests(w, np.random.default_rng(1))
    arr = generate_arrays(w, np.random.default_rng(1))
    gaps = np.diff(arr.arrival_s)
    assert np.mean(gaps) == pytest.approx(0.1, rel=0.05)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(3.0, rel=0.1)
    assert np.mean(arr.prompt_tokens == 5000) == pytest.approx(0.1, abs=0.01)
    assert np.median(arr.output_tokens) == pytest.approx(200, rel=0.03)


def test_constant_poisson_and_diurnal_arrivals() -> None:
    c = generate_arrays(workload_from_flags(rate=4.0, arrival="constant", num_requests=5), np.random.default_rng(0))
    np.testing.assert_allclose(c.arrival_s, [0.0, 0.25, 0.5, 0.75, 1.0])
    p = generate_arrays(workload_from_flags(rate=50.0, duration_s=200.0), np.random.default_rng(0))
    assert len(p) == pytest.approx(10000, rel=0.05) and p.arrival_s.max() < 200.0
    d = generate_arrays(
        workload_from_dict(
            {
                "arrival": {"kind": "diurnal", "rate_per_s": 10.0, "peak_to_trough": 4.0, "period_s": 1000.0},
                "prompt_tokens": 10,
                "output_tokens": 10,
                "duration_s": 1000.0,
            }
        ),
        np.random.default_rng(0),
    )
    near_peak = np.sum((d.arrival_s < 50) | (d.arrival_s > 950))
    near_trough = np.sum(np.abs(d.arrival_s - 500) < 50)
    assert near_peak / near_trough == pytest.approx(4.0, rel=0.2)


def test_empirical_from_file_and_prefix_groups(tmp_path: Path) -> None:
    (tmp_path / "lens.txt").write_text("10\n20\n30\n")
    (tmp_path / "w.yaml").write_text(
        "arrival: {kind: poisson, rate_per_s: 5}\n"
        "prompt_tokens: {kind: empirical, path: lens.txt}\n"
        "output_tokens: 7\n"
        "prefix: {groups: 3, tokens: 100, share: 0.5}\n"
        "num_requests: 2000\n"
    )
    reqs = generate_requests(load_workload(tmp_path / "w.yaml"), np.random.default_rng(0))
    with_prefix = [r for r in reqs if r.prefix_group is not None]
    assert len(with_prefix) / len(reqs) == pytest.approx(0.5, abs=0.05)
    assert {r.prompt_tokens for r in with_prefix} == {110, 120, 130}
    assert {r.prompt_tokens for r in reqs if r.prefix_group is None} == {10, 20, 30}


def test_sample_trace_replays() -> None:
    trace = load_trace(SAMPLE)
    assert len(trace) == 40
    w = workload_from_dict({"arrival": {"kind": "trace", "path": str(SAMPLE), "time_scale": 0.5}})
    reqs = generate_requests(w, np.random.default_rng(0))
    assert reqs[0].arrival_s == pytest.approx(trace.arrival_s[0] * 0.5)
    assert reqs[0].prefix_group == 0 and reqs[0].prefix_tokens == 256


def test_closed_loop_users_are_independent_of_completion_order() -> None:
    w = workload_from_dict(
        {
            "users": {"count": 3, "think_time_s": {"kind": "exponential", "mean": 5.0}, "turns": 3},
            "prompt_tokens": 100,
            "output_tokens": 50,
            "num_requests": 30,
        }
    )
    a = ClosedLoopUsers(w, np.random.default_rng(3))
    b = ClosedLoopUsers(w, np.random.default_rng(3))
    fa, fb = a.first_turns(), b.first_turns()
    assert fa == fb
    # serve the users in opposite orders: each user's turns are the same anyway
    na = [a.next_turn(u, 10.0) for u in (0, 1, 2)]
    nb = [b.next_turn(u, 10.0) for u in (2, 1, 0)][::-1]
    for x, y in zip(na, nb, strict=True):
        assert x is not None and y is not None
        assert (x.user_id, x.arrival_s, x.prompt_tokens, x.turn, x.history_tokens) == (
            y.user_id,
            y.arrival_s,
            y.prompt_tokens,
            y.turn,
            y.history_tokens,
        )
    assert na[0] is not None and na[0].turn == 2 and na[0].history_tokens == 150
    assert na[0].prompt_tokens == 250 and na[0].arrival_s > 10.0
