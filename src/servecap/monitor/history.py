"""A recorded history of a fleet's traffic, for the shadow autoscaler (``monitor replay``).

Two sources:

- servecap's own monitor store (the SQLite file ``servecap monitor`` writes,
  :mod:`servecap.monitor.store`): one session's ticks; the traffic is the ``fleet`` row's request
  rate (or the single target's), the replicas that ran are the targets up at each tick, and the
  mean lengths are the token rates over the request rate, weighted by the request rate, and the
  prefix-cache hit rate (local and external caches together, :mod:`servecap.monitor.cache_hits`)
  is the recorded one weighted by the prompt-token rate;
- a Prometheus range query exported as JSON (``/api/v1/query_range``'s body:
  ``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...},
  "values": [[unix_s, "value"], ...]}, ...]}}``) of the request rate, e.g.
  ``rate(vllm:request_success_total[1m])`` per instance: the traffic is the sum over the series at
  each timestamp, the replicas that ran are the series with a value there (one per instance;
  a query already summed gives no replica count).

Times are made relative to the first sample.
"""

from __future__ import annotations

import json
import math
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from servecap.errors import ServecapError


@dataclass(frozen=True, slots=True)
class History:
    source: str
    time_s: tuple[float, ...]  # from the first sample
    rate_req_s: tuple[float, ...]  # fleet-wide, over the interval ending at each sample
    replicas: tuple[float | None, ...]  # replicas that ran (answered) at each sample; None: unknown
    prompt_tokens: float | None  # mean per request over the history
    output_tokens: float | None
    prefix_hit_rate: float | None = None  # cached / prompt tokens over the history (None: not recorded)

    @property
    def step_s(self) -> float:
        """The median spacing of the samples."""
        gaps = sorted(b - a for a, b in zip(self.time_s, self.time_s[1:], strict=False))
        return gaps[len(gaps) // 2] if gaps else 60.0


MAX_HISTORY_SAMPLES = 1_000_000
"""Most samples a history may hold: the monitor at its 2 s interval records 43,200 a day, and a
Prometheus range query answers at most 11,000 points per series; a million is weeks of either."""
MAX_HISTORY_SPAN_S = 366 * 86_400.0
"""Longest history: a year (Prometheus keeps 15 days by default); the replay reports it minute by
minute and simulates all of it."""
MAX_RATE_REQ_S = 1e6
"""Highest recorded request rate of one fleet: a million requests per second is beyond any
single deployment's traffic; a larger (or infinite) rate is a damaged recording."""
MAX_TOKEN_RATE_TOK_S = 1e10
"""Highest recorded token rate (prompt or generated) of one fleet: 10^10 tokens/s."""
MAX_EXPORT_BYTES = 64 * 1024 * 1024
"""Largest Prometheus export read: 64 MiB (a million points of ``[t, "v"]`` is about 30 MiB)."""

_SAMPLE_QUERY = (
    "SELECT rowid, time_s, url, up, request_rate_per_s, prompt_tok_s, generation_tok_s, prefix_hit_rate "
    "FROM monitor_samples WHERE session_id = ? ORDER BY time_s, url"
)


def is_sqlite(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(16) == b"SQLite format 3\x00"


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection: reading a history never writes to (or creates) the file."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def store_error(path: Path, err: sqlite3.Error) -> ServecapError:
    """One line for a SQLite failure reading a monitor store."""
    text = " ".join(str(err).split())[:200]
    if "no such table" in text or "no such column" in text:
        return ServecapError("history", str(path), f"is not a monitor store of this shape ({text})")
    if isinstance(err, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text):
        return ServecapError("history", str(path), f"is damaged or not a SQLite database ({text})")
    return ServecapError("history", str(path), f"cannot be read ({text})")


def _number(value: object, where: str, column: str, low: float, high: float) -> float:
    """A stored value where a number belongs: a finite number in ``[low, high]``, else one error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value) if not isinstance(value, bytes) else f"{len(value)} bytes of binary data"
        raise ValueError(f"{where}: {column} holds {shown[:60]}, not a number")
    out = float(value)
    if not (math.isfinite(out) and low <= out <= high):
        raise ValueError(f"{where}: {column} is {out!r}, outside [{low:g}, {high:g}]")
    return out


def _optional(value: object, where: str, column: str, high: float) -> float | None:
    return None if value is None else _number(value, where, column, 0.0, high)


def _check_span(times: list[float], source: str) -> None:
    if len(times) > MAX_HISTORY_SAMPLES:
        raise ServecapError("history", source, f"holds {len(times):,} samples, over the {MAX_HISTORY_SAMPLES:,} limit")
    if times and times[-1] - times[0] > MAX_HISTORY_SPAN_S:
        raise ServecapError(
            "history",
            source,
            f"spans {(times[-1] - times[0]) / 86_400:,.3g} days, over the {MAX_HISTORY_SPAN_S / 86_400:.0f}-day limit",
        )


def sessions_in_store(path: Path) -> list[dict[str, object]]:
    """The monitor sessions in ``path``, newest first: id, start, URLs and sample count (none when
    the file holds no monitor tables); a damaged file or row is one error naming the store and
    the row."""
    from servecap.files import loads_json

    if path.stat().st_size == 0:
        # SQLite creates the file empty and writes its header with the first table: a server's
        # results file that a job is creating this instant holds no sessions yet (not an error)
        return []
    if not is_sqlite(path):
        raise ServecapError("db", str(path), "is not a SQLite database")
    try:
        with closing(connect_read_only(path)) as con:
            tables = {str(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"monitor_sessions", "monitor_samples"} <= tables:
                return []
            rows = con.execute(
                "SELECT s.session_id, s.started_at, s.urls_json, count(m.time_s), max(m.time_s) - min(m.time_s) "
                "FROM monitor_sessions s LEFT JOIN monitor_samples m ON m.session_id = s.session_id "
                "AND m.url != 'fleet' GROUP BY s.session_id ORDER BY s.started_at DESC, s.rowid DESC"
            ).fetchall()
    except sqlite3.Error as err:
        raise store_error(path, err) from None
    out: list[dict[str, object]] = []
    for sid, at, urls, n, span in rows:
        where = f"monitor session {sid!r}"
        try:
            urls_v = loads_json(urls, "urls_json", "the stored text") if isinstance(urls, str) else None
            if not (isinstance(urls_v, list) and all(isinstance(u, str) for u in urls_v)):
                raise ValueError(f"{where}: urls_json is not a JSON list of URLs")
            span_s = 0.0 if span is None else _number(span, where, "time_s span", 0.0, MAX_HISTORY_SPAN_S)
        except (ValueError, ServecapError) as err:
            problem = err.problem if isinstance(err, ServecapError) else str(err)
            raise ServecapError("db", str(path), f"{where} is damaged ({problem})") from None
        out.append(
            {"session": str(sid), "started_at": str(at), "urls": urls_v, "samples": int(n), "duration_s": span_s}
        )
    return out


def history_from_store(path: Path, session: str | None = None) -> History:
    """One session of the monitor store (default: the latest). Stored rows are parsed as input:
    text, nulls or non-finite values where numbers belong, a rate beyond any fleet's, more than
    :data:`MAX_HISTORY_SAMPLES` samples or a span over :data:`MAX_HISTORY_SPAN_S` are one error
    naming the store and the row. One pass over the rows (in time order)."""
    try:
        with closing(connect_read_only(path)) as con:
            try:
                sessions = con.execute("SELECT session_id FROM monitor_sessions ORDER BY started_at, rowid").fetchall()
            except sqlite3.OperationalError as err:
                if "no such table" not in str(err):
                    raise
                raise ServecapError(
                    "history", str(path), "has no monitor sessions (not written by `servecap monitor`)"
                ) from None
            ids = [r[0] for r in sessions]
            if not ids:
                raise ServecapError("history", str(path), "has no monitor sessions")
            if session is None:
                session = str(ids[-1])
            elif session not in ids:
                raise ServecapError("session", session, f"not a monitor session of {path} (latest: {ids[-1]})")
            count = int(
                con.execute("SELECT count(*) FROM monitor_samples WHERE session_id = ?", (session,)).fetchone()[0]
            )
            if count > MAX_HISTORY_SAMPLES:
                raise ServecapError(
                    "history",
                    str(path),
                    f"session {session} holds {count:,} samples, over the {MAX_HISTORY_SAMPLES:,} limit",
                )
            rows = con.execute(_SAMPLE_QUERY, (session,)).fetchall()
    except sqlite3.Error as err:
        raise store_error(path, err) from None
    if not rows:
        raise ServecapError("session", session, f"has no samples in {path}")
    try:
        return _history_of_rows(rows, f"{path} (session {session})")
    except ValueError as err:
        raise ServecapError("history", str(path), f"session {session}: {err}") from None


def _history_of_rows(rows: list[tuple[object, ...]], source: str) -> History:
    """The history of sample rows ``(rowid, time_s, url, up, rate, prompt_tok_s, generation_tok_s,
    prefix_hit_rate)`` in time order: one pass, the rows of one instant grouped as they come."""
    parsed = []
    for rowid, time_v, url, up, rate_v, prompt_v, gen_v, hit_v in rows:
        where = f"sample row {rowid}"
        if not isinstance(url, str):
            raise ValueError(f"{where}: url holds {url!r}, not text")
        t = _number(time_v, where, "time_s", -1e12, 1e12)
        is_up = up is not None and _number(up, where, "up", 0.0, 1.0) > 0
        rate = _optional(rate_v, where, "request_rate_per_s", MAX_RATE_REQ_S)
        prompt = _optional(prompt_v, where, "prompt_tok_s", MAX_TOKEN_RATE_TOK_S)
        gen = _optional(gen_v, where, "generation_tok_s", MAX_TOKEN_RATE_TOK_S)
        hit = _optional(hit_v, where, "prefix_hit_rate", 1.0)
        parsed.append((t, url, is_up, rate, prompt, gen, hit))
    parsed.sort(key=lambda p: p[0])  # SQLite orders text after numbers; every time is a number now
    times: list[float] = []
    groups: list[list[tuple[float, str, bool, float | None, float | None, float | None, float | None]]] = []
    for p in parsed:
        if not times or p[0] != times[-1]:
            times.append(p[0])
            groups.append([])
        groups[-1].append(p)
    _check_span(times, source)
    has_fleet = any(p[1] == "fleet" for p in parsed)
    t_rate: list[float] = []
    t_repl: list[float | None] = []
    p_sum = g_sum = r_sum = hit_sum = hit_weight = 0.0
    for at in groups:
        targets = [r for r in at if r[1] != "fleet"]
        traffic = [r for r in at if r[1] == "fleet"] if has_fleet else [r for r in targets if r[2]]
        t_rate.append(sum(r[3] or 0.0 for r in traffic))
        t_repl.append(float(sum(1 for r in targets if r[2])) if targets else None)
        for r in traffic:
            if r[4] is not None and r[5] is not None:
                p_sum += r[4]
                g_sum += r[5]
                r_sum += r[3] or 0.0
            if r[4] is not None and r[6] is not None:
                hit_sum += r[6] * r[4]
                hit_weight += r[4]
    t0 = times[0]
    return History(
        source=source,
        time_s=tuple(t - t0 for t in times),
        rate_req_s=tuple(t_rate),
        replicas=tuple(t_repl),
        prompt_tokens=p_sum / r_sum if r_sum > 0 else None,
        output_tokens=g_sum / r_sum if r_sum > 0 else None,
        prefix_hit_rate=hit_sum / hit_weight if hit_weight > 0 else None,
    )


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _prometheus_series(path: Path) -> list[list[tuple[float, float]]]:
    """The export's series as ``(unix_s, value)`` points, read within bounds: the file's size,
    its nesting, the point count, finite times and rates (Prometheus writes a missing value as
    the string ``"NaN"``: kept as NaN, a gap; ``"+Inf"`` or a rate over :data:`MAX_RATE_REQ_S`
    is refused)."""
    from servecap.files import decode_text, read_bytes

    text = decode_text(read_bytes(path, "history", max_bytes=MAX_EXPORT_BYTES), "history", str(path))
    if text.count("[") > MAX_HISTORY_SAMPLES + 1_000:  # every point opens one: refused before it is parsed
        raise ValueError(f"more than {MAX_HISTORY_SAMPLES:,} points")
    try:
        body = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("nests too deep") from None
    if not isinstance(body, dict) or not isinstance(body.get("data"), dict):
        raise ValueError("no data object")
    data = body["data"]
    if data.get("resultType") != "matrix":
        raise ValueError(f"resultType {str(data.get('resultType'))[:40]!r}, not 'matrix'")
    result = data.get("result")
    if not isinstance(result, list):
        raise ValueError("data.result is not a list")
    series: list[list[tuple[float, float]]] = []
    points = 0
    for i, s in enumerate(result):
        values = s.get("values") if isinstance(s, dict) else None
        if not isinstance(values, list):
            raise ValueError(f"series {i} has no list of values")
        points += len(values)
        if points > MAX_HISTORY_SAMPLES:
            raise ValueError(f"more than {MAX_HISTORY_SAMPLES:,} points")
        out: list[tuple[float, float]] = []
        for j, point in enumerate(values):
            where = f"series {i} point {j}"
            if not (isinstance(point, list) and len(point) == 2):
                raise ValueError(f"{where} is not a [time, value] pair")
            t = _number(point[0], where, "time", 0.0, 1e11)
            v = _sample_value(point[1], where)
            if v == v:  # NaN: no value at this step
                _number(v, where, "rate", 0.0, MAX_RATE_REQ_S)
            out.append((t, v))
        series.append(out)
    return series


def _sample_value(raw: object, where: str) -> float:
    """A point's value: Prometheus writes it as a string (``"1.5"``, ``"NaN"``, ``"+Inf"``)."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, str) and len(raw) < 64:
        try:
            return float(raw)
        except ValueError:
            pass
    raise ValueError(f"{where}: value {str(raw)[:40]!r} is not a number")


def history_from_prometheus(path: Path) -> History:
    """A ``query_range`` JSON export of the request rate (module docstring)."""
    try:
        series = _prometheus_series(path)
    except ValueError as err:
        raise ServecapError(
            "history", str(path), f"is not a Prometheus query_range JSON export of a request rate ({err})"
        ) from None
    if not series or not any(series):
        raise ServecapError("history", str(path), "has no samples")
    times = sorted({t for s in series for t, _ in s})
    _check_span(times, str(path))
    by_time: dict[float, list[float]] = {t: [] for t in times}
    for s in series:
        for t, v in s:
            if v == v:  # NaN: no value at this step
                by_time[t].append(v)
    per_instance = len(series) > 1
    t0 = times[0]
    return History(
        source=str(path),
        time_s=tuple(t - t0 for t in times),
        rate_req_s=tuple(sum(by_time[t]) for t in times),
        replicas=tuple(float(len(by_time[t])) if per_instance else None for t in times),
        prompt_tokens=None,
        output_tokens=None,
    )


def load_history(path: Path, session: str | None = None) -> History:
    """A monitor store (SQLite) or a Prometheus JSON export, told apart by the file's header."""
    if not path.is_file():
        raise ServecapError("history", str(path), "no such file")
    if is_sqlite(path):
        return history_from_store(path, session)
    if session is not None:
        raise ServecapError("session", session, "only a monitor store (SQLite) has sessions")
    return history_from_prometheus(path)
