"""Stored data is parsed like input (issue 33): a damaged row of a store -- sketches, monitor
recordings -- is one line naming the store and the row, never a traceback, in bounded time."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_cases import Case, materialize, run_in_process
from stored_cases import sketches_cases, sketches_store

from servecap.results.sketch_set import RunSketches


def _refused(case: Case, folder: Path) -> str:
    argv = materialize(case, folder)
    result = run_in_process(argv, limit_s=10.0)
    assert result.outcome == "error", f"{case.name}: {result.outcome}\n{result.stderr[-2000:]}"
    assert result.seconds < 2.0, f"{case.name}: {result.seconds:.1f} s"
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
