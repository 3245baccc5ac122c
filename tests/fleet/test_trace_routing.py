"""Block-hash traces through the fleet CLI: ``--trace`` replays a shipped sample, and routing by
the blocks replicas hold (the precise scorer, and the approximate index) beats least-outstanding
on the agentic sample's hit rate and median TTFT. Bad trace flags end in one line, exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli
from servecap.errors import ServecapError

BASE = ["fleet", "simulate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--replicas", "4", "--json"]


def _run(*extra: str) -> dict[str, float]:
    out = CliRunner().invoke(cli, [*BASE, "--trace", "sample:agentic", "--time-scale", "0.1", *extra])
    assert out.exit_code == 0, out.output
    s = json.loads(out.stdout)["summary"]  # progress goes to stderr
    return {"hit": s["prefix_cache_hit_rate"], "ttft_p50": s["ttft_s"]["p50"], "n": s["completed"]}


def test_routing_by_blocks_beats_least_outstanding_on_the_agentic_sample() -> None:
    lo = _run("--router", "least-outstanding")
    precise = _run("--router", "precise-prefix")
    approx = _run("--router", "prefix-affinity")
    assert lo["n"] == precise["n"] == approx["n"] == 387
    assert precise["hit"] > lo["hit"] + 0.1 and approx["hit"] > lo["hit"] + 0.1
    assert precise["ttft_p50"] < lo["ttft_p50"]


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        (["--trace", "sample:agentic", "--time-scale", "0"], "--time-scale=0"),
        (["--trace", "sample:agentic", "--time-scale", "-1"], "--time-scale=-1"),
        (["--trace", "sample:agentic", "--trace-start-s", "1e300"], "--trace-start-s=1e+300"),
        (["--trace", "sample:agentic", "--trace-start-s", "9", "--trace-end-s", "3"], "--trace-end-s=3"),
        (["--trace", "sample:agentic", "--trace-block-tokens", "0"], "--trace-block-tokens=0"),
        (["--trace", "/no/such.jsonl"], "no such file"),
        (["--trace-end-s", "3"], "needs --trace"),
        (["--trace", "sample:agentic", "--rate", "3"], "drop --rate"),
    ],
)
def test_bad_trace_flags_name_the_flag(flags: list[str], match: str) -> None:
    out = CliRunner().invoke(cli, [*BASE, *flags])
    assert out.exit_code != 0
    assert isinstance(out.exception, ServecapError), out.output
    assert match in str(out.exception)


def test_a_bad_trace_line_is_one_line_on_stderr_exit_2(tmp_path: Path, servecap_cli: Callable[..., Any]) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1, "input_length": -5}\n')
    for flags, named in (
        (["--trace", str(bad)], "t.jsonl:2"),
        (["--trace", "sample:agentic", "--time-scale", "nan"], "--time-scale"),
    ):
        p = servecap_cli(*BASE, *flags)
        assert p.returncode == 2 and p.stdout == ""
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert named in p.stderr
