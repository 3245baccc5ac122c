"""The corpus files: every file validates, covers what the issue asks, and bad files fail in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecap.catalog.gpus import lookup_gpu
from servecap.catalog.models import resolve_model
from servecap.errors import ServecapError
from servecap.validation.corpus import data_files, load_corpus, load_file, select, split_of
from servecap.validation.schema import Measured

GOOD_ROW = """
[source]
name = "example"
title = "t"
url = "https://example.org/page"
date = "2025-01-01"
engine = "vLLM"
engine_version = "0.9.0"
kind = "test"

[[rows]]
id = "r1"
gpu = "H100-SXM"
model = "meta-llama/Llama-3.1-8B"
weights_dtype = "bf16"
kv_cache_dtype = "bf16"
where = "table 1"
[rows.workload]
prompt_tokens = 128
output_tokens = 128
mode = "closed"
concurrency = 1
num_requests = 2
[[rows.measured]]
metric = "tpot"
statistic = "median"
value = 7.0
unit = "ms"
printed = "7.0"
"""


ROOT = Path(__file__).resolve().parents[2]


def test_corpus_size_and_coverage() -> None:
    rows = load_corpus()
    assert len(rows) >= 60
    assert len({r.source.name for r in rows}) >= 8
    assert len(data_files()) == len({r.source.name for r in rows})  # one file per source
    gpus = {r.row.gpu for r in rows}
    assert {"H100-SXM", "H200-SXM", "B200", "MI300X", "RTX-4090", "A100-80GB-SXM"} <= gpus
    assert {r.row.workload.mode for r in rows} >= {"offline", "static_batch", "closed"}
    assert any(r.row.weights_dtype == "fp8" for r in rows) and any(r.row.weights_dtype == "bf16" for r in rows)
    assert any(r.row.model.startswith("Qwen/Qwen3-") and "-A" in r.row.model for r in rows)  # MoE
    assert any(r.row.workload.concurrency == 1 for r in rows)  # single stream


def test_every_row_names_a_catalog_model_and_gpu() -> None:
    for r in load_corpus():
        resolve_model(r.row.model)
        lookup_gpu(r.row.gpu)
        assert r.row.where and r.source.url.startswith(("https://", "repo:"))
        if r.source.url.startswith("repo:"):  # first-party: the script that measured it is in the repository
            assert (ROOT / r.source.url.removeprefix("repo:")).is_file()


def test_first_party_rows_match_their_saved_results() -> None:
    """Each first-party row's values are the ones its saved ``vllm bench serve`` result holds."""
    import json

    keys = {
        ("output_throughput", "total"): "output_throughput",
        ("request_throughput", "total"): "request_throughput",
        ("e2e", "mean"): "mean_e2el_ms",
        ("e2e", "median"): "median_e2el_ms",
    }
    rows = [r for r in load_corpus() if r.source.url.startswith("repo:")]
    assert len(rows) >= 7
    for r in rows:
        saved = json.loads((ROOT / r.row.where.split(" ")[0]).read_text())
        for m in r.row.measured:
            key = keys.get((m.metric, m.statistic), f"{m.statistic}_{m.metric}_ms")
            assert m.value == pytest.approx(round(saved[key], 2), abs=1e-9), (r.full_id, m.key)


def test_measured_values_keep_the_printed_text() -> None:
    for r in load_corpus():
        for m in r.row.measured:
            digits = m.printed.replace(",", "").split(":")[-1].strip()
            assert float(digits) == pytest.approx(m.value), (r.full_id, m)


def test_split_rule_is_fixed_and_about_half() -> None:
    assert split_of("trtllm-perf-overview/llama31-8b-h100-fp8-128-128") == split_of(
        "trtllm-perf-overview/llama31-8b-h100-fp8-128-128"
    )
    rows = load_corpus()
    test = sum(r.split == "test" for r in rows)
    assert 0.3 * len(rows) < test < 0.7 * len(rows)
    assert len(select(rows, split="train")) + len(select(rows, split="test")) == len(rows)


def test_good_file_loads(tmp_path: Path) -> None:
    p = tmp_path / "good.toml"
    p.write_text(GOOD_ROW)
    f = load_file(p)
    assert f.rows[0].measured[0].value_si == pytest.approx(7e-3)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (('kind = "test"', 'kind = "test"\nextra = 1'), "source.extra"),
        (('unit = "ms"', 'unit = "tok/s"'), "does not fit metric"),
        (("concurrency = 1\n", ""), "needs 'concurrency'"),
        (('statistic = "median"', 'statistic = "total"'), "does not fit metric"),
        (("value = 7.0", "value = -1.0"), "rows.0.measured.0.value"),
    ],
)
def test_bad_file_is_one_line(tmp_path: Path, change: tuple[str, str], needle: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(GOOD_ROW.replace(*change))
    with pytest.raises(ServecapError) as exc:
        load_file(p)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "broken.toml"
    p.write_text("[source\n")
    with pytest.raises(ServecapError, match=r"broken\.toml"):
        load_file(p)


def test_duplicate_source_names_are_rejected(tmp_path: Path) -> None:
    for name in ("a.toml", "b.toml"):
        (tmp_path / name).write_text(GOOD_ROW)
    with pytest.raises(ServecapError, match="more than one file"):
        load_corpus([tmp_path / "a.toml", tmp_path / "b.toml"])


def test_unknown_source_and_split() -> None:
    rows = load_corpus()
    with pytest.raises(ServecapError, match=r"source='trtllm-perf-overveiw'.*did you mean"):
        select(rows, source="trtllm-perf-overveiw")
    with pytest.raises(ServecapError, match=r"split='dev'"):
        select(rows, split="dev")


def test_unit_conversion() -> None:
    m = Measured(metric="e2e", statistic="mean", value=3.53, unit="s", printed="3.530")
    assert m.value_si == 3.53 and m.family == "e2e" and m.key == "e2e.mean"


def test_docs_list_every_source_and_the_split() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "validation.md").read_text()
    rows = load_corpus()
    for name in {r.source.name for r in rows}:
        assert f"| {name} |" in doc, f"docs/validation.md should list {name}"
    train = sum(r.split == "train" for r in rows)
    assert f"{train} training and {len(rows) - train} test rows" in doc
    assert f"{len(rows)} rows" in doc


def test_request_overhead_default_is_the_low_load_fit() -> None:
    """``Efficiency.request_overhead_s`` is stage 2's closed form on the training rows with one
    request in flight (docs/validation.md, "Terms considered"), to the 0.1 ms it is given in."""
    from servecap.specs.perf import DEFAULT_REQUEST_OVERHEAD_S
    from servecap.validation.fit import fit_request_overhead, is_low_load

    rows = load_corpus()
    assert sum(1 for r in rows if r.split == "train" and is_low_load(r)) == 10
    assert fit_request_overhead(rows) == pytest.approx(DEFAULT_REQUEST_OVERHEAD_S, abs=0.00005)
