"""``fleet simulate`` on a disaggregated fleet, by flags and by fleet file: the P/D section in
the table, the JSON and the HTML; bad combinations are one line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from servecap.cli.main import cli

EXAMPLE = Path(__file__).parents[2] / "examples" / "fleet-pd.yaml"
SHORT = ["--num-requests", "120", "--prompt-tokens", "3000", "--output-tokens", "40"]


def test_flags_build_prefill_and_decode_pools_and_json_carries_the_hand_off() -> None:
    args = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--prefill-replicas", "1"]
    args += ["--decode-replicas", "2", "--kv-link", "tcp", "--pd-router", "sglang", "--rate", "8", *SHORT, "--json"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)  # progress goes to stderr
    assert [r["pool"] for r in d["replicas"]] == ["prefill", "decode", "decode"]
    pd = d["pd"]
    assert (pd["prefill_replicas"], pd["decode_replicas"], pd["transfers"]) == (1, 2, 120)
    # 3,000 tokens x 131,072 bytes over 25 Gb/s TCP: 125.8 ms + 1 ms overhead + 50 us latency
    assert abs(pd["transfer_s"]["p50"] - (3000 * 131_072 / 3.125e9 + 1.05e-3)) < 1e-6
    assert pd["links"] and 0 < pd["links"][0]["utilization"] <= 1


def test_a_fleet_file_runs_with_the_table_and_the_html(tmp_path: Path) -> None:
    page = tmp_path / "pd.html"
    out = CliRunner().invoke(
        cli, ["fleet", "simulate", "--fleet", str(EXAMPLE), "--rate", "8", *SHORT, "--html", str(page)]
    )
    assert out.exit_code == 0, out.output
    assert "disaggregated prefill/decode" in out.output and "KV transfer" in out.output
    assert "Disaggregated prefill/decode" in page.read_text()


def test_half_a_split_is_one_line() -> None:
    out = CliRunner().invoke(cli, ["fleet", "simulate", "--prefill-replicas", "2", "--rate", "1"])
    assert out.exit_code != 0
    assert "give --prefill-replicas and --decode-replicas" in str(out.exception)
