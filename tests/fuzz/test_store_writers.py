"""Every writer checks its store before its work (issue 33): a store of an unknown schema version
is never written, a read-only store and a full disk are refused in one line before bench sends a
request, before a sweep or a fleet simulation runs, before the monitor's first scrape."""

from __future__ import annotations

import contextlib
import hashlib
import resource
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hostile_cases import FLEET, SWEEP, run_in_process

from servecap.results.store import RunStore


def _writers(tmp_path: Path, db: Path) -> dict[str, list[str]]:
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(FLEET), encoding="utf-8")
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(SWEEP), encoding="utf-8")
    return {
        "bench": ["bench", "http://127.0.0.1:9", "--rate", "1", "--num-requests", "2", "--db", str(db)],
        "sweep": ["sweep", str(tmp_path / "sweep.yaml"), "--executor", "serial", "--db", str(db)],
        "fleet simulate --save": [
            "fleet",
            "simulate",
            "--fleet",
            str(tmp_path / "fleet.yaml"),
            "--rate",
            "5",
            "--num-requests",
            "20",
            "--save",
            "--db",
            str(db),
        ],
        "monitor --db": ["monitor", "http://127.0.0.1:9", "--once", "--db", str(db)],
    }


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused_naming_the_store(argv: list[str], db: Path, problem: str) -> None:
    result = run_in_process(argv, limit_s=20.0)
    assert result.outcome == "error", f"{argv[0]}: {result.outcome}\n{result.stderr[-1500:]}"
    assert f"db='{db}'" in result.stderr and problem in result.stderr, result.stderr
    assert result.seconds < 5.0, f"refused after {result.seconds:.1f} s: after the work"


@pytest.mark.parametrize("version", [-1, 99])
@pytest.mark.parametrize("writer", ["bench", "sweep", "fleet simulate --save", "monitor --db"])
def test_a_store_of_an_unknown_schema_is_never_written(tmp_path: Path, writer: str, version: int) -> None:
    db = tmp_path / "runs.sqlite"
    RunStore(db)
    with sqlite3.connect(db) as con:
        con.execute(f"PRAGMA user_version = {version}")
    before = _digest(db)
    _refused_naming_the_store(_writers(tmp_path, db)[writer], db, "schema")
    assert _digest(db) == before


@contextlib.contextmanager
def _immutable(path: Path) -> Iterator[None]:
    """The file made immutable (``chattr +i``): read-only even to root, as a read-only mount is."""
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)], check=False).returncode != 0:
        pytest.skip("chattr +i is not available here (needs CAP_LINUX_IMMUTABLE on ext4/xfs)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=False)


@pytest.mark.parametrize("writer", ["bench", "sweep", "fleet simulate --save", "monitor --db"])
def test_a_read_only_store_is_refused_before_the_work(tmp_path: Path, writer: str) -> None:
    db = tmp_path / "runs.sqlite"
    RunStore(db)
    argv = _writers(tmp_path, db)[writer]
    with _immutable(db):
        _refused_naming_the_store(argv, db, "readonly")


@contextlib.contextmanager
def _file_size_limit(limit_bytes: int) -> Iterator[None]:
    """A file-size limit (``ulimit -f``): SQLite's writes past it fail, as on a full disk."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)


@pytest.mark.parametrize("writer", ["bench", "sweep", "fleet simulate --save", "monitor --db"])
def test_a_full_disk_is_refused_before_the_work(tmp_path: Path, writer: str) -> None:
    db = tmp_path / "runs.sqlite"
    RunStore(db)
    argv = _writers(tmp_path, db)[writer]
    with _file_size_limit(db.stat().st_size + 4096):
        _refused_naming_the_store(argv, db, "room")
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
