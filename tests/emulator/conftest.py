"""Emulator fixtures: a planned replica small enough to preempt, served on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from emulator_helpers import small_plan

from servecap.emulator.server import ServerThread, engine_state


@pytest.fixture()
def engine_server() -> Iterator[ServerThread]:
    """A real uvicorn server over the simulator's engine (160 KV blocks) on a free port."""
    state = engine_state(small_plan(), model_name="m")
    with ServerThread(state) as srv:
        yield srv
