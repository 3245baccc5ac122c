"""`servecap bench`, `runs`, `emulate`, `calibrate` from the command line: errors and a real
sim-engine emulator on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli
from servecap.emulator.server import ServerProcess, free_port
from servecap.errors import ServecapError

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
    """`servecap emulate` with the simulator's engine, in a child process."""
    with ServerProcess(ENGINE_ARGS) as srv:
        yield srv


def test_unreachable_endpoint_is_one_line_and_exit_2(servecap_cli: Callable[..., Any]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    proc = servecap_cli("bench", url, "--rate", "1", "--num-requests", "1", "--no-store")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: url='{url}': cannot connect"), proc.stderr


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--endpoint", "grpc"], "endpoint"),
        (["--rate", "abc"], "rate"),
        (["--rate", "1,2", "--concurrency", "3,4"], "concurrency"),
        (["--rate", "1", "--warmup-s", "-1"], "warmup_s"),
        (["--rate", "1", "--timeout-s", "0"], "timeout_s"),
    ],
)
def test_bench_bad_flags_name_the_field(args: list[str], field: str) -> None:
    res = CliRunner().invoke(cli, ["bench", "http://127.0.0.1:9", *args, "--no-store"])
    assert isinstance(res.exception, ServecapError), res.output
    assert str(res.exception).startswith(f"{field}=")  # one line naming the field


def test_bench_bad_url_and_unknown_flag() -> None:
    res = CliRunner().invoke(cli, ["bench", "ftp://x", "--rate", "1"])
    assert isinstance(res.exception, ServecapError) and str(res.exception).startswith("url=")
    res = CliRunner().invoke(cli, ["bench", "http://127.0.0.1:9", "--bogus"])
    assert res.exit_code == 2 and "No such option" in res.output


def test_emulate_and_runs_bad_flags(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["emulate", "--fixed-ttft-s", "0.1"])
    assert isinstance(res.exception, ServecapError) and str(res.exception).startswith("fixed_itl_s=")
    res = CliRunner().invoke(cli, ["runs", "show", "nope", "--db", str(tmp_path / "r.sqlite")])
    assert isinstance(res.exception, ServecapError) and "no such run" in str(res.exception)
    res = CliRunner().invoke(cli, ["calibrate", "nope", "--db", str(tmp_path / "r.sqlite")])
    assert isinstance(res.exception, ServecapError)


def test_bench_sweep_against_the_engine_emulator(engine_server: ServerProcess, tmp_path: Path) -> None:
    """A rate sweep over a real socket: stored runs with the emulator's deployment, listed,
    exported, and compared with the simulator."""
    db = str(tmp_path / "runs.sqlite")
    res = CliRunner().invoke(
        cli,
        [
            "bench",
            engine_server.url,
            "--rate",
            "10,20",
            "--arrival",
            "constant",
            "--num-requests",
            "12",
            "--prompt-tokens",
            "200",
            "--output-tokens",
            "16",
            "--db",
            db,
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    sweep = json.loads(res.output)
    assert [r["rate"] for r in sweep["runs"]] == [10.0, 20.0]
    for r in sweep["runs"]:
        assert r["summary"]["completed"] == 12 and r["errors"] == {}
        assert r["summary"]["ttft_s"]["p50"] > 0
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--db", db, "--json"]).output)
    assert len(listed) == 2 and {r["sweep_id"] for r in listed} == {sweep["sweep_id"]}
    shown = json.loads(CliRunner().invoke(cli, ["runs", "show", "last", "--db", db]).output)
    assert shown["settings"]["deployment"]["gpu"] == "H100" and shown["settings"]["server_timing"] is True
    csv_text = CliRunner().invoke(cli, ["runs", "export", "last", "--format", "csv", "--db", db]).output
    assert len(csv_text.strip().splitlines()) == 13
    acc = CliRunner().invoke(cli, ["accuracy", "last", "--db", db, "--json"])
    assert acc.exit_code == 0, acc.output
    rows = {r["metric"]: r for r in json.loads(acc.output)["metrics"]}
    assert rows["completed"]["predicted"] == 12
    # the emulator runs the simulator's engine: decode timing agrees within client noise
    assert abs(rows["tpot_s.p50"]["error"]) < 0.2
    human = CliRunner().invoke(
        cli,
        [
            "bench",
            engine_server.url,
            "--concurrency",
            "2",
            "--num-requests",
            "4",
            "--prompt-tokens",
            "50",
            "--output-tokens",
            "4",
            "--db",
            db,
        ],
    )
    assert human.exit_code == 0 and "completed" in human.output
    res = CliRunner().invoke(cli, ["accuracy", "last", "--db", db])
    assert isinstance(res.exception, ServecapError) and "fixed-concurrency" in str(res.exception)


def test_bench_and_simulate_flags_give_the_same_request_stream(engine_server: ServerProcess, tmp_path: Path) -> None:
    """The same workload flags and seed: bench stores the workload simulate builds, and both draw
    the identical request stream from it."""
    import numpy as np

    from servecap.app.simulate_request import SimulateRequest
    from servecap.cli.simulate_cmd import build
    from servecap.workload import WorkloadSpec, generate_requests

    flags = [
        "--rate",
        "4",
        "--arrival",
        "gamma",
        "--cv",
        "2",
        "--prompt-tokens",
        "120",
        "--prompt-sigma",
        "0.5",
        "--output-tokens",
        "6",
        "--output-sigma",
        "0.3",
        "--num-requests",
        "8",
        "--seed",
        "7",
    ]
    db = str(tmp_path / "runs.sqlite")
    res = CliRunner().invoke(cli, ["bench", engine_server.url, *flags, "--db", db, "--json"])
    assert res.exit_code == 0, res.output
    shown = json.loads(CliRunner().invoke(cli, ["runs", "show", "last", "--db", db]).output)
    measured = WorkloadSpec.model_validate(shown["settings"]["workload"])
    built = build(
        SimulateRequest(
            model="meta-llama/Llama-3.1-8B",
            gpu="H100",
            max_model_len=4096,
            rate=4.0,
            prompt_tokens=120,
            output_tokens=6,
            prompt_sigma=0.5,
            output_sigma=0.3,
            arrival="gamma",
            cv=2.0,
            num_requests=8,
        )
    )
    assert measured == built.workload
    a = generate_requests(measured, np.random.default_rng(7))
    b = generate_requests(built.workload, np.random.default_rng(7))
    assert a == b and len({r.prompt_tokens for r in a}) > 1
