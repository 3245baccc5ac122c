"""Control endpoints only behind their flag; loopback by default; ``--replicas N`` starts N
independent emulators on consecutive ports and Ctrl-C stops every one of them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from servecap.emulator.server import fixed_state, free_port
from servecap.measure.asgi_stream import StreamingASGITransport


@pytest.mark.parametrize("enabled", [False, True])
async def test_stats_reset_only_with_the_flag(enabled: bool) -> None:
    st = fixed_state(0.001, 0.001, model_name="m", enable_control_endpoints=enabled)
    async with httpx.AsyncClient(transport=StreamingASGITransport(st.driver_app()), base_url="http://e") as c:
        r = await c.post("/servecap/stats/reset")
        if enabled:
            assert r.status_code == 200 and r.json() == {"ok": True}
        else:
            assert r.status_code == 404 and r.json()["error"]["code"] == 404
        assert (await c.get("/servecap/stats")).status_code == 200  # read-only: always served
    await st.driver.stop()


def test_emulate_binds_loopback_and_control_is_off_by_default() -> None:
    from servecap.cli.emulate_cmd import emulate

    defaults = {p.name: p.default for p in emulate.params}
    assert defaults["host"] == "127.0.0.1"
    assert defaults["enable_control_endpoints"] is False
    assert defaults["replicas"] == 1


def _consecutive_free_ports(n: int) -> int:
    for _ in range(50):
        base = free_port()
        if base + n - 1 > 65535:
            continue
        try:
            for p in range(base, base + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError("no consecutive free ports")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0): it has exited
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def test_two_replicas_serve_independently_and_stop_on_ctrl_c(tmp_path: Path) -> None:
    base = _consecutive_free_ports(2)
    err = (tmp_path / "stderr.txt").open("w+")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    parent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "servecap",
            "emulate",
            "--fixed-ttft-s",
            "0.002",
            "--fixed-itl-s",
            "0.001",
            "--served-model-name",
            "m",
            "--replicas",
            "2",
            "--port",
            str(base),
        ],
        stdout=subprocess.DEVNULL,
        stderr=err,
        env=env,
    )
    urls = [f"http://127.0.0.1:{base + i}" for i in range(2)]
    try:
        deadline = time.monotonic() + 60.0
        up: set[str] = set()
        while len(up) < 2:
            assert parent.poll() is None, (tmp_path / "stderr.txt").read_text()
            assert time.monotonic() < deadline, "replicas did not start"
            for u in urls:
                try:
                    if httpx.get(u + "/health", timeout=1.0).status_code == 200:
                        up.add(u)
                except httpx.TransportError:
                    pass
            time.sleep(0.1)
        for u in urls:  # each its own engine: each saw exactly its own request
            r = httpx.post(u + "/v1/completions", json={"model": "m", "prompt": "abcd", "max_tokens": 3}, timeout=10)
            assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
            metrics = httpx.get(u + "/metrics", timeout=5).text
            assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 1.0' in metrics
        err.seek(0)
        pids = [int(line.rsplit("pid ", 1)[1].rstrip(")\n")) for line in err if "(pid " in line]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        parent.send_signal(signal.SIGINT)  # Ctrl-C
        assert parent.wait(timeout=20) == 0
        deadline = time.monotonic() + 10.0
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in pids), "a replica outlived its parent"
        for u in urls:
            with pytest.raises(httpx.TransportError):
                httpx.get(u + "/health", timeout=1.0)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        err.close()


def test_replicas_refuse_a_busy_port_before_starting_any() -> None:
    from click.testing import CliRunner

    from servecap.cli.main import cli
    from servecap.errors import ServecapError

    base = _consecutive_free_ports(2)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base + 1))
        busy.listen()
        res = CliRunner().invoke(
            cli, ["emulate", "--fixed-ttft-s", "0.01", "--fixed-itl-s", "0.01", "--replicas", "2", "--port", str(base)]
        )
    assert isinstance(res.exception, ServecapError) and str(res.exception).startswith(f"port={base + 1}: is not free")
    res = CliRunner().invoke(
        cli, ["emulate", "--fixed-ttft-s", "0.01", "--fixed-itl-s", "0.01", "--replicas", "3", "--port", "65534"]
    )
    assert isinstance(res.exception, ServecapError) and str(res.exception).startswith("replicas=3")
