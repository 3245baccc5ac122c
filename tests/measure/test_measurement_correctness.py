"""Measurements that cannot mislead: prompts unique per run (a server's prefix cache cannot
answer one run from another), the measured cache hit rate shown and checked, failed runs
exit non-zero with the server's words, and Ctrl-C stores the partial run."""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli
from servecap.emulator.server import ServerProcess
from servecap.measure.checks import prefix_cache_check
from servecap.measure.loadgen import LoadConfig, body_for, make_trace, settle_interrupted
from servecap.measure.trace import ClientTrace
from servecap.workload import RequestSpec

ENGINE_ARGS = [
    "--model",
    "meta-llama/Llama-3.1-8B",
    "--gpu",
    "H100",
    "--max-model-len",
    "4096",
    "--served-model-name",
    "llama",
]


@pytest.fixture(scope="module")
def engine_server() -> Iterator[ServerProcess]:
    """`servecap emulate` with the simulator's engine (and its prefix cache), in a child process."""
    with ServerProcess(ENGINE_ARGS) as srv:
        yield srv


def _bench_json(url: str, db: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    res = CliRunner().invoke(
        cli,
        [
            "bench",
            url,
            "--arrival",
            "constant",
            "--num-requests",
            "8",
            "--prompt-tokens",
            "256",
            "--output-tokens",
            "4",
            "--seed",
            "3",
            "--db",
            str(db),
            "--json",
            *extra,
        ],
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_identical_runs_find_nothing_cached(engine_server: ServerProcess, tmp_path: Path) -> None:
    """The same bench twice (same seed, same lengths), then a two-step sweep: the second run and
    the second step send prompts the server has never seen, so nothing is answered from its
    prefix cache, and the measured hit rate says so."""
    db = tmp_path / "runs.sqlite"
    first = _bench_json(engine_server.url, db, "--rate", "20")
    second = _bench_json(engine_server.url, db, "--rate", "20")
    sweep = _bench_json(engine_server.url, db, "--rate", "20,25")
    for run in (*first["runs"], *second["runs"], *sweep["runs"]):
        assert run["summary"]["completed"] == 8
        assert run["prefix_cache_hit_rate"] == 0.0 and run["summary"]["prefix_cache_hit_rate"] == 0.0
        assert run["summary"]["cached_prompt_tokens"] == 0
        assert {c["name"]: c["ok"] for c in run["checks"]}["prefix_cache"] is True
    # the rate is stored with the run, and `runs` lists both
    shown = json.loads(CliRunner().invoke(cli, ["runs", "show", second["runs"][0]["run_id"], "--db", str(db)]).output)
    assert shown["summary"]["prefix_cache_hit_rate"] == 0.0 and shown["settings"]["run_nonce"]
    # and accuracy accepts a run whose hits match the simulation's
    acc = CliRunner().invoke(cli, ["accuracy", second["runs"][0]["run_id"], "--db", str(db), "--json"])
    assert acc.exit_code == 0, acc.output
    rows = {r["metric"]: r for r in json.loads(acc.stdout)["metrics"]}
    assert rows["prefix_cache_hit_rate"]["measured"] == rows["prefix_cache_hit_rate"]["predicted"] == 0.0


def test_shared_prefix_groups_share_within_a_run_only(engine_server: ServerProcess, tmp_path: Path) -> None:
    """A workload with a shared system prompt: its requests hit the cache within the run (the
    hits the workload asks for: no warning) and the next run starts cold, unless asked."""
    wl = tmp_path / "wl.json"
    wl.write_text(
        json.dumps(
            {
                "arrival": {"kind": "constant", "rate_per_s": 10.0},
                "prompt_tokens": 64,
                "output_tokens": 4,
                "num_requests": 6,
                "prefix": {"tokens": 256, "groups": 1, "share": 1.0},
            }
        )
    )
    db = tmp_path / "runs.sqlite"

    def run(*extra: str) -> dict:  # type: ignore[type-arg]
        res = CliRunner().invoke(
            cli, ["bench", engine_server.url, "--workload", str(wl), "--db", str(db), "--json", *extra]
        )
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)["runs"][0]  # type: ignore[no-any-return]

    a, b = run(), run()
    for r in (a, b):  # all but the first request find the 256-token prefix (16 blocks) cached
        assert r["summary"]["cached_prompt_tokens"] == 5 * 256
        assert {c["name"]: c["ok"] for c in r["checks"]}["prefix_cache"] is True
    c, d = run("--share-prefixes-across-runs"), run("--share-prefixes-across-runs")
    assert c["summary"]["cached_prompt_tokens"] == 5 * 256
    assert d["summary"]["cached_prompt_tokens"] == 6 * 256  # deliberately warm from the run before


def test_prompts_carry_the_run_nonce() -> None:
    spec = RequestSpec(7, 0.0, 300, 4, prefix_group=2, prefix_tokens=128)
    a, b = (LoadConfig(base_url="http://x", model="m", run_nonce=n) for n in ("aaaa", "bbbb"))
    pa, pb = body_for(a, make_trace(spec))["prompt"], body_for(b, make_trace(spec))["prompt"]
    assert len(pa) == len(pb) == 4 * 300 and pa[:64] != pb[:64]  # differ from the first block on
    shared = LoadConfig(base_url="http://x", model="m", run_nonce="cccc", share_prefixes_across_runs=True)
    shared2 = LoadConfig(base_url="http://x", model="m", run_nonce="dddd", share_prefixes_across_runs=True)
    pc, pd = body_for(shared, make_trace(spec))["prompt"], body_for(shared2, make_trace(spec))["prompt"]
    assert pc[: 4 * 128] == pd[: 4 * 128] and pc[4 * 128 :] != pd[4 * 128 :]


def _trace(i: int, cached: int | None, *, group: int | None = None, prefix: int = 0, turn: int = 0) -> ClientTrace:
    return ClientTrace(
        str(i),
        float(i),
        100,
        4,
        prefix_group=group,
        prefix_tokens=prefix,
        turn=turn,
        sent_s=float(i),
        usage_prompt_tokens=100,
        cached_prompt_tokens=cached,
    )


def test_unexpected_cache_hits_are_a_warning() -> None:
    stale = prefix_cache_check([_trace(i, 96) for i in range(4)])  # nothing shared, 96% cached
    assert not stale.ok and "primed the server's cache" in stale.message and "96.0%" in stale.message
    expected = prefix_cache_check(
        [_trace(i, 48, group=1, prefix=50) for i in range(4)] + [_trace(9, 96, turn=2)]
    )  # shared prefixes; a chat turn's history
    assert expected.ok and expected.value == 0.0
    unknown = prefix_cache_check([_trace(i, None) for i in range(4)])
    assert unknown.ok and unknown.value is None and "unknown" in unknown.message


def test_unsent_requests_are_not_errors_after_an_interrupt() -> None:
    sent_done = ClientTrace("0", 0.0, 10, 2, sent_s=0.0, end_s=0.5)
    in_flight = ClientTrace("1", 0.1, 10, 2, sent_s=0.1, error="interrupted", error_detail="in flight")
    unsent = ClientTrace("2", 5.0, 10, 2)
    kept = settle_interrupted([sent_done, in_flight, unsent], wall_s=1.0)
    assert kept == [sent_done, in_flight]
    assert in_flight.trimmed and in_flight.end_s == 1.0 and not sent_done.trimmed


def test_a_run_of_failures_exits_non_zero_with_the_servers_message(
    engine_server: ServerProcess, tmp_path: Path
) -> None:
    res = CliRunner().invoke(
        cli,
        [
            "bench",
            engine_server.url,
            "-m",
            "wrong-model",
            "--rate",
            "20",
            "--num-requests",
            "4",
            "--output-tokens",
            "2",
            "--db",
            str(tmp_path / "r.sqlite"),
        ],
    )
    assert res.exit_code == 1, res.output
    assert "4 of 4 requests failed" in res.stderr and "http_404" in res.stderr
    assert "The model `wrong-model` does not exist." in res.stderr  # the server's own words
    js = CliRunner().invoke(
        cli,
        [
            "bench",
            engine_server.url,
            "-m",
            "wrong-model",
            "--rate",
            "20",
            "--num-requests",
            "4",
            "--output-tokens",
            "2",
            "--no-store",
            "--json",
        ],
    )
    assert js.exit_code == 1
    out = json.loads(js.stdout)
    assert out["failure"] and out["runs"][0]["failed_requests"] == 4
    assert "does not exist" in out["runs"][0]["first_error"]
    # a few failures under the threshold do not fail the run
    ok = CliRunner().invoke(
        cli,
        [
            "bench",
            engine_server.url,
            "-m",
            "wrong-model",
            "--rate",
            "20",
            "--num-requests",
            "2",
            "--output-tokens",
            "2",
            "--no-store",
            "--max-error-fraction",
            "1",
        ],
    )
    assert ok.exit_code == 0, ok.output


def _wait_for_line(proc: subprocess.Popen[bytes], timeout_s: float) -> bytes:
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.1)
        if ready:
            return proc.stderr.readline()
    raise AssertionError("bench printed nothing")


