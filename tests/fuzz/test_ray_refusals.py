"""A distributed sweep given an unusable Ray address or worker count is refused in one line
within 10 s (it took 31-33 s, printed several lines, or hung: issue 33)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from hostile_cases import Case, materialize, run_in_process
from ray_cases import ray_cases

from servecap.distributed.ray_executor import parse_ray_address
from servecap.errors import ServecapError


@pytest.mark.parametrize("case", list(ray_cases()), ids=lambda c: c.name)
def test_an_unusable_cluster_is_refused_in_one_line(case: Case, tmp_path: Path) -> None:
    result = run_in_process(materialize(case, tmp_path), limit_s=15.0)
    assert result.outcome == "error", f"{case.name}: {result.outcome}\n{result.stderr[-1500:]}"
    assert "ray_address=" in result.stderr or "workers=" in result.stderr, result.stderr
    assert result.seconds < 5.0, f"{case.name}: {result.seconds:.1f} s"


@pytest.mark.parametrize(
    ("address", "target"),
    [
        ("auto", None),
        ("ray://10.0.0.5:10001", ("10.0.0.5", 10001)),
        ("head.example.internal:6379", ("head.example.internal", 6379)),
        ("ray://[::1]:10001", ("::1", 10001)),
    ],
)
def test_well_formed_addresses(address: str, target: tuple[str, int] | None) -> None:
    assert parse_ray_address(address) == target


@pytest.mark.parametrize("address", ["", "ray://", "ray://h:0", "ray://[zz]:1", "h", "ray://a..b:1", "ray://u@h:1"])
def test_malformed_addresses(address: str) -> None:
    with pytest.raises(ServecapError, match="ray_address"):
        parse_ray_address(address)


@pytest.mark.ray
def test_a_listener_that_is_not_ray_is_given_up_on_within_ten_seconds() -> None:
    """Something accepts TCP connections but never speaks Ray: ``ray.init`` would retry for
    about 30 s (or wait); the executor gives up after its connect timeout."""
    pytest.importorskip("ray")
    from servecap.distributed import make_executor

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    port = server.getsockname()[1]
    t0 = time.monotonic()
    try:
        ex = make_executor("ray", ray_address=f"ray://127.0.0.1:{port}")
        with pytest.raises(ServecapError, match="ray_address"):
            ex.map(abs, [1])
    finally:
        server.close()
        for c in held:
            c.close()
    assert time.monotonic() - t0 < 15.0
