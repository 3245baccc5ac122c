"""The public trace formats read by hand-made files: columns, units, windows, and the one-line
error (naming the file, line and column) for every malformed row."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from servecap.errors import ServecapError
from servecap.workload import generate_requests, workload_from_dict
from servecap.workload.generate import trace_arrays
from servecap.workload.samples import SAMPLES, trace_path
from servecap.workload.spec import TraceArrival
from servecap.workload.trace import load_trace


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_mooncake_rows_in_seconds_with_their_hashes(tmp_path: Path) -> None:
    p = _jsonl(
        tmp_path / "m.jsonl",
        [
            {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": list(range(46, 60))},
            {"timestamp": 3000, "input_length": 1000, "output_length": 0, "hash_ids": [46, 47], "chat_id": 9},
        ],
    )
    t = load_trace(p)
    assert t.format == "mooncake"
    assert t.arrival_s.tolist() == [3.0, 27.482]  # ms -> s, sorted
    assert t.output_tokens.tolist() == [1, 52]  # a prefill-only row makes its first token
    assert t.hashes_of(0).tolist() == [46, 47] and len(t.hashes_of(1)) == 14


def test_azure_timestamps_count_from_the_first_row(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.9799600,4808,10\n"
        "2023-11-16 18:17:04.0319600,3180,8\n"
        "2023-11-16 18:18:04.9799600,110,27\n"
    )
    t = load_trace(p)
    assert t.format == "azure"
    assert t.arrival_s.tolist() == pytest.approx([0.0, 0.052, 61.0], abs=1e-6)
    assert t.prompt_tokens.tolist() == [4808, 3180, 110] and not t.has_hashes
    # the 2024 files print an offset: it is applied
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00+00:00,5,6\n2024-05-10 02:00:01+02:00,5,6\n"
    )
    assert load_trace(p).arrival_s.tolist() == pytest.approx([0.0, 1.0])


def test_burstgpt_leaves_failed_requests_out(tmp_path: Path) -> None:
    p = tmp_path / "b.csv"
    p.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "45,ChatGPT,1087,0,1087,Conversation log\n"
        "118,GPT-4,417,230,647,API log\n"
    )
    t = load_trace(p)
    assert t.format == "burstgpt" and t.skipped == 1
    assert t.arrival_s.tolist() == [5.0, 118.0] and t.output_tokens.tolist() == [18, 230]


def test_window_and_time_scale(tmp_path: Path) -> None:
    p = _jsonl(
        tmp_path / "s.jsonl", [{"arrival_s": float(i), "prompt_tokens": 10, "output_tokens": 2} for i in range(10)]
    )
    a = trace_arrays(TraceArrival(path=str(p), start_s=3, end_s=7, time_scale=2.0))
    assert a.arrival_s.tolist() == [0.0, 2.0, 4.0, 6.0]  # 3, 4, 5, 6 shifted to 0, then doubled
    with pytest.raises(ServecapError, match="falls in the window"):
        trace_arrays(TraceArrival(path=str(p), start_s=100))


def test_every_shipped_sample_reads() -> None:
    for name in SAMPLES:
        path = trace_path(f"sample:{name}")
        assert path.exists(), name
        w = workload_from_dict({"arrival": {"kind": "trace", "path": f"sample:{name}"}})
        assert generate_requests(w, np.random.default_rng(0))
    assert (trace_path("sample:servecap").parent / "TRACES.md").exists()


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (
            '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2, 3]}',
            r"m\.jsonl:2\.hash_ids.*more than ceil",
        ),
        ('{"timestamp": -1, "input_length": 6, "output_length": 1}', r"m\.jsonl:2\.timestamp=-1"),
        ('{"timestamp": 0, "input_length": 0, "output_length": 1}', r"m\.jsonl:2\.input_length=0"),
        ('{"timestamp": NaN, "input_length": 5, "output_length": 1}', r"m\.jsonl:2\.timestamp"),
        ('{"timestamp": 1e300, "input_length": 5, "output_length": 1}', r"m\.jsonl:2\.timestamp"),
        ('{"timestamp": 0, "input_length": 1e300, "output_length": 1}', r"m\.jsonl:2\.input_length"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [-4]}', r"m\.jsonl:2\.hash_ids='-4'"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": "x"}', r"m\.jsonl:2\.hash_ids"),
        ('{"timestamp": 0, "output_length": 1}', r"m\.jsonl:2=.input_length.: missing key"),
        ("{not json", r"m\.jsonl:2=.*not JSON"),
        ("[1, 2]", r"m\.jsonl:2=.*JSON object"),
        ("[" * 100000, r"m\.jsonl:2=.*not JSON"),
    ],
)
def test_a_malformed_mooncake_line_is_named(tmp_path: Path, line: str, match: str) -> None:
    p = tmp_path / "m.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n' + line + "\n")
    with pytest.raises(ServecapError, match=match):
        load_trace(p)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-13-16 18:17:03,5,6\n",
            r"a\.csv:2\.TIMESTAMP.*not a valid date",
        ),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,6\n", r"a\.csv:2\.TIMESTAMP='yesterday'"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,-5,6\n", r"a\.csv:2\.ContextTokens='-5'"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,5,6,7\n", r"a\.csv:2=.*more fields"),
        ("Timestamp,Request tokens,Response tokens\n1,2,nan\n", r"a\.csv:2\.Response tokens='nan'"),
    ],
)
def test_a_malformed_csv_row_is_named(tmp_path: Path, text: str, match: str) -> None:
    p = tmp_path / "a.csv"
    p.write_text(text)
    with pytest.raises(ServecapError, match=match):
        load_trace(p)


def test_format_mismatch_and_bad_names(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n")
    with pytest.raises(ServecapError, match="mooncake trace is JSONL"):
        load_trace(p, "mooncake")
    with pytest.raises(ServecapError, match=r"TIMESTAMP.*missing column of a trace of format azure"):
        load_trace(p, "azure")
    with pytest.raises(ServecapError, match="did you mean: mooncake"):
        load_trace(p, "moncake")
    with pytest.raises(ServecapError, match="no such file"):
        load_trace(tmp_path / "missing.jsonl")
    with pytest.raises(ServecapError, match=r"no such sample.*did you mean: agentic"):
        trace_path("sample:agentc")
