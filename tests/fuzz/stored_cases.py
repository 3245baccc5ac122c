"""Damaged stored data (issue 33): stores whose rows were written by something else or torn --
a sketches row that is not the accumulators' JSON, monitor recordings with text or nulls where
numbers belong, a store of an unknown schema version. Each store is built as a real SQLite file
(bytes) so the fuzz tests and ``benchmarks/hostile_inputs.py`` run the same cases."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from hostile_cases import Case, Sparse


def store_bytes(build: Callable[[Path], None]) -> bytes:
    """The bytes of a SQLite file that ``build(path)`` made."""
    with tempfile.TemporaryDirectory(prefix="servecap-stored-") as tmp:
        path = Path(tmp) / "store.sqlite"
        build(path)
        return path.read_bytes()


def _streamed_run(path: Path) -> None:
    from servecap.results import RequestRecord, summarize
    from servecap.results.sketch_set import RunSketches
    from servecap.results.store import RunStore

    sketches = RunSketches(window_s=1.0)
    recs = [RequestRecord(0, 0.0, 10, 2, first_token_s=0.1, end_s=0.2, token_times_s=(0.1, 0.2))]
    RunStore(path).save_simulated(
        run_id="streamed",
        model="m",
        mode="fleet",
        settings={},
        records=[],
        summary=summarize(recs, duration_s=1.0),
        sketches=sketches.to_dict(),
    )


def sketches_store(value: object) -> bytes:
    """A store with one streamed run whose sketches row holds ``value`` (None: SQL NULL)."""

    def build(path: Path) -> None:
        _streamed_run(path)
        with sqlite3.connect(path) as con:
            con.execute("UPDATE sketches SET sketch_json = ? WHERE run_id = 'streamed'", (value,))

    return store_bytes(build)


def sketches_table_of_another_shape() -> bytes:
    def build(path: Path) -> None:
        _streamed_run(path)
        with sqlite3.connect(path) as con:
            con.execute("DROP TABLE sketches")
            con.execute("CREATE TABLE sketches (run_id TEXT, name TEXT, blob BLOB)")
            con.execute("INSERT INTO sketches VALUES ('streamed', 'run', x'00')")

    return store_bytes(build)


_DEEP = "[" * 10_000 + "]" * 10_000
_HUGE_KEYS = (
    '{"window_s": 1.0, "relative_accuracy": 0.01, "total": {"relative_accuracy": 0.01, "sketches": '
    '{"ttft_s": {"relative_accuracy": 0.01, "positive": {"offset": 1000000000000000, "counts": [1]}}}}}'
)
DAMAGED_SKETCHES: tuple[tuple[str, object], ...] = (
    ("bad JSON", "{not json"),
    ("a list", "[1, 2]"),
    ("a string", '"text"'),
    ("JSON null", "null"),
    ("10,000-deep nesting", _DEEP),
    ("a binary blob", b"\x00\xff\xfe binary"),
    ("a NaN literal", '{"window_s": NaN, "relative_accuracy": 0.01, "total": {"relative_accuracy": 0.01}}'),
    ("a total that is a number", '{"window_s": 1.0, "relative_accuracy": 0.01, "total": 5}'),
    ("a bucket key of 1e15", _HUGE_KEYS),
)


def sketches_cases() -> Iterator[Case]:
    argv = ("runs", "show", "streamed", "--sketches", "--db", "{db}")
    for what, value in DAMAGED_SKETCHES:
        yield Case(f"runs show --sketches: {what}", argv, {"db": sketches_store(value)}, True)
    yield Case("runs show --sketches: a table of another shape", argv, {"db": sketches_table_of_another_shape()}, True)


# ---- monitor recordings -----------------------------------------------------------------------

_LOOSE_SAMPLES = (  # the monitor's table without its constraints: what another writer may leave
    "CREATE TABLE monitor_samples (session_id, url, time_s, up, error, running, waiting, kv_usage, "
    "request_rate_per_s, prompt_tok_s, generation_tok_s, preemptions_per_s, prefix_hit_rate, ttft_p50_s, "
    "ttft_p99_s, itl_p50_s, itl_p99_s, e2e_p50_s, e2e_p99_s)"
)


def recording(
    samples: list[tuple[object, object, object]], *, table: bool = True, hit_rates: list[object] | None = None
) -> bytes:
    """A monitor store with one session whose target rows are ``(time_s, up, request_rate_per_s)``
    (and ``prefix_hit_rate`` from ``hit_rates``, one a row, when given)."""

    def build(path: Path) -> None:
        with sqlite3.connect(path) as con:
            con.execute("CREATE TABLE monitor_sessions (session_id TEXT PRIMARY KEY, started_at TEXT, urls_json TEXT)")
            con.execute("INSERT INTO monitor_sessions VALUES ('s1', '2026-01-01T00:00:00', '[\"http://a\"]')")
            if table:
                con.execute(_LOOSE_SAMPLES)
                con.executemany(
                    "INSERT INTO monitor_samples (session_id, url, time_s, up, request_rate_per_s, prompt_tok_s, "
                    "generation_tok_s, prefix_hit_rate) VALUES ('s1', 'http://a', ?, ?, ?, 2000.0, 200.0, ?)",
                    [(*row, None if hit_rates is None else hit_rates[i]) for i, row in enumerate(samples)],
                )

    return store_bytes(build)


def steady(n: int, step_s: float = 2.0, rate: float = 5.0) -> list[tuple[object, object, object]]:
    return [(i * step_s, 1, rate) for i in range(n)]


def torn(data: bytes) -> bytes:
    """The first half of a store: a file cut off while it was copied."""
    return data[: max(len(data) // 2, 4096) // 4096 * 4096 - 1024]


DAMAGED_RECORDINGS: tuple[tuple[str, bytes], ...] = (
    ("text where a time belongs", recording([*steady(5), ("abc", 1, 5.0)])),
    ("text where a rate belongs", recording([*steady(5), (12.0, 1, "fast")])),
    ("null where a time belongs", recording([*steady(5), (None, 1, 5.0)])),
    ("a blob where a rate belongs", recording([*steady(5), (12.0, 1, b"\x00\x01")])),
    ("an infinite rate", recording([*steady(5), (12.0, 1, float("inf"))])),
    ("a rate of 1e300", recording([*steady(5), (12.0, 1, 1e300)])),
    ("a span of 1e11 s", recording([*steady(5), (1e11, 1, 5.0)])),
    ("no samples table", recording([], table=False)),
    ("a prefix hit rate of 1.5", recording(steady(6), hit_rates=[0.5] * 5 + [1.5])),
    ("a negative prefix hit rate", recording(steady(6), hit_rates=[0.5] * 5 + [-0.2])),
    ("a prefix hit rate of 1e300", recording(steady(6), hit_rates=[0.5] * 5 + [1e300])),
    ("text where a prefix hit rate belongs", recording(steady(6), hit_rates=[0.5] * 5 + ["most"])),
    ("a torn file", torn(recording(steady(3000)))),
    ("a SQLite header and garbage", b"SQLite format 3\x00" + b"\xff" * 5000),
)


def prometheus(values: object, n_series: int = 1) -> bytes:
    import json

    result = [{"metric": {"instance": f"i{k}"}, "values": values} for k in range(n_series)]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()


DAMAGED_EXPORTS: tuple[tuple[str, bytes | Sparse], ...] = (
    ("a +Inf rate", prometheus([[1.7e9, "1"], [1.7e9 + 15, "+Inf"]])),
    ("a -Inf rate", prometheus([[1.7e9, "1"], [1.7e9 + 15, "-Inf"]])),
    ("a rate of 1e300", prometheus([[1.7e9, "1"], [1.7e9 + 15, "1e300"]])),
    ("a NaN time", b'{"status": "success", "data": {"resultType": "matrix", "result": [{"values": [[NaN, "1"]]}]}}'),
    ("a time of 1e300", prometheus([[1.7e9, "1"], [1e300, "1"]])),
    ("text as a value", prometheus([[1.7e9, "1"], [1.7e9 + 15, "fast"]])),
    ("a value that is a list", prometheus([[1.7e9, "1"], [1.7e9 + 15, [1]]])),
    ("10,000-deep nesting", b'{"data": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"),
    (
        "1.1M points",
        b'{"data": {"resultType": "matrix", "result": [{"values": [' + b",".join([b'[0,"1"]'] * 1_100_000) + b"]}]}}",
    ),
    ("34M points (340 MB)", Sparse(34_000_000 * 10)),
    ("binary", b"\x00\xff" * 100),
)


def replay_cases() -> Iterator[Case]:
    import json

    from hostile_cases import FLEET

    fleet = json.dumps(FLEET).encode()
    args = ("monitor", "replay", "{h}", "--fleet", "{f}", "--json")
    for what, recorded in DAMAGED_RECORDINGS:
        yield Case(f"monitor replay: {what}", args, {"h": recorded, "f": fleet}, True)
    for what, exported in DAMAGED_EXPORTS:
        yield Case(f"monitor replay export: {what}", args, {"h": exported, "f": fleet}, True)


def stored_cases() -> Iterator[Case]:
    yield from sketches_cases()
    yield from replay_cases()
