"""The one way out for files (``servecap.outputs``): a temporary file beside the target renamed
into place; every OS error one line naming the flag and the path; the run stored even when the
file after it fails (issue 33)."""

from __future__ import annotations

import errno
import os
import resource
import signal
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from servecap.errors import ServecapError
from servecap.outputs import check_target, replacing, write_text


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old", encoding="utf-8")
    write_text(target, "new page", "--html")
    assert target.read_text(encoding="utf-8") == "new page"
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's 0600
    assert _leftovers(tmp_path) == []


def test_a_file_too_large_for_the_disk_is_one_error_and_the_old_file_stays(tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes the kernel refuse the write (EFBIG), as a full disk does (ENOSPC)."""
    target = tmp_path / "out.csv"
    target.write_text("old", encoding="utf-8")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(ServecapError) as err:
            write_text(target, "x" * 100_000, "--csv")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert err.value.field == "--csv" and str(target) in str(err.value) and "\n" not in str(err.value)
    assert target.read_text(encoding="utf-8") == "old"
    assert _leftovers(tmp_path) == []


def test_an_os_error_while_writing_names_the_flag(tmp_path: Path) -> None:
    target = tmp_path / "out.parquet"
    with (
        pytest.raises(ServecapError, match=r"--records=.*out.parquet.*No space left on device"),
        replacing(target, "--records"),
    ):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert not target.exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("", "empty name"),
        ("/dev/full", "character device"),
        ("/proc/version", "cannot be written in its folder"),
        ("/sys/servecap-new.html", "Permission denied"),
        ("/nonexistent-servecap/x.html", "does not exist"),
    ],
)
def test_check_target_refuses(target: str, problem: str) -> None:
    with pytest.raises(ServecapError, match=problem):
        check_target(target, "--html")


def test_check_target_refuses_a_directory_and_a_fifo(tmp_path: Path) -> None:
    with pytest.raises(ServecapError, match="is a directory"):
        check_target(tmp_path, "--html")
    with pytest.raises(ServecapError, match="ends with a slash"):
        check_target(f"{tmp_path}/new/", "--html")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ServecapError, match="FIFO"):
        check_target(fifo, "--records")


FLEET = """pools:
  - {name: a, model: Qwen/Qwen3-0.6B, gpu: H100, max_model_len: 4096, replicas: 1}
"""


def _runs(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])


def test_records_that_fail_mid_run_leave_the_run_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    from servecap.cli.main import cli

    def full(self: object, table: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    (tmp_path / "fleet.yaml").write_text(FLEET, encoding="utf-8")
    db, out = tmp_path / "runs.sqlite", tmp_path / "records.parquet"
    argv = ["fleet", "simulate", "--fleet", str(tmp_path / "fleet.yaml"), "--rate", "5", "--num-requests", "40"]
    result = CliRunner().invoke(cli, [*argv, "--records", str(out), "--save", "--db", str(db)])
    assert isinstance(result.exception, ServecapError), result.output
    assert result.exception.field == "--records" and "No space left" in str(result.exception)
    assert _runs(db) == 1  # stored before the failed file was reported
    assert not out.exists() and _leftovers(tmp_path) == []


def test_sweep_csv_that_fails_after_the_run_leaves_the_runs_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import servecap.outputs
    from servecap.cli.main import cli

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(servecap.outputs.os, "fsync", full)
    sweep = (
        "fleet:\n"
        + "\n".join("  " + ln for ln in FLEET.splitlines())
        + "\nworkload: {arrival: {kind: poisson, rate_per_s: 5}, prompt_tokens: 100, output_tokens: 8,"
        " num_requests: 10}\nmode: grid\naxes: {fleet.pools.0.replicas: [1, 2]}\n"
    )
    (tmp_path / "sweep.yaml").write_text(sweep, encoding="utf-8")
    db, out = tmp_path / "runs.sqlite", tmp_path / "points.csv"
    argv = ["sweep", str(tmp_path / "sweep.yaml"), "--executor", "serial", "--db", str(db), "--csv", str(out)]
    result = CliRunner().invoke(cli, argv)
    assert isinstance(result.exception, ServecapError), result.output
    assert result.exception.field == "--csv"
    assert _runs(db) == 2
    assert not out.exists() and _leftovers(tmp_path) == []
