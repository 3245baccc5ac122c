"""`--step-model auto`, the default: per model class, GPU vendor and engine the step model the
corpus's training rows favour (specs.step_choice), named in the answer."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli

runner = CliRunner()
DEEPSEEK = ["plan", "-m", "deepseek-ai/DeepSeek-V3", "-g", "H200", "--tp", "8", "-w", "fp8"]
LLAMA = ["plan", "-m", "meta-llama/Llama-3.1-70B", "-g", "H200", "-w", "fp8", "-k", "fp8"]
LLAMA_H100 = ["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100"]
MI300X = ["plan", "-m", "meta-llama/Llama-3.1-405B", "-g", "MI300X", "--tp", "8", "-w", "fp8"]


def _tpot(args: list[str]) -> tuple[float, dict[str, object]]:
    res = runner.invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    return out["tpot_s"], out


@pytest.mark.parametrize(
    ("args", "chosen"),
    # dense vLLM: by chip (specs.step_choice): the H200 rows favour the operations, H100's the roofline
    [(DEEPSEEK, "operations"), (MI300X, "operations"), (LLAMA, "operations"), (LLAMA_H100, "roofline")],
)
def test_the_default_is_the_chosen_step_model(args: list[str], chosen: str) -> None:
    default, out = _tpot(args)
    assert default == _tpot([*args, "--step-model", chosen])[0]
    other = "roofline" if chosen == "operations" else "operations"
    assert default != _tpot([*args, "--step-model", other])[0]
    notes = " ".join(out["notes"])  # type: ignore[arg-type]
    assert f"step times: auto: {chosen} for " in notes


def test_the_choice_is_named_in_the_interval_note_and_explain_step() -> None:
    res = runner.invoke(cli, [*DEEPSEEK, "--explain-step", "--explain-batch", "4", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    step = out["explain_step"]
    assert step["step_model"] == "operations"
    assert step["step_model_choice"].startswith("auto: operations for moe>100B/nvidia/vllm")
    assert sum(o["time_s"] for o in step["operations"]) == pytest.approx(step["total_s"], rel=1e-12)
    text = runner.invoke(cli, [*DEEPSEEK, "--explain-step", "--explain-batch", "4"]).output
    assert "step model auto: operations for moe>100B/nvidia/vllm" in text
    assert "users_served: 80% interval" in text and "step times: auto: operations" in text


def test_an_explicit_step_model_is_not_overridden() -> None:
    _, out = _tpot([*DEEPSEEK, "--step-model", "roofline"])
    assert not any("step times: auto" in n for n in out["notes"])  # type: ignore[union-attr]
