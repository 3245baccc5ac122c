"""Issue 32: the smaller defects still open after the first pass, each with its test."""

from __future__ import annotations

from pathlib import Path

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
