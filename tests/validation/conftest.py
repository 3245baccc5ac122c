"""The `slow` marker: tests that run the whole corpus (about a minute); they still run in CI."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: runs the whole validation corpus (about a minute)")
