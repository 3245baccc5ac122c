"""Stored data is parsed like input (issue 33): a damaged row of a store -- sketches, monitor
recordings -- is one line naming the store and the row, never a traceback, in bounded time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hostile_cases import Case, materialize, run_in_process
from stored_cases import recording, replay_cases, sketches_cases, sketches_store, steady

from servecap.results.sketch_set import RunSketches


def _refused(case: Case, folder: Path) -> str:
    argv = materialize(case, folder)
    result = run_in_process(argv, limit_s=10.0)  # a hang: 10 s of wall clock
    assert result.outcome == "error", f"{case.name}: {result.outcome}\n{result.stderr[-2000:]}"
    # bounded work: 2 s of this process's CPU (wall-clock seconds also count whatever else runs on
    # the machine: the other xdist worker, its browser or Ray, other jobs)
    assert result.cpu_seconds < 2.0, f"{case.name}: {result.cpu_seconds:.1f} s of CPU ({result.seconds:.1f} s)"
    return result.stderr


@pytest.mark.parametrize("case", list(sketches_cases()), ids=lambda c: c.name)
def test_a_damaged_sketches_row_is_one_line_naming_the_store_and_run(case: Case, tmp_path: Path) -> None:
    stderr = _refused(case, tmp_path)
    assert "db=" in stderr and ("streamed" in stderr or "sketches" in stderr), stderr


def test_a_whole_sketches_row_is_shown(tmp_path: Path) -> None:
    import json

    case = Case("ok", ("runs", "show", "streamed", "--sketches", "--db", "{db}"), {"db": b""})
    case.files["db"] = sketches_store(json.dumps(RunSketches(window_s=1.0).to_dict()))
    result = run_in_process(materialize(case, tmp_path))
    assert result.outcome == "accepted", result.stderr


@pytest.mark.parametrize("case", list(replay_cases()), ids=lambda c: c.name)
def test_a_damaged_recording_or_export_is_one_line(case: Case, tmp_path: Path) -> None:
    stderr = _refused(case, tmp_path)
    assert "history=" in stderr, stderr


def test_twenty_thousand_samples_load_in_linear_time(tmp_path: Path) -> None:
    """The loader grouped each instant's rows by scanning every row (quadratic: 77 s for 20k)."""
    from hostile_cases import _deadline

    from servecap.monitor.history import history_from_store

    path = tmp_path / "big.sqlite"
    path.write_bytes(recording(steady(20_000)))
    cpu0 = time.process_time()
    with _deadline(10.0):
        h = history_from_store(path)
    assert len(h.time_s) == 20_000 and h.rate_req_s[-1] == 5.0
    assert time.process_time() - cpu0 < 2.0  # the work (CPU), not the machine's load


def test_the_replay_buckets_minutes_in_one_pass() -> None:
    from servecap.app.monitor_replay import _by_minute

    times = [i * 2.0 for i in range(20_000)]
    got = _by_minute(times, [1.0] * len(times), 667)
    assert [len(b) for b in got[:2]] == [30, 30] and sum(map(len, got)) == 20_000
