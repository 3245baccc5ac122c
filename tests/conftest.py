"""Shared fixtures: catalog specs and the vLLM start-up log cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def startup_cases() -> dict[str, dict[str, Any]]:
    cases = json.loads((DATA / "vllm_startup_logs.json").read_text())["cases"]
    return {c["id"]: c for c in cases}
