"""Shared fixtures: catalog specs and the vLLM start-up log cases; the hypothesis profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

DATA = Path(__file__).parent / "data"

# every property test draws the same examples on every run (the suite is deterministic); a test's
# own @settings adds to this profile
settings.register_profile("servecap", derandomize=True, deadline=None)
settings.load_profile("servecap")


@pytest.fixture(scope="session")
def startup_cases() -> dict[str, dict[str, Any]]:
    cases = json.loads((DATA / "vllm_startup_logs.json").read_text())["cases"]
    return {c["id"]: c for c in cases}
