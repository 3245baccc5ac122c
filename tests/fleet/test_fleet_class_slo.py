"""fleet simulate scores each (tenant, class) against its own percentile SLO targets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate
from servecap.cli.main import cli
from servecap.fleet.class_slo import class_groups, class_targets
from servecap.fleet.file_schema import fleet_from_dict
from servecap.results.slo_report import metric_values
from servecap.workload import generate_arrays, workload_from_dict

WORKLOAD: dict[str, Any] = {
    "arrival": {"kind": "poisson", "rate_per_s": 8},
    "prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.5, "max": 2000},
    "output_tokens": {"kind": "lognormal", "median": 80, "sigma": 0.5, "max": 400},
    "num_requests": 800,
    "tenants": [
        {
            "name": "acme",
            "share": 3,
            "classes": [{"name": "chat", "slo": {"ttft_s": {"p99": 5.0}, "tpot_s": {"p90": 0.2}}}],
        },
        {"name": "tiny", "share": 1, "classes": [{"name": "api", "slo": {"ttft_s": {"p50": 0.001}}}]},
        {"name": "free", "share": 1},
    ],
}
FLEET = {"pools": [{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 4096, "replicas": 2}]}


def test_each_class_against_its_own_targets() -> None:
    wl = workload_from_dict(WORKLOAD)
    response, res = fleet_simulate(FleetSimulateRequest(fleet=fleet_from_dict(FLEET), workload=wl, seed=3))
    rows = {(r["group"], r["target"]): r for r in response.slo_by_class}
    assert set(rows) == {
        ("acme/chat", "p99 TTFT <= 5,000 ms"),
        ("acme/chat", "p90 TPOT <= 200 ms"),
        ("tiny/api", "p50 TTFT <= 1 ms"),
    }
    assert rows[("acme/chat", "p99 TTFT <= 5,000 ms")]["met"] and not rows[("tiny/api", "p50 TTFT <= 1 ms")]["met"]
    # recomputed by hand from the records: the class's own p50 TTFT
    arrays = generate_arrays(wl, np.random.default_rng(3))
    idx = class_groups(arrays, [("tiny", "api")])["tiny/api"]
    ttft = metric_values(res.columns, "ttft_s")[idx]
    assert rows[("tiny/api", "p50 TTFT <= 1 ms")]["observed_s"] == pytest.approx(float(np.percentile(ttft, 50)))
    assert rows[("tiny/api", "p50 TTFT <= 1 ms")]["requests"] == len(idx)


def test_classes_without_targets_take_the_default_or_are_left_out() -> None:
    wl = workload_from_dict(WORKLOAD)
    assert set(class_targets(wl)) == {("acme", "chat"), ("tiny", "api")}
    with_default = class_targets(wl, [("ttft_s", 99.0, 2.0)])
    assert with_default[("free", "default")] == (("ttft_s", 99.0, 2.0),)
    plain = workload_from_dict({k: v for k, v in WORKLOAD.items() if k != "tenants"})
    assert class_targets(plain) == {} and class_targets(plain, [("ttft_s", 99.0, 2.0)]) == {
        ("", ""): (("ttft_s", 99.0, 2.0),)
    }


def test_the_cli_prints_the_per_class_targets(tmp_path: Path) -> None:
    (tmp_path / "w.json").write_text(json.dumps(WORKLOAD))
    (tmp_path / "f.json").write_text(json.dumps(FLEET))
    args = ["fleet", "simulate", "--fleet", str(tmp_path / "f.json"), "--workload", str(tmp_path / "w.json")]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert "per-class SLO targets" in out.output and "p50 TTFT <= 1 ms" in out.output
