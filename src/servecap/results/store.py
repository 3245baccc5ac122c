"""The run store: one SQLite file holding simulated and measured runs, typed.

Schema (``PRAGMA user_version`` = 2)::

    runs(run_id TEXT PRIMARY KEY, created_at TEXT, url TEXT, model TEXT, mode TEXT,
         label TEXT, sweep_id TEXT, settings_json TEXT, summary_json TEXT, checks_json TEXT,
         client_json TEXT, num_requests INTEGER, num_errors INTEGER, wall_duration_s REAL,
         interrupted INTEGER, kind TEXT)                      -- kind: 'measured' | 'simulated'
    requests(run_id TEXT, idx INTEGER, request_id TEXT, scheduled_s REAL, dispatched_s REAL,
             sent_s REAL, first_token_s REAL, end_s REAL, prompt_tokens INTEGER,
             output_tokens INTEGER, usage_prompt_tokens INTEGER, usage_output_tokens INTEGER,
             cached_prompt_tokens INTEGER, chunks INTEGER, multi_token_chunks INTEGER,
             prefix_group INTEGER, prefix_tokens INTEGER, user_id INTEGER, turn INTEGER,
             error TEXT, error_detail TEXT, http_status INTEGER, trimmed INTEGER,
             token_times BLOB, server_timing_json TEXT, preemptions INTEGER, queue_time_s REAL,
             PRIMARY KEY (run_id, idx))

A measured run's rows are :class:`~servecap.results.measured.MeasuredRequest`; a simulated
run's are :class:`~servecap.results.record.RequestRecord` (``scheduled_s`` = its arrival,
``preemptions`` and ``queue_time_s`` filled). The summary is stored as
:func:`~servecap.results.summary.summary_to_json_dict` and read back as a
:class:`~servecap.results.summary.RunSummary`. ``token_times`` is the little-endian float64
array of every token's time (seconds since the run's start).

Version 1 files (measured runs only, no ``kind``, ``preemptions``, ``queue_time_s``) are
migrated in place when opened: the columns are added and every old run is ``measured``.
The default file lives under the user's data directory
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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from servecap.errors import ServecapError
from servecap.files import dumps_json
from servecap.results.measured import MeasuredRequest
from servecap.results.record import RequestRecord
from servecap.results.summary import RunSummary, summary_from_json_dict, summary_to_json_dict

SCHEMA_VERSION = 2
RunKind = Literal["measured", "simulated"]

_RUNS = """CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, url TEXT, model TEXT, mode TEXT,
    label TEXT, sweep_id TEXT, settings_json TEXT NOT NULL, summary_json TEXT, checks_json TEXT,
    client_json TEXT, num_requests INTEGER, num_errors INTEGER, wall_duration_s REAL,
    interrupted INTEGER DEFAULT 0, kind TEXT NOT NULL DEFAULT 'measured')"""
_REQUESTS = """CREATE TABLE IF NOT EXISTS requests (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, idx INTEGER NOT NULL,
    request_id TEXT, scheduled_s REAL, dispatched_s REAL, sent_s REAL, first_token_s REAL,
    end_s REAL, prompt_tokens INTEGER, output_tokens INTEGER, usage_prompt_tokens INTEGER,
    usage_output_tokens INTEGER, cached_prompt_tokens INTEGER, chunks INTEGER,
    multi_token_chunks INTEGER, prefix_group INTEGER, prefix_tokens INTEGER, user_id INTEGER,
    turn INTEGER, error TEXT, error_detail TEXT, http_status INTEGER, trimmed INTEGER,
    token_times BLOB, server_timing_json TEXT, preemptions INTEGER DEFAULT 0, queue_time_s REAL,
    PRIMARY KEY (run_id, idx))"""
# a streaming run's mergeable accumulators (servecap.results.sketch_set), as JSON, by name
_SKETCHES = """CREATE TABLE IF NOT EXISTS sketches (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, name TEXT NOT NULL,
    sketch_json TEXT NOT NULL, PRIMARY KEY (run_id, name))"""
# version 1 -> 2: the columns added (old rows: measured, no preemptions or queue times known)
_MIGRATE_1_TO_2 = (
    "ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'measured'",
    "ALTER TABLE requests ADD COLUMN preemptions INTEGER DEFAULT 0",
    "ALTER TABLE requests ADD COLUMN queue_time_s REAL",
)

_RUN_COLS = (
    "run_id",
    "created_at",
    "url",
    "model",
    "mode",
    "label",
    "sweep_id",
    "settings_json",
    "summary_json",
    "checks_json",
    "client_json",
    "num_requests",
    "num_errors",
    "wall_duration_s",
    "interrupted",
    "kind",
)
# MeasuredRequest fields stored as plain columns (token_times and server_timing separately)
REQUEST_COLS = (
    "request_id",
    "scheduled_s",
    "dispatched_s",
    "sent_s",
    "first_token_s",
    "end_s",
    "prompt_tokens",
    "output_tokens",
    "usage_prompt_tokens",
    "usage_output_tokens",
    "cached_prompt_tokens",
    "chunks",
    "multi_token_chunks",
    "prefix_group",
    "prefix_tokens",
    "user_id",
    "turn",
    "error",
    "error_detail",
    "http_status",
    "trimmed",
)
_ALL_REQ_COLS = (*REQUEST_COLS, "token_times", "server_timing_json", "preemptions", "queue_time_s")


def default_db_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("servecap")) / "runs.sqlite"


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-`` and 6 random hex digits (sortable, unique)."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


@dataclass(frozen=True, slots=True)
class StoredRun:
    """One run's row: what it was (settings), what came out (summary, self-checks)."""

    run_id: str
    kind: RunKind
    created_at: str
    url: str
    model: str
    mode: str  # measured: open | closed | users; simulated: the simulation's mode
    label: str
    sweep_id: str | None
    settings: dict[str, Any]
    summary: RunSummary
    checks: list[dict[str, Any]]
    client: dict[str, Any]
    num_requests: int
    num_errors: int
    wall_duration_s: float
    interrupted: bool


