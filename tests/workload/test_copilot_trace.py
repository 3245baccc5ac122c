"""The GitHub Copilot coding-agent traces 2026 (Azure/AzurePublicDataset; its schema.json): one
agent session a line, each LLM call a request; block ids from each call's cached tokens
(:mod:`servecap.workload.copilot_trace`). The shipped sample is written by hand in that format;
replayed one request at a time with an unbounded cache, its hit rate is its recorded cached
tokens over its prompt tokens (the sample's cached counts are whole 512-token blocks), less one
gap the test works out by hand."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.workload.test_block_hash_replay import _one_at_a_time

from servecap.errors import ServecapError
from servecap.workload.generate import trace_arrays
from servecap.workload.samples import trace_path
from servecap.workload.spec import TraceArrival
from servecap.workload.trace import load_trace

SAMPLE = trace_path("sample:copilot-agent")


def _call(ts: str, prompt: int, completion: int, cached: int) -> dict[str, Any]:
    return {
        "message_id": "m",
        "timestamp": ts,
        "duration_ms": 1000.0,
        "initiator_type": "agent",
        "model": "Model A",
        "tokens": {"total": prompt + completion, "prompt": prompt, "completion": completion, "cached": cached},
    }


def _write(tmp_path: Path, *sessions: object, name: str = "c.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join((s if isinstance(s, str) else json.dumps(s)) + "\n" for s in sessions))
    return p


def _session(*calls: dict[str, Any], sid: str = "s") -> dict[str, Any]:
    return {"session_id": sid, "date": "2026-06-01", "turns": [{"turn_id": "t", "llm_calls": list(calls)}]}


def test_block_ids_follow_the_cached_tokens_by_hand(tmp_path: Path) -> None:
    # the module's example: 1,500 tokens, none cached -> [0, 1, 2]; then 2,100 with 1,100 cached:
    # floor(1100 / 512) = 2 blocks shared, ceil(2100 / 512) = 5 in all -> [0, 1, 3, 4, 5]
    p = _write(
        tmp_path,
        _session(_call("2026-06-01T10:00:00", 1500, 20, 0), _call("2026-06-01T10:00:02.5+00:00", 2100, 0, 1100)),
    )
    t = load_trace(p)  # auto: the first line is a session
    assert t.format == "copilot"
    assert t.hashes_of(0).tolist() == [0, 1, 2] and t.hashes_of(1).tolist() == [0, 1, 3, 4, 5]
    assert t.arrival_s.tolist() == [0.0, 2.5]
    assert t.output_tokens.tolist() == [20, 1]  # a call that made no token: the first token, replayed


def test_the_sample_is_read_in_time_order_across_sessions() -> None:
    t = load_trace(SAMPLE)
    assert (t.format, len(t)) == ("copilot", 9)
    assert t.arrival_s.tolist() == [0.0, 1.5, 3.4, 4.0, 6.2, 30.25, 35.0, 70.0, 73.1]
    assert t.prompt_tokens.tolist() == [6200, 4100, 7400, 4700, 9100, 12000, 13500, 9800, 10600]
    assert t.hashes_of(2).tolist()[:13] == [*range(12), 13]  # 6,144 cached = 12 blocks of the first call


def test_an_unbounded_replay_hits_the_recorded_cached_tokens() -> None:
    cached = 6144 + 7168 + 9216 + 9728 + 3584 + 11776  # the sample's cached tokens, all whole blocks
    prompts = 6200 + 4100 + 7400 + 4700 + 9100 + 12000 + 13500 + 9800 + 10600
    # one gap, by hand: the second turn's first call records 9,216 cached tokens (18 blocks), past
    # the 9,100-token prompt before it (its cache held that call's output too); the session's
    # blocks are its prompts', and the 18th covers tokens 8,704..9,099 of which whole 16-token
    # engine blocks hold 9,088: 128 tokens short of the record
    arrays = trace_arrays(TraceArrival(path="sample:copilot-agent"))
    assert _one_at_a_time(arrays, 200_000) == pytest.approx((cached - 128) / prompts, abs=1e-12)  # 47,488 / 77,400


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("{not json", "c.jsonl:1"),
        (json.dumps({"rows": []}), "not a Copilot agent session"),
        (json.dumps(_session(_call("yesterday", 10, 1, 0))), "c.jsonl:1.turns[0].llm_calls[0].timestamp"),
        (json.dumps(_session(_call("2026-06-01T10:00:00", 10, 1, 11))), "tokens.cached=11"),
        (json.dumps(_session(_call("2026-06-01T10:00:00", 0, 1, 0))), "tokens.prompt=0"),
        (json.dumps(_session(_call("2026-06-01T10:00:00", 10, -1, 0))), "tokens.completion=-1"),
        (json.dumps({"session_id": "s", "turns": {"a": 1}}), "c.jsonl:1.turns"),
    ],
)
def test_a_bad_line_is_named(tmp_path: Path, line: str, named: str) -> None:
    p = _write(tmp_path, line)
    with pytest.raises(ServecapError) as err:
        load_trace(p, "copilot")
    assert named in str(err.value) and "\n" not in str(err.value)


def test_a_bad_file_is_one_line_on_stderr_exit_2(tmp_path: Path, servecap_cli: Callable[..., Any]) -> None:
    p = _write(tmp_path, _session(_call("2026-06-01T10:00:00", 10, 1, 0)), '{"session_id": "x", "turns": [7]}')
    cmd = ["simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100"]
    r = servecap_cli(*cmd, "--trace", str(p), "--trace-format", "copilot")  # in this process: tests/conftest.py
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "c.jsonl:2.turns[0]" in r.stderr, r.stderr
