"""`servecap plan --explain-step` and `--step-model` in-process."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli

runner = CliRunner()
LLAMA = ["plan", "-m", "meta-llama/Llama-3.1-70B", "-g", "H200", "-w", "fp8", "-k", "fp8"]


@pytest.mark.parametrize("step_model", ["roofline", "operations"])
def test_explain_step_json_adds_up(step_model: str) -> None:
    res = runner.invoke(cli, [*LLAMA, "--explain-step", "--explain-batch", "64", "--step-model", step_model, "--json"])
    assert res.exit_code == 0, res.output
    step = json.loads(res.output)["explain_step"]
    assert step["step_model"] == step_model and step["batch"] == 64
    assert sum(o["time_s"] for o in step["operations"]) == pytest.approx(step["total_s"], rel=1e-12)
    sources = {o["source"].split(":")[0] for o in step["operations"]}
    assert "roofline" in sources
    if step_model == "operations":
        assert "measured" in sources


def test_explain_step_table_names_each_source() -> None:
    res = runner.invoke(cli, [*LLAMA, "--explain-step", "--explain-batch", "64", "--step-model", "operations"])
    assert res.exit_code == 0, res.output
    assert "One decode step: batch 64" in res.output
    assert "gate_up_proj" in res.output and "the simulator's step" in res.output
    assert "from the roofline fallback" in res.output


@pytest.mark.parametrize(("flag", "value"), [("--step-model", "magic"), ("--explain-batch", "0")])
def test_bad_step_flags_are_one_line_errors(flag: str, value: str) -> None:
    res = runner.invoke(cli, [*LLAMA, "--explain-step", flag, value])
    assert res.exit_code == 2
    assert "Traceback" not in res.output and value in res.output


def test_simulate_runs_on_either_step_model() -> None:
    base = ["simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--rate", "5", "--num-requests", "60", "--json"]
    tpots = {}
    for step_model in ("roofline", "operations"):
        res = runner.invoke(cli, [*base, "--step-model", step_model])
        assert res.exit_code == 0, res.output
        tpots[step_model] = json.loads(res.output)["tpot_s"]["p50"]
    assert tpots["roofline"] > 0 and tpots["operations"] > 0
    assert tpots["roofline"] != tpots["operations"]  # the step model is not ignored
