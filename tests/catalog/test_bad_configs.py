"""Malformed or incomplete config.json files and GPU files get one clear error naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servecap.catalog import load_gpu_file, lookup_gpu, resolve_model
from servecap.errors import ServecapError

GOOD: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 4096,
    "vocab_size": 1000,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
}


def _write(tmp_path: Path, cfg: object) -> str:
    path = tmp_path / "config.json"
    path.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    return str(path)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_key_value_heads": -2}, "config.json.num_key_value_heads"),
        ({"num_key_value_heads": 3}, "config.json.num_key_value_heads"),
        ({"hidden_size": "big"}, "config.json.hidden_size"),
        ({"num_hidden_layers": None}, "config.json.num_hidden_layers"),
        ({"vocab_size": 10**15}, "config.json.vocab_size"),
        ({"torch_dtype": "int3"}, "config.json.torch_dtype"),
        ({"model_type": None}, "config.json.model_type"),
        ({"layer_types": ["full_attention"]}, "config.json.layer_types"),
    ],
)
def test_bad_fields(tmp_path: Path, change: dict[str, Any], field: str) -> None:
    with pytest.raises(ServecapError) as err:
        resolve_model(_write(tmp_path, {**GOOD, **change}))
    assert err.value.field == field


def test_malformed_json(tmp_path: Path) -> None:
    with pytest.raises(ServecapError, match=r"malformed JSON"):
        resolve_model(_write(tmp_path, "{not json"))


def test_missing_file() -> None:
    with pytest.raises(ServecapError, match=r"no such file"):
        resolve_model("/nonexistent/dir/config.json")


def test_model_typo_suggests() -> None:
    with pytest.raises(ServecapError, match="did you mean"):
        resolve_model("meta-llama/Llama-3.1-70C")


def test_gpu_file_rows(tmp_path: Path) -> None:
    path = tmp_path / "gpus.toml"
    path.write_text(
        '[[gpu]]\nid = "MyGPU"\nname = "My GPU"\nvendor = "acme"\nmemory_gb = 64.0\n'
        "hbm_bandwidth_tb_s = 2.0\nbf16_dense_tflops = 500.0\ninterconnect_gb_s = 100.0\n"
        "host_link_gb_s = 64.0\nrent_usd_per_hour = 1.5\n"
    )
    extra = load_gpu_file(path)
    assert lookup_gpu("mygpu", extra).memory_gb == 64.0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('[[gpu]]\nid = "X"\nname = "X"\nvendor = "a"\nmemory_gb = -1.0\nhbm_bandwidth_tb_s = 1.0\n', "memory_gb"),
        (
            '[[gpu]]\nid = "X"\nname = "X"\nvendor = "a"\nmemory_gb = 1.0\nhbm_bandwith_tb_s = 1.0\n',
            "hbm_bandwith_tb_s",
        ),
        ("[[gpu]\n", "gpu_file"),
    ],
)
def test_bad_gpu_file(tmp_path: Path, body: str, field: str) -> None:
    path = tmp_path / "gpus.toml"
    path.write_text(body)
    with pytest.raises(ServecapError) as err:
        load_gpu_file(path)
    assert field in str(err.value) and "\n" not in str(err.value)
