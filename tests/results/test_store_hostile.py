"""The run store under hostile input: ids never used as patterns, damaged rows skipped and
named, foreign or damaged files refused in one line, a locked store refused before a bench."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from servecap.errors import ServecapError
from servecap.results import RequestRecord, summarize
from servecap.results.store import RunStore


def _store(tmp_path: Path, *ids: str) -> RunStore:
    store = RunStore(tmp_path / "runs.sqlite")
    recs = [RequestRecord(0, 0.0, 10, 2, first_token_s=0.1, end_s=0.2, token_times_s=(0.1, 0.2))]
    for rid in ids:
        store.save_simulated(
            run_id=rid, model="m", mode="open", settings={}, records=recs, summary=summarize(recs, duration_s=1.0)
        )
    return store


def _fingerprint(path: Path) -> tuple[int, str]:
    with sqlite3.connect(path) as con:
        n = int(con.execute("SELECT count(*) FROM runs").fetchone()[0])
    return n, hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("pattern", ["%", "_", "%%", "r%", "_1", "'", "' OR 1=1 --", ""])
def test_a_run_id_is_never_a_pattern(tmp_path: Path, pattern: str) -> None:
    store = _store(tmp_path, "r1")
    before = _fingerprint(store.path)
    with pytest.raises(ServecapError, match="run="):
        store.delete_run(pattern)
    assert _fingerprint(store.path) == before  # the row count and the file's bytes are unchanged


def test_exact_id_and_unique_prefix(tmp_path: Path) -> None:
    store = _store(tmp_path, "20260101-a", "20260101-ab", "20260102-c")
    assert store.resolve("20260101-a") == "20260101-a"  # exact wins over being a prefix of another
    assert store.resolve("20260102") == "20260102-c"
    with pytest.raises(ServecapError, match="ambiguous"):
        store.resolve("20260101")
    assert store.delete_run("20260101-a") == "20260101-a"
    assert [r.run_id for r in store.list_runs()] == ["20260102-c", "20260101-ab"]


def test_a_damaged_row_is_skipped_and_named(tmp_path: Path) -> None:
    store = _store(tmp_path, "good", "bad", "worse")
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE runs SET summary_json = '{not json' WHERE run_id = 'bad'")
        con.execute("UPDATE runs SET settings_json = '[1, 2]' WHERE run_id = 'worse'")
    runs, damaged = store.list_runs_checked()
    assert [r.run_id for r in runs] == ["good"]
    assert sorted(rid for rid, _ in damaged) == ["bad", "worse"]
    with pytest.raises(ServecapError, match=r"run='bad': its stored row is damaged \(JSONDecodeError"):
        store.get_run("bad")


def test_a_damaged_request_page_is_one_error(tmp_path: Path) -> None:
    store = _store(tmp_path, "r1")
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE requests SET token_times = x'0102' WHERE run_id = 'r1'")
    with pytest.raises(ServecapError, match=r"run='r1': its stored request 0 is damaged"):
        store.get_requests("r1")


def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE users (id INTEGER)")
    before = path.read_bytes()
    with pytest.raises(ServecapError, match="not a servecap run store"):
        RunStore(path)
    assert path.read_bytes() == before
    other = tmp_path / "runs2.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE runs (id INTEGER)")
    with pytest.raises(ServecapError, match="table runs lacks"):
        RunStore(other)


def test_a_damaged_file_is_refused_by_the_check(tmp_path: Path) -> None:
    store = _store(tmp_path, *(f"r{i}" for i in range(40)))
    data = bytearray(store.path.read_bytes())
    page = 4096
    for off in range(2 * page, len(data) - 16, page):  # scribble over every page after the schema
        data[off + 8 : off + 16] = b"\xff" * 8
    store.path.write_bytes(bytes(data))
    with pytest.raises(ServecapError, match=r"^db=.*(damaged|not a usable)") as err:
        RunStore(store.path).check_writable()
    assert "\n" not in str(err.value)


def test_a_locked_store_is_refused_quickly(tmp_path: Path) -> None:
    store = _store(tmp_path, "r1")
    holder = sqlite3.connect(store.path)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(ServecapError, match="locked by another process"):
            store.check_writable(timeout_s=0.1)
    finally:
        holder.rollback()
        holder.close()
    store.check_writable(timeout_s=0.1)  # free again


def _cli(args: list[str]) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from servecap.cli.main import cli

    result = CliRunner().invoke(cli, args)
    if isinstance(result.exception, ServecapError):
        return 2, result.stdout, f"error: {result.exception}"
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_runs_lists_around_a_damaged_row_and_warns(tmp_path: Path) -> None:
    store = _store(tmp_path, "good", "bad")
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE runs SET checks_json = 'garbage' WHERE run_id = 'bad'")
    code, out, err = _cli(["runs", "--db", str(store.path)])
    assert code == 0 and "good" in out and "bad" not in out
    assert err.startswith("warning: run bad is damaged and skipped: JSONDecodeError")
    code, _, err = _cli(["runs", "export", "bad", "--db", str(store.path)])
    assert code == 2 and err.startswith("error: run='bad': its stored row is damaged")


@pytest.mark.parametrize("command", [["runs"], ["runs", "export", "x"], ["runs", "delete", "x"], ["runs", "show", "x"]])
@pytest.mark.parametrize("content", [b"SQLite format 3\x00" + b"\xff" * 2000, b"not a database at all" * 50])
def test_runs_on_a_damaged_file_is_one_line(tmp_path: Path, command: list[str], content: bytes) -> None:
    db = tmp_path / "runs.sqlite"
    db.write_bytes(content)
    code, _, err = _cli([*command, "--db", str(db)])
    assert code == 2 and err.startswith("error: db=") and "\n" not in err.strip()
    assert db.read_bytes() == content
