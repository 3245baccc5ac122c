"""The run store: measured and simulated runs, typed, and files of the previous schema."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from servecap.errors import ServecapError
from servecap.results import MeasuredRequest, RequestRecord, summarize
from servecap.results.store import RunStore, export_csv, export_json


def test_round_trip_every_field(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    t1 = MeasuredRequest(
        "0",
        0.0,
        10,
        3,
        sent_s=0.001,
        first_token_s=0.05,
        end_s=0.07,
        token_times_s=(0.05, 0.06, 0.07),
        usage_prompt_tokens=11,
        usage_output_tokens=3,
        chunks=3,
        cached_prompt_tokens=0,
    )
    t2 = MeasuredRequest(
        "1", 0.1, 10, 3, sent_s=0.1, end_s=0.2, error="http_503", error_detail="busy", http_status=503, trimmed=True
    )
    summary = summarize([t1.to_record(0)], duration_s=0.07)
    store.save_measured(
        run_id="r1",
        url="http://x",
        model="m",
        mode="open",
        settings={"seed": 1},
        requests=[t1, t2],
        summary=summary,
        wall_duration_s=0.2,
    )
    assert store.resolve("r") == "r1" and store.resolve("last") == "r1"
    back = store.get_requests("r1")
    assert back == [t1, t2]  # every field, typed (cached tokens: 0 reported vs None unknown)
    row = store.get_run("r1")
    assert row.kind == "measured" and row.num_errors == 1 and row.settings == {"seed": 1}
    assert row.summary == summary
    assert '"token_times_s": [' in export_json(row, back)
    assert export_csv(back).splitlines()[1].endswith("0.050000 0.060000 0.070000")
    with pytest.raises(ServecapError, match="no such run"):
        store.resolve("zzz")


def test_simulated_runs_share_the_store(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    recs = [
        RequestRecord(
            0,
            0.0,
            100,
            4,
            first_token_s=0.2,
            end_s=0.5,
            token_times_s=(0.2, 0.3, 0.4, 0.5),
            cached_prompt_tokens=32,
            preemptions=1,
            queue_time_s=0.05,
        ),
        RequestRecord(1, 0.1, 100, 4, error="rejected"),
    ]
    summary = summarize(recs, duration_s=1.0)
    store.save_simulated(run_id="s1", model="m", mode="open", settings={"rate": 2.0}, records=recs, summary=summary)
    row = store.get_run("s1")
    assert row.kind == "simulated" and row.url == "" and row.summary == summary and row.num_errors == 1
    assert store.get_records("s1") == recs
    assert [r.run_id for r in store.list_runs(kind="simulated")] == ["s1"]
    assert store.list_runs(kind="measured") == []


_V1_RUNS = """CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, url TEXT, model TEXT, mode TEXT,
    label TEXT, sweep_id TEXT, settings_json TEXT NOT NULL, summary_json TEXT, checks_json TEXT,
    client_json TEXT, num_requests INTEGER, num_errors INTEGER, wall_duration_s REAL,
    interrupted INTEGER DEFAULT 0)"""
_V1_REQUESTS = """CREATE TABLE requests (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, idx INTEGER NOT NULL,
    request_id TEXT, scheduled_s REAL, dispatched_s REAL, sent_s REAL, first_token_s REAL,
    end_s REAL, prompt_tokens INTEGER, output_tokens INTEGER, usage_prompt_tokens INTEGER,
    usage_output_tokens INTEGER, cached_prompt_tokens INTEGER, chunks INTEGER,
    multi_token_chunks INTEGER, prefix_group INTEGER, prefix_tokens INTEGER, user_id INTEGER,
    turn INTEGER, error TEXT, error_detail TEXT, http_status INTEGER, trimmed INTEGER,
    token_times BLOB, server_timing_json TEXT, PRIMARY KEY (run_id, idx))"""


def test_a_version_1_file_is_migrated_and_read(tmp_path: Path) -> None:
    """A file written by the previous store (schema 1, measured runs only) opens, reads back
    typed, and takes new runs of both kinds."""
    path = tmp_path / "old.sqlite"
    old_summary = {
        "ttft_s": {"p50": 0.05, "p90": 0.05, "p95": 0.05, "p99": 0.05, "mean": 0.05},
        "throughput_req_s": 1.5,
        "num_requests": 1,
        "completed": 1,
        "duration_s": 0.07,
        "multi_token_chunk_requests": 0,
        "errors": {},
    }
    with sqlite3.connect(path) as con:
        con.execute(_V1_RUNS)
        con.execute(_V1_REQUESTS)
        con.execute("PRAGMA user_version = 1")
        con.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                "old-1",
                "2026-11-01T00:00:00+00:00",
                "http://x",
                "m",
                "open",
                "",
                None,
                '{"seed": 3}',
                json.dumps(old_summary),
                "[]",
                "{}",
                1,
                0,
                0.07,
                0,
            ),
        )
        con.execute(
            "INSERT INTO requests (run_id, idx, request_id, scheduled_s, sent_s, first_token_s, end_s, "
            "prompt_tokens, output_tokens, cached_prompt_tokens, chunks, multi_token_chunks, prefix_tokens, "
            "turn, trimmed, token_times) VALUES ('old-1', 0, '0', 0.0, 0.001, 0.05, 0.07, 10, 2, 0, 2, 0, 0,"
            " 0, 0, ?)",
            (b"\x9a\x99\x99\x99\x99\x99\xa9?",),
        )
    store = RunStore(path)
    row = store.get_run("old-1")
    assert row.kind == "measured" and row.settings == {"seed": 3}
    assert row.summary.ttft_s.p50 == 0.05 and row.summary.throughput_req_s == 1.5 and row.summary.completed == 1
    assert row.summary.tpot_s.p50 is None  # not in the old summary: unknown
    [req] = store.get_requests("old-1")
    assert req.first_token_s == 0.05 and req.token_times_s == (0.05,) and req.cached_prompt_tokens == 0
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == 2
    store.save_simulated(
        run_id="new-1", model="m", mode="open", settings={}, records=[], summary=summarize([], duration_s=0.0)
    )
    assert {r.run_id: r.kind for r in RunStore(path).list_runs()} == {"old-1": "measured", "new-1": "simulated"}


def test_not_a_database(tmp_path: Path) -> None:
    bad = tmp_path / "x.sqlite"
    bad.write_text("hello, not sqlite" * 100)
    with pytest.raises(ServecapError, match="db="):
        RunStore(bad)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA user_version = 99")
    with pytest.raises(ServecapError, match="newer servecap"):
        RunStore(path)
