"""The gateway's ``window: fixed`` limit in the fleet simulator, on the fleet and arrivals of the
LiteLLM proxy check (tests/integration/test_litellm_gateway.py, which measures the same counts
through the real proxy): 8 requests per 5 s window, a primary pool that runs 2 and queues 2, and a
fallback pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate
from servecap.fleet.file_schema import fleet_from_dict
from servecap.workload import WorkloadSpec

POOL = {
    "model": "meta-llama/Llama-3.1-8B",
    "gpu": "H100",
    "max_model_len": 8192,
    "replicas": 1,
    "cold_start": "instant",
}
ARRIVALS_S = [0.04 * i for i in range(10)] + [2.5, 2.55, 2.6] + [8.0 + 0.04 * i for i in range(10)]


def _fleet(limit: dict[str, Any]) -> dict[str, Any]:
    return {
        "pools": [{"name": "primary", **POOL, "max_num_seqs": 2, "max_waiting": 2}, {"name": "fallback", **POOL}],
        "router": "random",
        "on_failure": "fail",
        "gateway": {
            "rate_limits": {"default": limit},
            "routing": {"kind": "class", "default": "primary"},
            "fallback": {"chains": {"primary": ["fallback"]}, "max_retries": 1},
        },
    }


def _run(fleet: dict[str, Any], tmp_path: Path) -> tuple[dict[str, int], dict[int, str | None]]:
    trace = tmp_path / "arrivals.jsonl"
    trace.write_text(
        "".join(json.dumps({"arrival_s": t, "prompt_tokens": 32, "output_tokens": 320}) + "\n" for t in ARRIVALS_S)
    )
    wl = WorkloadSpec.model_validate(
        {"arrival": {"kind": "trace", "path": str(trace)}, "num_requests": len(ARRIVALS_S)}
    )
    resp, res = fleet_simulate(FleetSimulateRequest(fleet=fleet_from_dict(fleet), workload=wl))
    assert resp.gateway is not None
    counts = {"rate_limited": 0, "fell_back": 0}
    for per_tenant in resp.gateway.outcomes_by_tenant.values():
        counts["rate_limited"] += per_tenant.get("rate_limited_rpm", 0)
    for decisions in resp.gateway.decisions_by_tenant.values():
        counts["fell_back"] += decisions.get("fell_back", 0)
    for r in resp.replicas:
        counts[r.pool] = counts.get(r.pool, 0) + r.completed
    return counts, {r.request_id: r.error for r in res.records()}


def test_fixed_window_refuses_per_window_and_the_primary_overflow_falls_back(tmp_path: Path) -> None:
    counts, errors = _run(_fleet({"rpm": 8, "window": "fixed", "window_s": 5}), tmp_path)
    assert counts == {"rate_limited": 7, "fell_back": 8, "primary": 8, "fallback": 8}
    # the last 2 of each burst and all 3 in between are refused; a new window at 8 s passes 8 again
    refused = sorted(i for i, e in errors.items() if e == "rate_limited_rpm")
    assert refused == [8, 9, 10, 11, 12, 21, 22]


def test_a_token_bucket_of_the_same_rpm_refuses_twice_as_many(tmp_path: Path) -> None:
    counts, _ = _run(_fleet({"rpm": 8}), tmp_path)
    assert counts["rate_limited"] == 14  # 8 per minute: one request's refill by 8 s, no new window
    assert counts["primary"] + counts["fallback"] == len(ARRIVALS_S) - 14