def _pack(times: Sequence[float]) -> bytes:
    arr = array("d", times)
    if sys.byteorder != "little":
        arr.byteswap()
    return arr.tobytes()


def _unpack(blob: bytes | None) -> tuple[float, ...]:
    arr = array("d")
    if blob:
        arr.frombytes(blob)
        if sys.byteorder != "little":
            arr.byteswap()
    return tuple(arr.tolist())


class RunStore:
    """Open (creating or migrating if needed) a results database; every method is one transaction."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_db_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(self._connect()) as con, con:
                version = int(con.execute("PRAGMA user_version").fetchone()[0])
                check_schema_version(self.path, version)
                tables = _check_not_foreign(con, version, self.path)
                if version == SCHEMA_VERSION and tables >= _STORE_TABLES:
                    return  # nothing to create: opening a store for reading never writes to it
                if version == 1:
                    for stmt in _MIGRATE_1_TO_2:
                        con.execute(stmt)
                con.execute(_RUNS)
                con.execute(_REQUESTS)
                con.execute(_SKETCHES)
                con.execute("CREATE INDEX IF NOT EXISTS requests_run ON requests(run_id)")
                con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.Error as err:
            raise _db_error(self.path, err) from None
        except OSError as err:
            raise ServecapError("db", str(self.path), f"cannot create: {err.strerror}") from None

    def _connect(self, timeout_s: float = 30.0) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=timeout_s)
        con.execute("PRAGMA foreign_keys = ON")
        return con

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction; any SQLite failure (a damaged, locked or read-only file) is one
        :class:`ServecapError` naming the store."""
        try:
            with closing(self._connect()) as con, con:
                yield con
        except sqlite3.Error as err:
            raise _db_error(self.path, err) from None

    def check_writable(self, timeout_s: float = 5.0, min_free_bytes: int | None = None) -> None:
        """Refuse, in one line, a store a run could not be saved into (see
        :func:`check_store_writable`). Every writer (bench, sweep, fleet simulate --save, the
        monitor) calls this before its work, so no measurement or simulation is lost."""
        check_store_writable(self.path, timeout_s, min_free_bytes)

    def _insert_run(
        self,
        con: sqlite3.Connection,
        *,
        run_id: str,
        kind: RunKind,
        url: str,
        model: str,
        mode: str,
        settings: dict[str, Any],
        summary: RunSummary,
        checks: Sequence[dict[str, Any]],
        client: dict[str, Any],
        num_requests: int,
        num_errors: int,
        wall_duration_s: float,
        interrupted: bool,
        label: str,
        sweep_id: str | None,
        created_at: str | None,
    ) -> None:
        con.execute(
            f"INSERT INTO runs ({','.join(_RUN_COLS)}) VALUES ({','.join('?' * len(_RUN_COLS))})",
            (
                run_id,
                created_at or datetime.now(UTC).isoformat(timespec="seconds"),
                url,
                model,
                mode,
                label,
                sweep_id,
                json.dumps(settings, default=str),
                json.dumps(summary_to_json_dict(summary)),
                json.dumps(list(checks)),
                json.dumps(client),
                num_requests,
                num_errors,
                wall_duration_s,
                int(interrupted),
                kind,
            ),
        )

    def save_measured(
        self,
        *,
        run_id: str,
        url: str,
        model: str,
        mode: str,
        settings: dict[str, Any],
        requests: Sequence[MeasuredRequest],
        summary: RunSummary,
        checks: Sequence[dict[str, Any]] = (),
        client: dict[str, Any] | None = None,
        wall_duration_s: float,
        interrupted: bool = False,
        label: str = "",
        sweep_id: str | None = None,
        created_at: str | None = None,
    ) -> str:
        """Store a load-generator run with every request's record."""
        errors = sum(1 for t in requests if t.error is not None)
        with self._tx() as con:
            self._insert_run(
                con,
                run_id=run_id,
                kind="measured",
                url=url,
                model=model,
                mode=mode,
                settings=settings,
                summary=summary,
                checks=checks,
                client=client or {},
                num_requests=len(requests),
                num_errors=errors,
                wall_duration_s=wall_duration_s,
                interrupted=interrupted,
                label=label,
                sweep_id=sweep_id,
                created_at=created_at,
            )
            con.executemany(
                f"INSERT INTO requests (run_id, idx, {','.join(_ALL_REQ_COLS)}) "
                f"VALUES ({','.join('?' * (len(_ALL_REQ_COLS) + 2))})",
                [
                    (
                        run_id,
                        i,
                        *(_val(getattr(t, c)) for c in REQUEST_COLS),
                        _pack(t.token_times_s),
                        json.dumps(t.server_timing) if t.server_timing is not None else None,
                        0,
                        None,
                    )
                    for i, t in enumerate(requests)
                ],
            )
        return run_id

    def save_simulated(
        self,
        *,
        run_id: str,
        model: str,
        mode: str,
        settings: dict[str, Any],
        records: Sequence[RequestRecord],
        summary: RunSummary,
        wall_duration_s: float = 0.0,
        label: str = "",
        sweep_id: str | None = None,
        created_at: str | None = None,
        sketches: dict[str, Any] | None = None,
    ) -> str:
        """Store a simulation with its per-request records (``url`` is empty); a streaming run
        gives no records but its ``sketches`` (``RunSketches.to_dict()``), kept by name."""
        errors = sum(1 for r in records if r.error is not None)
        if sketches is not None and not records:
            errors = summary.num_requests - summary.completed
        with self._tx() as con:
            self._insert_run(
                con,
                run_id=run_id,
                kind="simulated",
                url="",
                model=model,
                mode=mode,
                settings=settings,
                summary=summary,
                checks=(),
                client={},
                num_requests=len(records) if records or sketches is None else summary.num_requests,
                num_errors=errors,
                wall_duration_s=wall_duration_s,
                interrupted=False,
                label=label,
                sweep_id=sweep_id,
                created_at=created_at,
            )
            if sketches is not None:
                con.execute(
                    "INSERT INTO sketches (run_id, name, sketch_json) VALUES (?, ?, ?)",
                    (run_id, "run", json.dumps(sketches)),
                )
            con.executemany(
                "INSERT INTO requests (run_id, idx, request_id, scheduled_s, sent_s, first_token_s, end_s, "
                "prompt_tokens, output_tokens, usage_prompt_tokens, usage_output_tokens, cached_prompt_tokens, "
                "user_id, turn, error, token_times, preemptions, queue_time_s, trimmed) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0)",
                [
                    (
                        run_id,
                        i,
                        str(r.request_id),
                        r.arrival_s,
                        r.sent_s,
                        r.first_token_s,
                        r.end_s,
                        r.prompt_tokens,
                        r.output_tokens,
                        r.prompt_tokens,
                        r.output_tokens,
                        r.cached_prompt_tokens,
                        r.user_id,
                        r.turn,
                        r.error,
                        _pack(r.token_times_s),
                        r.preemptions,
                        r.queue_time_s,
                    )
                    for i, r in enumerate(records)
                ],
            )
        return run_id

    def resolve(self, run: str) -> str:
        """A full run id from an id, a unique prefix, or ``last``. Ids are compared as plain
        text (never as a SQL pattern: ``%`` or ``_`` match only themselves)."""
        with self._tx() as con:
            if run == "last":
                row = con.execute("SELECT run_id FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()
                if row is None:
                    raise ServecapError("run", run, f"no runs in {self.path}")
                return str(row[0])
            if not run:
                raise ServecapError("run", run, "give a run id (see `servecap runs`)")
            exact = con.execute("SELECT run_id FROM runs WHERE run_id = ?", (run,)).fetchone()
            if exact is not None:
                return str(exact[0])
            rows = con.execute(
                "SELECT run_id FROM runs WHERE substr(run_id, 1, ?) = ? LIMIT 2", (len(run), run)
            ).fetchall()
        if not rows:
            raise ServecapError("run", run, f"no such run in {self.path} (see `servecap runs`)")
        if len(rows) > 1:
            raise ServecapError("run", run, "ambiguous: the prefix matches several runs; give more of the id")
        return str(rows[0][0])

    def list_runs(self, limit: int = 50, kind: RunKind | None = None) -> list[StoredRun]:
        """The newest runs; a damaged row is skipped (see :meth:`list_runs_checked`)."""
        return self.list_runs_checked(limit, kind)[0]

    def list_runs_checked(
        self, limit: int = 50, kind: RunKind | None = None
    ) -> tuple[list[StoredRun], list[tuple[str, str]]]:
        """The newest runs, and ``(run id, problem)`` for each row that could not be read (bad
        JSON, a malformed summary): one damaged row never hides the others."""
        where = "WHERE kind = ?" if kind is not None else ""
        args: tuple[Any, ...] = (kind, limit) if kind is not None else (limit,)
        with self._tx() as con:
            rows = con.execute(
                f"SELECT {','.join(_RUN_COLS)} FROM runs {where} ORDER BY created_at DESC, rowid DESC LIMIT ?", args
            ).fetchall()
        runs: list[StoredRun] = []
        damaged: list[tuple[str, str]] = []
        for r in rows:
            try:
                runs.append(_stored_run(r))
            except _ROW_ERRORS as err:
                damaged.append((str(r[0]), _row_problem(err)))
        return runs, damaged

    def get_run(self, run: str) -> StoredRun:
        rid = self.resolve(run)
        with self._tx() as con:
            row = con.execute(f"SELECT {','.join(_RUN_COLS)} FROM runs WHERE run_id = ?", (rid,)).fetchone()
        try:
            return _stored_run(row)
        except _ROW_ERRORS as err:
            raise ServecapError("run", rid, f"its stored row is damaged ({_row_problem(err)})") from None

    def get_requests(self, run: str) -> list[MeasuredRequest]:
        """Every request of a run as measured records (a simulated run's records read as if
        measured: no usage counts or chunks)."""
        rid = self.resolve(run)
        with self._tx() as con:
            rows = con.execute(
                f"SELECT {','.join(_ALL_REQ_COLS)} FROM requests WHERE run_id = ? ORDER BY idx", (rid,)
            ).fetchall()
        out = []
        n = len(REQUEST_COLS)
        for i, r in enumerate(rows):
            try:
                kw: dict[str, Any] = dict(zip(REQUEST_COLS, r[:n], strict=True))
                kw["trimmed"] = bool(kw["trimmed"])
                kw["error_detail"] = kw["error_detail"] or ""
                for k in ("chunks", "multi_token_chunks", "prefix_tokens", "turn"):
                    kw[k] = int(kw[k] or 0)
                kw["request_id"] = str(kw["request_id"])
                timing = json.loads(r[n + 1]) if r[n + 1] else None
                out.append(
                    MeasuredRequest(
                        **kw,
                        token_times_s=_unpack(r[n]),
                        server_timing=timing if isinstance(timing, dict) else None,
                    )
                )
            except _ROW_ERRORS as err:
                raise ServecapError("run", rid, f"its stored request {i} is damaged ({_row_problem(err)})") from None
        return out

    def get_records(self, run: str) -> list[RequestRecord]:
        """Every request of a run as the shared record (trimmed ones included)."""
        rid = self.resolve(run)
        with self._tx() as con:
            kinds = con.execute("SELECT kind FROM runs WHERE run_id = ?", (rid,)).fetchone()
            extra = con.execute(
                "SELECT preemptions, queue_time_s FROM requests WHERE run_id = ? ORDER BY idx", (rid,)
            ).fetchall()
        records = [m.to_record(i) for i, m in enumerate(self.get_requests(rid))]
        if kinds is not None and kinds[0] == "simulated":
            records = [
                replace(rec, preemptions=int(p or 0), queue_time_s=q)
                for rec, (p, q) in zip(records, extra, strict=True)
            ]
        return records

    def get_sketches(self, run: str) -> dict[str, Any] | None:
        """A streaming run's stored accumulators (``RunSketches.from_dict`` reads them); None
        for a run stored with its records."""
        rid = self.resolve(run)
        with self._tx() as con:
            row = con.execute("SELECT sketch_json FROM sketches WHERE run_id = ? AND name = 'run'", (rid,)).fetchone()
        return None if row is None else self._sketches_of(rid, row[0])

    def _sketches_of(self, rid: str, stored: object) -> dict[str, Any]:
        """A sketches row parsed as input is (bounded JSON, then the accumulators' own reader):
        a damaged row is one error naming the store and the run."""
        from servecap.files import loads_json
        from servecap.results.sketch_set import RunSketches

        def damaged(problem: str) -> ServecapError:
            return ServecapError("db", str(self.path), f"run {rid}'s sketches row is damaged ({problem})")

        if not isinstance(stored, str):
            raise damaged(f"it holds {type(stored).__name__}, not JSON text")
        try:
            value = loads_json(stored, "sketch_json", "the stored text")
        except ServecapError as err:
            raise damaged(err.problem) from None
        if not isinstance(value, dict):
            raise damaged(f"expected a JSON object, found {type(value).__name__}")
        try:
            RunSketches.from_dict(value)
        except _ROW_ERRORS as err:
            raise damaged(_row_problem(err)) from None
        return value

    def delete_run(self, run: str) -> str:
        rid = self.resolve(run)
        with self._tx() as con:
            con.execute("DELETE FROM sketches WHERE run_id = ?", (rid,))
            con.execute("DELETE FROM requests WHERE run_id = ?", (rid,))
            con.execute("DELETE FROM runs WHERE run_id = ?", (rid,))
        return rid


MIN_FREE_BYTES = 4 * 1024 * 1024
"""The least room a writer starts with where the store lives: 4 MiB (a run of a few thousand
requests with their records; SQLite's journal needs as much again while it commits)."""


def check_schema_version(path: Path, version: int) -> None:
    """Refuse a store whose ``user_version`` this servecap does not know (negative: not ours;
    above :data:`SCHEMA_VERSION`: a newer servecap's): it is never written."""
    if version > SCHEMA_VERSION:
        raise ServecapError(
            "db", str(path), f"written by a newer servecap (schema {version}, this one reads up to {SCHEMA_VERSION})"
        )
    if version < 0:
        raise ServecapError(
            "db",
            str(path),
            f"has schema version {version}, not one servecap writes (0-{SCHEMA_VERSION}): not a servecap store; "
            "it is left as it is (choose another --db)",
        )


def free_bytes_for(path: Path) -> int:
    """Bytes a write to ``path`` may still add: the free space of its file system, capped by the
    process's file-size limit (``ulimit -f``) less the file's size."""
    import resource
    import shutil

    folder = path.parent if path.parent.exists() else Path(".")
    free = shutil.disk_usage(folder).free
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        size = path.stat().st_size if path.exists() else 0
        free = min(free, max(0, soft - size))
    return int(free)


def check_store_writable(path: Path, timeout_s: float = 5.0, min_free_bytes: int | None = None) -> None:
    """Refuse, in one line, a store a run could not be saved into: our schema version (an
    unknown one is never written), a damaged file (SQLite's ``quick_check``), a read-only one
    (a write is tried inside a transaction and rolled back: root writes a chmod-ed file, not an
    immutable or read-only-mounted one), one another process holds locked for more than
    ``timeout_s``, or too little room (:func:`free_bytes_for` under ``min_free_bytes``,
    default :data:`MIN_FREE_BYTES`)."""
    need = MIN_FREE_BYTES if min_free_bytes is None else min_free_bytes
    try:
        free = free_bytes_for(path)
    except OSError as err:
        raise ServecapError("db", str(path), f"cannot be checked ({err.strerror or err})") from None
    if free < need:
        raise ServecapError(
            "db",
            str(path),
            f"has {free:,} bytes of room left (full disk or file-size limit); a run needs at least {need:,}",
        )
    if not path.exists():
        return  # a new store: created when the run is saved (its folder was checked for room)
    try:
        with closing(sqlite3.connect(path, timeout=timeout_s)) as con:
            version = int(con.execute("PRAGMA user_version").fetchone()[0])
            check_schema_version(path, version)
            rows = con.execute("PRAGMA quick_check(5)").fetchall()
            problems = [" ".join(str(r[0]).split()) for r in rows if str(r[0]) != "ok"][:2]
            if problems:
                raise ServecapError("db", str(path), "is damaged (quick_check: " + "; ".join(problems) + ")")
            con.execute("BEGIN IMMEDIATE")  # takes the write lock: a locked store fails here
            con.execute(f"PRAGMA user_version = {version}")  # a write: a read-only store fails here
            con.execute("ROLLBACK")
    except sqlite3.Error as err:
        raise _db_error(path, err) from None
    except OSError as err:
        raise ServecapError("db", str(path), f"cannot be opened ({err.strerror or err})") from None


_ROW_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError)
_STORE_TABLES = {"runs", "requests", "sketches"}
# the tables `servecap monitor --db` adds to the same file (servecap.monitor.store): not foreign
_NEIGHBOUR_TABLES = {"monitor_sessions", "monitor_samples"}


