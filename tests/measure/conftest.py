"""Fixtures: a fixed-latency emulator (known delays), in-process or on a socket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from loadgen_helpers import ITL_S, TTFT_S

from servecap.emulator.app import EmulatorState
from servecap.emulator.server import ServerProcess, fixed_state


@pytest.fixture
def fixed() -> EmulatorState:
    return fixed_state(TTFT_S, ITL_S, model_name="fixed")


@pytest.fixture(scope="session")
def fixed_server() -> Iterator[ServerProcess]:
    """A real server on 127.0.0.1 in a child process."""
    with ServerProcess(
        ["--fixed-ttft-s", str(TTFT_S), "--fixed-itl-s", str(ITL_S), "--served-model-name", "fixed"]
    ) as srv:
        yield srv
