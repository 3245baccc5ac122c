"""The monitor sessions of a results file that a job is creating this instant: SQLite creates the
file empty and writes its header with the first table, so a page listing sessions meanwhile (the
web's runs page, GET /api/v1/monitor/sessions) gets none, not a 400 naming a damaged file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from servecap.api.replay_job import list_sessions
from servecap.errors import ServecapError
from servecap.monitor.history import sessions_in_store


def test_a_store_being_created_holds_no_sessions(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    con = sqlite3.connect(db)  # the file exists, empty, before the first write
    try:
        assert db.is_file() and db.stat().st_size == 0
        assert sessions_in_store(db) == []
        assert list_sessions(db) == []
    finally:
        con.close()


def test_a_file_of_other_bytes_is_still_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    db.write_bytes(b"not a database at all")
    with pytest.raises(ServecapError, match="not a SQLite database"):
        sessions_in_store(db)
