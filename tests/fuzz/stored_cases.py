"""Damaged stored data (issue 33): stores whose rows were written by something else or torn --
a sketches row that is not the accumulators' JSON, monitor recordings with text or nulls where
numbers belong, a store of an unknown schema version. Each store is built as a real SQLite file
(bytes) so the fuzz tests and ``benchmarks/hostile_inputs.py`` run the same cases."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from hostile_cases import Case


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
