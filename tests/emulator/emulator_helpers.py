"""Helpers for the emulator tests: a planned replica small enough to preempt."""

from __future__ import annotations

from typing import Any

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import Plan, plan
from servecap.emulator.server import ServerThread

BLOCK_TOKENS = 16
BYTES_PER_TOKEN = 131072  # Llama-3.1-8B, BF16 KV: 2 x 8 KV heads x 128 x 2 B x 32 layers


def small_plan(num_blocks: int = 160) -> Plan:
    """Llama-3.1-8B on an H100 with a KV pool of ``num_blocks`` 16-token blocks."""
    dep = build_deployment(
        resolve_model("meta-llama/Llama-3.1-8B"),
        lookup_gpu("H100"),
        max_model_len=2048,
        kv_cache_memory_bytes=num_blocks * BLOCK_TOKENS * BYTES_PER_TOKEN,
    )
    return plan(dep)


def sim_engine(srv: ServerThread) -> Any:
    """The :class:`servecap.sim.Engine` behind a server (its own counters, for comparison)."""
    return srv.state.driver.engine.engine  # type: ignore[attr-defined]
