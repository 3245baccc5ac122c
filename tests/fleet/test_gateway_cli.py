"""``gateway:`` in a fleet file through ``servecap fleet simulate``: the example, one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from servecap.cli.main import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = ["--num-requests", "300", "--prompt-tokens", "256", "--output-tokens", "32", "--seed", "1"]


def _run(tmp_path: Path, gateway: object, servecap_cli: Callable[..., Any]) -> tuple[int, str]:
    raw = yaml.safe_load((EXAMPLES / "fleet-gateway.yaml").read_text(encoding="utf-8"))
    raw["gateway"] = gateway
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    args = ["fleet", "simulate", "--fleet", str(path), "--rate", "60", *SMALL]
    proc = servecap_cli(*args)
    return proc.returncode, proc.stderr + proc.stdout


def test_example_runs_and_every_request_has_one_outcome(tmp_path: Path) -> None:
    wl = yaml.safe_load((EXAMPLES / "workload-tenants.yaml").read_text(encoding="utf-8"))
    wl["num_requests"] = 600
    path = tmp_path / "wl.yaml"
    path.write_text(yaml.safe_dump(wl), encoding="utf-8")
    args = ["fleet", "simulate", "--fleet", str(EXAMPLES / "fleet-gateway.yaml"), "--workload", str(path), "--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    g = d["gateway"]
    assert sum(g["arrivals_by_tenant"].values()) == 600
    for tenant, n in g["arrivals_by_tenant"].items():
        assert sum(g["outcomes_by_tenant"][tenant].values()) == n
    hits = sum(c.get("cache_hit_exact", 0) for c in g["outcomes_by_tenant"].values())
    assert hits > 0  # the FAQ class repeats questions
    assert sum(r["routed"] for r in d["replicas"]) + hits + sum(g["provider_requests"].values()) >= 600
    # the FAQ class goes to the small pool
    assert any(r["routed"] > 0 for r in d["replicas"] if r["pool"] == "small")


@pytest.mark.parametrize(
    ("gateway", "field"),
    [
        ({"rate_limits": {"tenants": {"acme": {"tpm": -5}}}}, "gateway.rate_limits.tenants.acme.tpm=-5"),
        ({"rate_limits": {"default": {"charge_at": "later"}}}, "gateway.rate_limits.default.charge_at"),
        ({"rate_limits": {"replicas": 0}}, "gateway.rate_limits.replicas=0"),
        ({"rate_limitz": {}}, "gateway"),
        (
            {"routing": {"kind": "class", "pools": {"faq": "tiny"}, "default": "large"}},
            "gateway.routing.pools.faq='tiny'",
        ),
        ({"overflow": [{"from_pool": "large", "to_pool": "large", "max_queue": 1}]}, "gateway.overflow"),
        ({"queue": {"capacity": 10, "max_wait_s": -1}}, "gateway.queue.max_wait_s=-1"),
        ({"providers": [{"name": "large", "ttft_median_s": 0.5}]}, "gateway.providers.name='large'"),
        ("yes", "gateway='yes'"),
    ],
)
def test_bad_gateway_settings_are_one_line(
    tmp_path: Path, gateway: object, field: str, servecap_cli: Callable[..., Any]
) -> None:
    code, out = _run(tmp_path, gateway, servecap_cli)
    assert code != 0
    assert field in out, out
    assert "Traceback" not in out
    assert len(out.strip().splitlines()) == 1, out
