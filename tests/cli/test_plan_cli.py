"""`servecap plan/gpus/models/compare` in-process: output, JSON schema and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli, run

runner = CliRunner()

REQUIRED_KEYS = {
    "params_total",
    "params_active",
    "weights_bytes_per_gpu",
    "kv_bytes_per_token_per_gpu",
    "kv_budget_bytes_per_gpu",
    "num_gpu_blocks",
    "block_size",
    "kv_cache_tokens",
    "max_concurrency",
    "decode_step_time_s",
    "tpot_s",
    "ttft_s",
    "output_tokens_per_s_per_user",
    "output_tokens_per_s_total",
    "users_served",
    "usd_per_user_month",
    "usd_per_million_tokens",
    "bottleneck",
}


def _json(args: list[str]) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def test_default_plan_is_the_worked_example() -> None:
    data = _json(["plan", "--json"])
    assert set(data) >= REQUIRED_KEYS
    assert data["model"] == "meta-llama/Llama-3.1-70B" and data["gpu"] == "H200-SXM"
    assert data["weights_dtype"] == "fp8" and data["max_model_len"] == 8192
    assert data["kv_bytes_per_token_per_gpu"] == 327_680
    assert any("built-in example" in n for n in data["notes"])


def test_plan_kv_override_reproduces_vllm_log() -> None:
    """Llama-3.1-8B on an A100-40GB with vLLM's logged 5,691 blocks' worth of KV memory."""
    data = _json(
        [
            "plan",
            "-m",
            "meta-llama/Llama-3.1-8B",
            "-g",
            "a100-40gb",
            "--max-model-len",
            "8192",
            "--kv-cache-memory-bytes",
            str(5691 * 2 * 1024 * 1024),
            "--json",
        ]
    )
    assert data["num_gpu_blocks"] == 5691
    assert data["kv_cache_tokens"] == 91_056
    assert round(data["max_concurrency"], 2) == 11.12


def test_plan_human_output_has_sections() -> None:
    result = runner.invoke(cli, ["plan", "-m", "Qwen/Qwen3-8B", "-g", "L40S", "-l", "16384"])
    assert result.exit_code == 0, result.output
    for section in ("Memory per GPU", "KV cache", "Speed", "Users and cost", "Levers"):
        assert section in result.output


def test_gpu_name_spellings() -> None:
    for name in ("H100-SXM", "h100 sxm", "h100sxm", "H100"):
        assert _json(["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", name, "--json"])["gpu"] == "H100-SXM"


def test_local_config_json(tmp_path: Path) -> None:
    cfg = {
        "model_type": "llama",
        "hidden_size": 2048,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 8192,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    data = _json(["plan", "-m", str(path), "-g", "L4", "--json"])
    assert data["kv_bytes_per_token_per_gpu"] == 4 * 4 * 128 * 2 * 2


def test_gpus_and_models_list() -> None:
    gpus = _json(["gpus", "--json"])
    assert len(gpus) >= 20
    models = _json(["models", "--json"])
    assert len(models) >= 25
    assert all(m["params_total"] > 0 for m in models)


def test_compare_ranks_by_cost() -> None:
    data = _json(["compare", "-m", "meta-llama/Llama-3.1-8B", "--gpus", "H100,L40S,A100", "--counts", "1,2", "--json"])
    priced = [c for c in data["candidates"] if c["usd_per_user_month"] is not None and not c["problem"]]
    costs = [c["usd_per_user_month"] for c in priced]
    assert costs == sorted(costs) and len(costs) > 3


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["plan", "-m", "meta-llama/Llama-3.1-8", "-g", "H100"], "model='meta-llama/Llama-3.1-8': unknown model"),
        (["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H1000"], "gpu='H1000': unknown GPU (did you mean"),
        (["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--tp", "0"], "tp=0: must be positive"),
        (
            ["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--gpu-memory-utilization", "1.5"],
            "gpu_memory_utilization=1.5: must be at most 1",
        ),
        (["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--prompt-tokens", "-5"], "prompt_tokens=-5"),
        (["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--duty-cycle", "0"], "duty_cycle=0.0"),
        (["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--weights-dtype", "fp7"], "weights_dtype='fp7'"),
        (["plan", "-m", "meta-llama/Llama-3.1-70B", "-g", "L4"], "weights_bytes_per_gpu="),
        (
            [
                "plan",
                "-m",
                "meta-llama/Llama-3.1-8B",
                "-g",
                "H100",
                "--max-model-len",
                "2000000",
                "--rope-scaling",
                "16",
                "--kv-cache-memory-bytes",
                "1000000000",
            ],
            "max_model_len=2000000: one request needs",
        ),
        (["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--tp", "3"], "tp=3: must divide"),
        (["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--num-gpus", "4", "--tp", "2"], "num_gpus=4"),
    ],
)
def test_bad_input_is_one_line(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.argv", ["servecap", *args])
    with pytest.raises(SystemExit) as exc:
        run()
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert needle in err


def test_unknown_flag_exits_nonzero() -> None:
    result = runner.invoke(cli, ["plan", "--modle", "x"])
    assert result.exit_code != 0
    assert "No such option" in result.output


def test_replicas_for_peak_users_and_tokens() -> None:
    data = _json(
        [
            "plan",
            "-m",
            "meta-llama/Llama-3.1-8B",
            "-g",
            "H100",
            "-l",
            "8192",
            "--peak-users",
            "100000",
            "--peak-tok-s",
            "1000000",
            "--json",
        ]
    )
    assert data["replicas"] == -(-100000 // data["users_served"])
    assert data["replicas_for_tok_s"] == -(-1_000_000 // int(data["output_tokens_per_s_total"])) or data[
        "replicas_for_tok_s"
    ] == -(-1_000_000 // int(data["output_tokens_per_s_total"] + 1))


def test_missing_extra_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import servecap.cli.main as main

    def boom(*args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError("No module named 'numpy'", name="numpy")

    monkeypatch.setattr(main.cli, "main", boom)
    with pytest.raises(SystemExit) as exc:
        main.run()
    assert exc.value.code == 2
    assert "pip install 'servecap[sim]'" in capsys.readouterr().err
