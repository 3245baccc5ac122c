"""The results store: one SQLite file with every run's settings, summary and per-request records.

Schema (``PRAGMA user_version`` = 1)::

    runs(run_id TEXT PRIMARY KEY, created_at TEXT, url TEXT, model TEXT, mode TEXT,
         label TEXT, sweep_id TEXT, settings_json TEXT, summary_json TEXT, checks_json TEXT,
         client_json TEXT, num_requests INTEGER, num_errors INTEGER, wall_duration_s REAL,
         interrupted INTEGER)
    requests(run_id TEXT, idx INTEGER, request_id TEXT, scheduled_s REAL, dispatched_s REAL,
             sent_s REAL, first_token_s REAL, end_s REAL, prompt_tokens INTEGER,
             output_tokens INTEGER, usage_prompt_tokens INTEGER, usage_output_tokens INTEGER,
             cached_prompt_tokens INTEGER, chunks INTEGER, multi_token_chunks INTEGER,
             prefix_group INTEGER, prefix_tokens INTEGER, user_id INTEGER, turn INTEGER,
             error TEXT, error_detail TEXT, http_status INTEGER, trimmed INTEGER,
             token_times BLOB, server_timing_json TEXT, PRIMARY KEY (run_id, idx))

``token_times`` is the little-endian float64 array of every token arrival (seconds since the
run's start). The default file lives under the user's data directory
(``platformdirs.user_data_dir("servecap")/runs.sqlite``); ``--db`` chooses another.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import sys
import uuid
from array import array
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servecap.errors import ServecapError
from servecap.measure.trace import Trace

SCHEMA_VERSION = 1

_RUNS = """CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, url TEXT, model TEXT, mode TEXT,
    label TEXT, sweep_id TEXT, settings_json TEXT NOT NULL, summary_json TEXT, checks_json TEXT,
    client_json TEXT, num_requests INTEGER, num_errors INTEGER, wall_duration_s REAL,
    interrupted INTEGER DEFAULT 0)"""
_REQUESTS = """CREATE TABLE IF NOT EXISTS requests (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, idx INTEGER NOT NULL,
    request_id TEXT, scheduled_s REAL, dispatched_s REAL, sent_s REAL, first_token_s REAL,
    end_s REAL, prompt_tokens INTEGER, output_tokens INTEGER, usage_prompt_tokens INTEGER,
    usage_output_tokens INTEGER, cached_prompt_tokens INTEGER, chunks INTEGER,
    multi_token_chunks INTEGER, prefix_group INTEGER, prefix_tokens INTEGER, user_id INTEGER,
    turn INTEGER, error TEXT, error_detail TEXT, http_status INTEGER, trimmed INTEGER,
    token_times BLOB, server_timing_json TEXT, PRIMARY KEY (run_id, idx))"""

_REQ_COLS = ("request_id", "scheduled_s", "dispatched_s", "sent_s", "first_token_s", "end_s",
             "prompt_tokens", "output_tokens", "usage_prompt_tokens", "usage_output_tokens",
             "cached_prompt_tokens", "chunks", "multi_token_chunks", "prefix_group", "prefix_tokens",
             "user_id", "turn", "error", "error_detail", "http_status", "trimmed")


def default_db_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("servecap")) / "runs.sqlite"


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    created_at: str
    url: str
    model: str
    mode: str
    label: str
    sweep_id: str | None
    settings: dict[str, Any]
    summary: dict[str, Any]
    checks: list[dict[str, Any]]
    client: dict[str, Any]
    num_requests: int
    num_errors: int
    wall_duration_s: float
    interrupted: bool


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def _pack(times: Sequence[float]) -> bytes:
    arr = array("d", times)
    if sys.byteorder != "little":
        arr.byteswap()
    return arr.tobytes()


def _unpack(blob: bytes | None) -> list[float]:
    arr = array("d")
    if blob:
        arr.frombytes(blob)
        if sys.byteorder != "little":
            arr.byteswap()
    return arr.tolist()


class RunStore:
    """Open (creating if needed) a results database; every method is one transaction."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_db_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(self._connect()) as con, con:
                con.execute(_RUNS)
                con.execute(_REQUESTS)
                con.execute("CREATE INDEX IF NOT EXISTS requests_run ON requests(run_id)")
                con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as err:
            raise ServecapError("db", str(self.path), f"not a usable SQLite database: {err}") from None
        except OSError as err:
            raise ServecapError("db", str(self.path), f"cannot create: {err.strerror}") from None

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=30.0)
        con.execute("PRAGMA foreign_keys = ON")
        return con

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with closing(self._connect()) as con, con:
            yield con

    def save_run(self, *, run_id: str, url: str, model: str, mode: str, settings: dict[str, Any],
                 traces: Sequence[Trace], summary: dict[str, Any], checks: list[dict[str, Any]],
                 client: dict[str, Any], wall_duration_s: float, interrupted: bool = False,
                 label: str = "", sweep_id: str | None = None, created_at: str | None = None) -> str:
        errors = sum(1 for t in traces if t.error is not None)
        with self._tx() as con:
            con.execute(
                "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, created_at or datetime.now(UTC).isoformat(timespec="seconds"), url, model,
                 mode, label, sweep_id, json.dumps(settings, default=str), json.dumps(summary),
                 json.dumps(checks), json.dumps(client), len(traces), errors, wall_duration_s,
                 int(interrupted)),
            )
            con.executemany(
                f"INSERT INTO requests VALUES ({','.join('?' * (len(_REQ_COLS) + 4))})",
                [(run_id, i, *(_val(getattr(t, c)) for c in _REQ_COLS), _pack(t.token_times_s),
                  json.dumps(t.server_timing) if t.server_timing is not None else None)
                 for i, t in enumerate(traces)],
            )
        return run_id

    def resolve(self, run: str) -> str:
        """A full run id from an id, a unique prefix, or ``last``."""
        with self._tx() as con:
            if run == "last":
                row = con.execute("SELECT run_id FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()
                if row is None:
                    raise ServecapError("run", run, f"no runs in {self.path}")
                return str(row[0])
            rows = con.execute("SELECT run_id FROM runs WHERE run_id LIKE ? || '%'", (run,)).fetchall()
        if not rows:
            raise ServecapError("run", run, f"no such run in {self.path} (see `servecap runs`)")
        if len(rows) > 1 and not any(r[0] == run for r in rows):
            raise ServecapError("run", run, f"ambiguous: matches {len(rows)} runs")
        return run if any(r[0] == run for r in rows) else str(rows[0][0])

    def list_runs(self, limit: int = 50) -> list[RunRow]:
        with self._tx() as con:
            rows = con.execute("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ?", (limit,)).fetchall()
        return [_run_row(r) for r in rows]

    def get_run(self, run: str) -> RunRow:
        rid = self.resolve(run)
        with self._tx() as con:
            row = con.execute("SELECT * FROM runs WHERE run_id = ?", (rid,)).fetchone()
        return _run_row(row)

    def get_traces(self, run: str) -> list[Trace]:
        rid = self.resolve(run)
        with self._tx() as con:
            rows = con.execute(
                f"SELECT {','.join(_REQ_COLS)}, token_times, server_timing_json FROM requests "
                "WHERE run_id = ? ORDER BY idx", (rid,)).fetchall()
        out = []
        for r in rows:
            kw = dict(zip(_REQ_COLS, r[: len(_REQ_COLS)], strict=True))
            kw["trimmed"] = bool(kw["trimmed"])
            kw["error_detail"] = kw["error_detail"] or ""
            for k in ("cached_prompt_tokens", "chunks", "multi_token_chunks", "prefix_tokens", "turn"):
                kw[k] = int(kw[k] or 0)
            trace = Trace(**kw, token_times_s=_unpack(r[-2]))
            trace.server_timing = json.loads(r[-1]) if r[-1] else None
            out.append(trace)
        return out

    def delete_run(self, run: str) -> str:
        rid = self.resolve(run)
        with self._tx() as con:
            con.execute("DELETE FROM requests WHERE run_id = ?", (rid,))
            con.execute("DELETE FROM runs WHERE run_id = ?", (rid,))
        return rid


def _val(v: object) -> object:
    return int(v) if isinstance(v, bool) else v


def _run_row(r: tuple[Any, ...]) -> RunRow:
    return RunRow(
        run_id=r[0], created_at=r[1], url=r[2] or "", model=r[3] or "", mode=r[4] or "",
        label=r[5] or "", sweep_id=r[6], settings=json.loads(r[7] or "{}"),
        summary=json.loads(r[8] or "{}"), checks=json.loads(r[9] or "[]"),
        client=json.loads(r[10] or "{}"), num_requests=int(r[11] or 0), num_errors=int(r[12] or 0),
        wall_duration_s=float(r[13] or 0.0), interrupted=bool(r[14]),
    )


def trace_dict(t: Trace) -> dict[str, Any]:
    d: dict[str, Any] = {c: getattr(t, c) for c in _REQ_COLS}
    d["token_times_s"] = list(t.token_times_s)
    d["server_timing"] = t.server_timing
    return d


def export_json(run: RunRow, traces: Sequence[Trace]) -> str:
    return json.dumps({
        "run_id": run.run_id, "created_at": run.created_at, "url": run.url, "model": run.model,
        "mode": run.mode, "settings": run.settings, "summary": run.summary, "checks": run.checks,
        "client": run.client, "requests": [trace_dict(t) for t in traces],
    }, indent=2)


def export_csv(traces: Sequence[Trace]) -> str:
    """One row per request; token times as a space-separated list in the last column."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*_REQ_COLS, "ttft_s", "token_times_s"])
    for t in traces:
        ttft = t.ttft_s
        w.writerow([*(getattr(t, c) for c in _REQ_COLS), "" if ttft is None else f"{ttft:.6f}",
                    " ".join(f"{x:.6f}" for x in t.token_times_s)])
    return buf.getvalue()