@pytest.mark.parametrize(
    ("sig", "code", "message"),
    [
        (signal.SIGINT, 130, b"interrupted: the partial run is stored as"),
        (signal.SIGTERM, 143, b"terminated (SIGTERM): the partial run is stored as"),
    ],
)
def test_ctrl_c_or_sigterm_stores_the_partial_run(
    fixed_server: ServerProcess, tmp_path: Path, sig: signal.Signals, code: int, message: bytes
) -> None:
    """A real `servecap bench` process against a real emulator on 127.0.0.1, sent SIGINT (Ctrl-C)
    or SIGTERM (a container runtime, CI) midway: both store the partial run and exit non-zero."""
    db = tmp_path / "runs.sqlite"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "servecap",
            "bench",
            fixed_server.url,
            "--rate",
            "20",
            "--arrival",
            "constant",
            "--num-requests",
            "400",
            "--output-tokens",
            "8",
            "--db",
            str(db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")},
    )
    try:
        first = _wait_for_line(proc, 60.0)
        assert first.startswith(b"bench: 0/400 requests"), first
        time.sleep(1.5)  # ~30 requests sent, one or two in flight
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert message in err
    with sqlite3.connect(db) as con:
        [(run_id, interrupted, n, n_err)] = con.execute(
            "SELECT run_id, interrupted, num_requests, num_errors FROM runs"
        ).fetchall()
        errors = dict(con.execute("SELECT error, count(*) FROM requests WHERE error IS NOT NULL GROUP BY error"))
    assert interrupted == 1 and 10 <= n < 100  # the requests sent, not the 400 planned
    assert set(errors) <= {"interrupted"} and n_err == sum(errors.values())  # no unsent "client_error"
    shown = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert run_id in shown.output and "interrupted" in shown.output


def test_accuracy_refuses_cache_hits_the_simulation_cannot_have() -> None:
    from servecap.app.accuracy import check_hit_rates
    from servecap.errors import ServecapError

    check_hit_rates("r", 0.30, 0.25)  # shared prefixes, simulated alike: compared
    check_hit_rates("r", None, 0.0)  # the server did not say: compared (nothing to go on)
    with pytest.raises(
        ServecapError, match=r"measured prefix-cache hit rate 98.4% but the simulated workload gives 0.0%"
    ):
        check_hit_rates("r", 0.984, 0.0)
