"""Fixtures: planned deployments small enough to simulate quickly."""

from __future__ import annotations

import pytest
from sim_helpers import make_plan

from servecap.core.plan import Plan


@pytest.fixture(scope="session")
def llama8b_plan() -> Plan:
    return make_plan()


@pytest.fixture(scope="session")
def small_pool_plan() -> Plan:
    """A pool of a few hundred blocks: preemption happens."""
    return make_plan(kv_cache_memory_bytes=400 * 16 * 131072)
