"""Monitor time series in the run store's SQLite file (``servecap.results.store.default_db_path``
unless ``--db`` names another), in tables of their own::

    monitor_sessions(session_id TEXT PRIMARY KEY, started_at TEXT, urls_json TEXT)
    monitor_samples(session_id TEXT, url TEXT, time_s REAL, up INTEGER, error TEXT,
                    running REAL, waiting REAL, kv_usage REAL, request_rate_per_s REAL,
                    prompt_tok_s REAL, generation_tok_s REAL, preemptions_per_s REAL,
                    prefix_hit_rate REAL, ttft_p50_s REAL, ttft_p99_s REAL, itl_p50_s REAL,
                    itl_p99_s REAL, e2e_p50_s REAL, e2e_p99_s REAL)

One row per target (and one with ``url = 'fleet'``) per tick. Tables are created with
``CREATE TABLE IF NOT EXISTS``; the run store's own tables are left alone.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from servecap.errors import ServecapError
from servecap.monitor.window import WindowStats

_SESSIONS = """CREATE TABLE IF NOT EXISTS monitor_sessions (
    session_id TEXT PRIMARY KEY, started_at TEXT NOT NULL, urls_json TEXT NOT NULL)"""
_SAMPLES = """CREATE TABLE IF NOT EXISTS monitor_samples (
    session_id TEXT NOT NULL REFERENCES monitor_sessions(session_id) ON DELETE CASCADE,
    url TEXT NOT NULL, time_s REAL NOT NULL, up INTEGER NOT NULL, error TEXT,
    running REAL, waiting REAL, kv_usage REAL, request_rate_per_s REAL, prompt_tok_s REAL,
    generation_tok_s REAL, preemptions_per_s REAL, prefix_hit_rate REAL,
    ttft_p50_s REAL, ttft_p99_s REAL, itl_p50_s REAL, itl_p99_s REAL, e2e_p50_s REAL, e2e_p99_s REAL)"""
_INDEX = "CREATE INDEX IF NOT EXISTS monitor_samples_session ON monitor_samples(session_id, time_s)"

SAMPLE_COLUMNS = (
    "session_id",
    "url",
    "time_s",
    "up",
    "error",
    "running",
    "waiting",
    "kv_usage",
    "request_rate_per_s",
    "prompt_tok_s",
    "generation_tok_s",
    "preemptions_per_s",
    "prefix_hit_rate",
    "ttft_p50_s",
    "ttft_p99_s",
    "itl_p50_s",
    "itl_p99_s",
    "e2e_p50_s",
    "e2e_p99_s",
)


def default_path() -> Path:
    from servecap.results.store import default_db_path

    return default_db_path()


class MonitorStore:
    """Appends one session's samples to a SQLite file."""

    def __init__(self, path: Path, urls: list[str]) -> None:
        """Checks the store before the first scrape (writable, room, our schema version: see
        ``results.store.check_store_writable``); a SQLite failure later (the disk filled) is one
        error naming the store."""
        from servecap.results.store import check_store_writable

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ServecapError("db", str(path), f"its folder cannot be created ({err.strerror or err})") from None
        check_store_writable(path)
        self.path = path
        self.session_id = uuid.uuid4().hex[:12]
        try:
            self._con = sqlite3.connect(path)
            with self._con:
                self._con.execute("PRAGMA foreign_keys = ON")
                for ddl in (_SESSIONS, _SAMPLES, _INDEX):
                    self._con.execute(ddl)
                self._con.execute(
                    "INSERT INTO monitor_sessions VALUES (?, ?, ?)",
                    (self.session_id, datetime.now(UTC).isoformat(timespec="seconds"), json.dumps(urls)),
                )
        except sqlite3.Error as err:
            raise _error(path, err) from None

    def add_up(self, w: WindowStats, time_s: float) -> None:
        row = (
            self.session_id,
            w.url,
            time_s,
            1,
            None,
            w.running,
            w.waiting,
            w.kv_usage,
            w.request_rate_per_s,
            w.prompt_tok_s,
            w.generation_tok_s,
            w.preemptions_per_s,
            w.prefix_hit_rate,
            w.p("ttft", 0.5),
            w.p("ttft", 0.99),
            w.p("itl", 0.5),
            w.p("itl", 0.99),
            w.p("e2e", 0.5),
            w.p("e2e", 0.99),
        )
        self._insert(row)

    def add_down(self, url: str, time_s: float, error: str) -> None:
        self._insert((self.session_id, url, time_s, 0, error, *([None] * (len(SAMPLE_COLUMNS) - 5))))

    def _insert(self, row: tuple[object, ...]) -> None:
        marks = ", ".join("?" * len(SAMPLE_COLUMNS))
        try:
            with self._con:
                self._con.execute(f"INSERT INTO monitor_samples ({', '.join(SAMPLE_COLUMNS)}) VALUES ({marks})", row)
        except sqlite3.Error as err:
            raise _error(self.path, err) from None

    def close(self) -> None:
        self._con.close()


def _error(path: Path, err: sqlite3.Error) -> ServecapError:
    text = " ".join(str(err).split())[:200]
    if "full" in text:
        return ServecapError("db", str(path), f"the disk is full ({text}): the samples so far are stored")
    if "readonly" in text or "read-only" in text:
        return ServecapError("db", str(path), f"cannot be written ({text})")
    return ServecapError("db", str(path), f"cannot store the monitor's samples ({text})")


def read_samples(path: Path, session_id: str) -> list[dict[str, object]]:
    """Every sample of one session, in time order (for tests and exports)."""
    with closing(sqlite3.connect(path)) as con:
        con.row_factory = sqlite3.Row
        rows = con.execute(
            "SELECT * FROM monitor_samples WHERE session_id = ? ORDER BY time_s, url", (session_id,)
        ).fetchall()
    return [dict(r) for r in rows]
