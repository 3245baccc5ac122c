"""``fleet simulate --fidelity cache-replay``: the streamed cache replay from the command line, its
answer the library's, and every setting it does not model refused by name."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from servecap.app.flags import DeploymentFlags
from servecap.app.fleet_flags import FleetFlags, fleet_from_flags
from servecap.fleet.cache_replay_run import cache_replay
from servecap.fleet.file_schema import build_fleet
from servecap.workload.samples import trace_path
from servecap.workload.trace_stream import iter_trace_chunks

BASE = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--replicas", "4"]
SAMPLE = "sample:mooncake-conversation"


Cli = Callable[..., Any]


def _run(servecap_cli: Cli, *extra: str) -> tuple[int, str, str]:
    res = servecap_cli(*BASE, *extra)
    return int(res.returncode), str(res.stdout), str(res.stderr)


def test_the_cli_answers_what_the_library_answers(servecap_cli: Cli) -> None:
    code, out, err = _run(
        servecap_cli, "--router", "precise-prefix", "--trace", SAMPLE, "--fidelity", "cache-replay", "--json"
    )
    assert code == 0, err
    got = json.loads(out)
    # the same fleet and trace through the library
    deployment = DeploymentFlags(model="meta-llama/Llama-3.1-8B", gpu="H100")
    ff, _ = fleet_from_flags(FleetFlags(deployment=deployment, replicas=4, router="precise-prefix"))
    spec, _ = build_fleet(ff, None)
    want = cache_replay(spec, iter_trace_chunks(trace_path(SAMPLE)))
    lines = sum(1 for line in trace_path(SAMPLE).read_text().splitlines() if line.strip())
    assert got["fidelity"] == "cache-replay" and got["replicas"] == 4 and got["router"] == "precise-prefix"
    assert got["requests"] == want.requests == lines
    assert got["prefix_cache_hit_tokens"] == want.prefix_cache_hit_tokens
    assert got["prefix_cache_hit_rate"] == pytest.approx(want.prefix_cache_hit_tokens / want.prefix_cache_query_tokens)
    assert sum(got["requests_per_replica"]) == got["requests"]
    assert got["ttft_s"]["p99"] == want.ttft_s.p99 and got["ttft_s"]["count"] == lines
    assert any("fidelity cache-replay" in n for n in got["notes"])


def test_the_text_answer_and_the_time_scale(servecap_cli: Cli) -> None:
    code, out, err = _run(servecap_cli, "--trace", SAMPLE, "--fidelity", "cache-replay")
    assert code == 0, err
    assert "prefix cache hit rate" in out and "TTFT" in out and "requests per replica" in out
    one = json.loads(_run(servecap_cli, "--trace", SAMPLE, "--fidelity", "cache-replay", "--json")[1])
    two = json.loads(
        _run(servecap_cli, "--trace", SAMPLE, "--time-scale", "2", "--fidelity", "cache-replay", "--json")[1]
    )
    assert two["requests"] == one["requests"]
    assert two["horizon_s"] > 1.5 * one["horizon_s"]  # the arrivals spread over twice the time


def test_kv_tiers_answer_per_tier_hit_rates(servecap_cli: Cli) -> None:
    """Tiers are replayed (fleet/cache_replay_tiers.py): the --json answer names them as the full
    simulation's ``kv_tiers`` does (gpu, cpu, ssd, remote: tokens and share of the prompt tokens),
    the GPU's share is the prefix cache hit rate, and the text answer prints the row."""
    tiers = ("--cpu-kv-gib", "4", "--ssd-kv-gib", "8", "--remote-kv-tib", "0.01")
    code, out, err = _run(servecap_cli, "--trace", SAMPLE, *tiers, "--fidelity", "cache-replay", "--json")
    assert code == 0, err
    got = json.loads(out)
    kv = got["kv_tiers"]
    assert list(kv) == ["query_tokens", "gpu", "cpu", "ssd", "remote"]
    assert kv["query_tokens"] == got["prefix_cache_query_tokens"]
    assert kv["gpu"]["tokens"] == got["prefix_cache_hit_tokens"]
    assert kv["gpu"]["fraction"] == pytest.approx(got["prefix_cache_hit_rate"])
    assert sum(kv[n]["tokens"] for n in ("gpu", "cpu", "ssd", "remote")) <= kv["query_tokens"]
    code, out, err = _run(servecap_cli, "--trace", SAMPLE, *tiers, "--fidelity", "cache-replay")
    assert code == 0, err
    assert "KV tier hits (of prompt tokens): gpu " in out and "remote " in out
    plain = json.loads(_run(servecap_cli, "--trace", SAMPLE, "--fidelity", "cache-replay", "--json")[1])
    assert plain["kv_tiers"] is None


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ((), "--fidelity"),  # no trace
        (("--trace", SAMPLE, "--rate", "5"), "--rate"),
        (("--trace", SAMPLE, "--save"), "--save"),
        (("--trace", SAMPLE, "--trace-start-s", "10"), "--trace-start-s"),
        (("--trace", SAMPLE, "--trace-format", "azure"), "--trace-format"),
        (("--trace", SAMPLE, "--autoscaler", "keda-vllm"), "autoscaler"),
        (("--trace", "/nonexistent/trace.jsonl"), "/nonexistent/trace.jsonl"),
    ],
)
def test_what_it_does_not_model_is_refused_in_one_line(servecap_cli: Cli, extra: tuple[str, ...], named: str) -> None:
    code, out, err = _run(servecap_cli, *extra, "--fidelity", "cache-replay")
    assert code != 0 and out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in err, err
