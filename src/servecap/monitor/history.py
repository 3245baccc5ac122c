"""A recorded history of a fleet's traffic, for the shadow autoscaler (``monitor replay``).

Two sources:

- servecap's own monitor store (the SQLite file ``servecap monitor`` writes,
  :mod:`servecap.monitor.store`): one session's ticks; the traffic is the ``fleet`` row's request
  rate (or the single target's), the replicas that ran are the targets up at each tick, and the
  mean lengths are the token rates over the request rate, weighted by the request rate;
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

    @property
    def step_s(self) -> float:
        """The median spacing of the samples."""
        gaps = sorted(b - a for a, b in zip(self.time_s, self.time_s[1:], strict=False))
        return gaps[len(gaps) // 2] if gaps else 60.0


def is_sqlite(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(16) == b"SQLite format 3\x00"


def history_from_store(path: Path, session: str | None = None) -> History:
    """One session of the monitor store (default: the latest)."""
    with closing(sqlite3.connect(path)) as con:
        con.row_factory = sqlite3.Row
        try:
            sessions = con.execute("SELECT session_id FROM monitor_sessions ORDER BY started_at, rowid").fetchall()
        except sqlite3.OperationalError as err:
            raise ServecapError(
                "history", str(path), "has no monitor sessions (not written by `servecap monitor`)"
            ) from err
        ids = [r["session_id"] for r in sessions]
        if not ids:
            raise ServecapError("history", str(path), "has no monitor sessions")
        if session is None:
            session = ids[-1]
        elif session not in ids:
            raise ServecapError("session", session, f"not a monitor session of {path} (latest: {ids[-1]})")
        rows = [
            dict(r)
            for r in con.execute(
                "SELECT * FROM monitor_samples WHERE session_id = ? ORDER BY time_s, url", (session,)
            ).fetchall()
        ]
    if not rows:
        raise ServecapError("session", session, f"has no samples in {path}")
    times = sorted({float(r["time_s"]) for r in rows})
    has_fleet = any(r["url"] == "fleet" for r in rows)
    t_rate: list[float] = []
    t_repl: list[float | None] = []
    p_sum = g_sum = r_sum = 0.0
    for t in times:
        at = [r for r in rows if r["time_s"] == t]
        targets = [r for r in at if r["url"] != "fleet"]
        traffic = [r for r in at if r["url"] == "fleet"] if has_fleet else [r for r in targets if r["up"]]
        rate = sum(float(r["request_rate_per_s"] or 0.0) for r in traffic)
        t_rate.append(rate)
        t_repl.append(float(sum(1 for r in targets if r["up"])) if targets else None)
        for r in traffic:
            if r["prompt_tok_s"] is not None and r["generation_tok_s"] is not None:
                p_sum += float(r["prompt_tok_s"])
                g_sum += float(r["generation_tok_s"])
                r_sum += float(r["request_rate_per_s"] or 0.0)
    t0 = times[0]
    return History(
        source=f"{path} (session {session})",
        time_s=tuple(t - t0 for t in times),
        rate_req_s=tuple(t_rate),
        replicas=tuple(t_repl),
        prompt_tokens=p_sum / r_sum if r_sum > 0 else None,
        output_tokens=g_sum / r_sum if r_sum > 0 else None,
    )


def history_from_prometheus(path: Path) -> History:
    """A ``query_range`` JSON export of the request rate (module docstring)."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        result = body["data"]["result"]
        if body["data"].get("resultType") != "matrix":
            raise ValueError(f"resultType {body['data'].get('resultType')!r}, not 'matrix'")
        series = [[(float(t), float(v)) for t, v in s["values"]] for s in result]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ServecapError(
            "history", str(path), f"is not a Prometheus query_range JSON export of a request rate ({err})"
        ) from err
    if not series or not any(series):
        raise ServecapError("history", str(path), "has no samples")
    times = sorted({t for s in series for t, _ in s})
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
