"""Issue 32: the smaller defects still open after the first pass, each with its test."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from servecap.cli.main import cli

ROOT = Path(__file__).parents[2]


def test_export_pd_keeps_each_command_on_one_line() -> None:
    """`export pd` folded the long vLLM, SGLang and router commands across YAML lines (width 200)."""
    res = CliRunner().invoke(cli, ["export", "pd", str(ROOT / "examples/fleet-pd.yaml")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    data = yaml.safe_load(res.stdout)
    commands = [data["sglang_router"], data["vllm_router"]]
    for role in data["servers"].values():
        commands += [role["vllm"], role["sglang"]]
    for command in commands:
        assert any(line.endswith(command) for line in lines), command


def test_pd_replicas_are_measured_against_their_roles_capacity() -> None:
    """P/D replicas were shown "of ~32.8" req/s, the co-located replica's rate, for both roles."""
    import json

    args = ["fleet", "simulate", "--fleet", str(ROOT / "examples/fleet-pd.yaml"), "--rate", "5"]
    res = CliRunner().invoke(cli, [*args, "--num-requests", "200", "--json"])
    assert res.exit_code == 0, res.output
    caps = {r["pool"]: r["capacity_req_s"] for r in json.loads(res.stdout)["replicas"]}
    one = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--rate", "5"]
    both = CliRunner().invoke(cli, [*one, "--num-requests", "200", "--json"])
    co_located = json.loads(both.stdout)["replicas"][0]["capacity_req_s"]
    # prefill: 8,192-token steps of 1,024-token prompts; decode: pure decode steps, no prefill stalls
    assert caps["prefill"] != pytest.approx(co_located, rel=0.05)
    assert caps["decode"] > 2 * co_located
