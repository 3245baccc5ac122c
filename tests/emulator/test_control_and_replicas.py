"""Control endpoints only behind their flag; loopback by default; ``--replicas N`` starts N
independent emulators on consecutive ports and Ctrl-C stops every one of them."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from servecap.emulator.server import ServerProcess, fixed_state, free_ports
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


def _alive(pid: int) -> bool:
    """Running (a zombie has exited: it only waits for its parent to reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split(") ", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_two_replicas_serve_independently_and_stop_on_ctrl_c() -> None:
    args = ["--fixed-ttft-s", "0.002", "--fixed-itl-s", "0.001", "--served-model-name", "m"]
    with ServerProcess(args, replicas=2) as srv:
        assert srv.urls == [f"http://127.0.0.1:{srv.port}", f"http://127.0.0.1:{srv.port + 1}"]
        for u in srv.urls:  # each its own engine: each saw exactly its own request
            r = httpx.post(u + "/v1/completions", json={"model": "m", "prompt": "abcd", "max_tokens": 3}, timeout=10)
            assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
            metrics = httpx.get(u + "/metrics", timeout=5).text
            assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 1.0' in metrics
        children = [p for p in _children(srv.proc.pid) if _alive(p)]
        replicas = [p for p in children if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(replicas) == 2
        srv.proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert srv.proc.wait(timeout=20) == 0
        deadline = time.monotonic() + 10.0
        while any(_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in children), "a child outlived its parent"
        for u in srv.urls:
            with pytest.raises(httpx.TransportError):
                httpx.get(u + "/health", timeout=1.0)


def test_replicas_refuse_a_busy_port_before_starting_any() -> None:
    from click.testing import CliRunner

    from servecap.cli.main import cli
    from servecap.errors import ServecapError

    base = free_ports(2)
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