def _row_problem(err: Exception) -> str:
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text[:200]}" if text else type(err).__name__


def _db_error(path: Path, err: sqlite3.Error) -> ServecapError:
    """One line for a SQLite failure, saying what it most likely is."""
    text = str(err)
    if "locked" in text or "busy" in text:
        problem = f"is locked by another process ({text}); try again when it is done"
    elif "readonly" in text or "read-only" in text:
        problem = f"cannot be written ({text})"
    elif isinstance(err, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text):
        problem = f"is damaged or not a SQLite database ({text})"
    else:
        problem = f"not a usable run store ({text})"
    return ServecapError("db", str(path), problem)


def _check_not_foreign(con: sqlite3.Connection, version: int, path: Path) -> set[str]:
    """Refuse a database written by something else: unknown tables, or a ``runs``/``requests``
    table without this schema's columns."""
    tables = {str(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    foreign = sorted(tables - _STORE_TABLES - _NEIGHBOUR_TABLES - {"sqlite_sequence", "sqlite_stat1"})
    if foreign:
        raise ServecapError(
            "db",
            str(path),
            f"is not a servecap run store (it holds tables {', '.join(foreign[:5])}); choose another --db",
        )
    needed = {"runs": set(_RUN_COLS) - ({"kind"} if version == 1 else set())}
    for table, cols in needed.items():
        if table not in tables:
            continue
        have = {str(r[1]) for r in con.execute(f"PRAGMA table_info({table})")}
        missing = sorted(cols - have)
        if missing:
            raise ServecapError(
                "db", str(path), f"is not a servecap run store (table {table} lacks {', '.join(missing[:5])})"
            )
    return tables


def _val(v: object) -> object:
    return int(v) if isinstance(v, bool) else v


def _json_of(text: str | None, default: str, kind: type) -> Any:
    value = json.loads(text or default)
    if not isinstance(value, kind):
        raise TypeError(f"expected a JSON {kind.__name__}, found {type(value).__name__}")
    return value


def _stored_run(r: tuple[Any, ...]) -> StoredRun:
    """A runs row as a :class:`StoredRun`; a damaged row raises one of :data:`_ROW_ERRORS`."""
    kind: RunKind = "simulated" if r[15] == "simulated" else "measured"
    return StoredRun(
        run_id=r[0],
        kind=kind,
        created_at=r[1],
        url=r[2] or "",
        model=r[3] or "",
        mode=r[4] or "",
        label=r[5] or "",
        sweep_id=r[6],
        settings=_json_of(r[7], "{}", dict),
        summary=summary_from_json_dict(_json_of(r[8], "{}", dict)),
        checks=_json_of(r[9], "[]", list),
        client=_json_of(r[10], "{}", dict),
        num_requests=int(r[11] or 0),
        num_errors=int(r[12] or 0),
        wall_duration_s=float(r[13] or 0.0),
        interrupted=bool(r[14]),
    )


def run_dict(run: StoredRun) -> dict[str, Any]:
    """A run's row as JSON-ready values (the summary in :func:`summary_to_json_dict` form)."""
    return {
        "run_id": run.run_id,
        "kind": run.kind,
        "created_at": run.created_at,
        "url": run.url,
        "model": run.model,
        "mode": run.mode,
        "label": run.label,
        "sweep_id": run.sweep_id,
        "settings": run.settings,
        "summary": summary_to_json_dict(run.summary),
        "checks": run.checks,
        "client": run.client,
        "num_requests": run.num_requests,
        "num_errors": run.num_errors,
        "wall_duration_s": run.wall_duration_s,
        "interrupted": run.interrupted,
    }


def request_dict(t: MeasuredRequest) -> dict[str, Any]:
    d: dict[str, Any] = {c: getattr(t, c) for c in REQUEST_COLS}
    d["token_times_s"] = list(t.token_times_s)
    d["server_timing"] = t.server_timing
    return d


def export_json(run: StoredRun, requests: Sequence[MeasuredRequest]) -> str:
    return dumps_json({**run_dict(run), "requests": [request_dict(t) for t in requests]})


def export_csv(requests: Sequence[MeasuredRequest]) -> str:
    """One row per request; token times as a space-separated list in the last column."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*REQUEST_COLS, "ttft_s", "token_times_s"])
    for t in requests:
        ttft = t.ttft_s
        w.writerow(
            [
                *(getattr(t, c) for c in REQUEST_COLS),
                "" if ttft is None else f"{ttft:.6f}",
                " ".join(f"{x:.6f}" for x in t.token_times_s),
            ]
        )
    return buf.getvalue()
