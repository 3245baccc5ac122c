"""The emulator charges vLLM's per-request server cost (issue 20, defect 15), and a busy port is
one line (defect 16)."""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from click.testing import CliRunner
from emulator_helpers import small_plan

from servecap.emulator.driver import OWN_HTTP_PATH_S, request_overhead_remainder_s
from servecap.emulator.server import ServerThread, engine_state
from servecap.specs.perf import Efficiency


def _ttft_s(url: str) -> float:
    body = {"model": "m", "prompt": "abcd " * 50, "max_tokens": 2, "stream": True}
    with httpx.Client(timeout=30) as c:
        t0 = time.perf_counter()
        with c.stream("POST", url + "/v1/completions", json=body) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    return time.perf_counter() - t0
    raise AssertionError("no token")


def test_default_charge_is_the_fitted_overhead_less_the_own_path() -> None:
    # 6.5 ms fitted (Efficiency.request_overhead_s) - 1 ms of the emulator's own HTTP path
    assert request_overhead_remainder_s(Efficiency().request_overhead_s) == pytest.approx(0.0055)
    assert request_overhead_remainder_s(0.0005) == 0.0
    st = engine_state(small_plan(), model_name="m")
    assert st.driver.request_overhead_s == pytest.approx(Efficiency().request_overhead_s - OWN_HTTP_PATH_S)
    assert engine_state(small_plan(), model_name="m", request_overhead_s=0.0).driver.request_overhead_s == 0.0


def test_ttft_grows_by_the_charged_overhead() -> None:
    """Before the fix the emulator charged nothing: its TTFT did not move with the overhead."""
    p = small_plan()
    ttfts = {}
    for overhead in (0.0, 0.08):
        with ServerThread(engine_state(p, model_name="m", request_overhead_s=overhead)) as srv:
            _ttft_s(srv.url)  # warm the connection path
            ttfts[overhead] = min(_ttft_s(srv.url) for _ in range(3))
    assert 0.07 <= ttfts[0.08] - ttfts[0.0] <= 0.12


def test_emulate_on_a_busy_port_is_one_line() -> None:
    from servecap.cli.main import cli

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        res = CliRunner().invoke(cli, ["emulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--port", str(port)])
    assert res.exit_code != 0
    assert str(res.exception).startswith(f"port={port}: is not free on 127.0.0.1")
    assert "http://" not in res.output  # no URL printed before the error
