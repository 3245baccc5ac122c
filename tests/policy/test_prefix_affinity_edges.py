"""Edges of the cache-aware router (sgl-router's ``cache_aware``; found by benchmarks/mutation.py):
the longest match wins wherever its replica sits, equal matches go to the least loaded, the
balance gate's comparisons are strict (``max - min > abs && max > rel x min``), and a zero
absolute threshold is a valid setting."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from servecap.errors import ServecapError
from servecap.policy.routers import PrefixAffinity, RouteRequest


@dataclass
class View:
    replica_id: int
    num_waiting: int = 0
    num_running: int = 0
    num_inflight_tokens: int = 0
    kv_usage: float = 0.0
    pool: str = "main"
    is_ready: bool = True

    def prefix_hit_blocks(self, block_keys: Sequence[int]) -> int:
        return 0

    def prefix_tier_blocks(self, block_keys: Sequence[int]) -> tuple[int, int, int, int]:
        return (self.prefix_hit_blocks(block_keys), 0, 0, 0)


def _req(i: int, keys: tuple[int, ...]) -> RouteRequest:
    return RouteRequest(i, 16 * len(keys), 16, None, keys, 16)


def test_the_longest_match_wins_wherever_it_sits() -> None:
    r = PrefixAffinity(random.Random(0), balance_abs_threshold=None)
    keys = (1, 2, 3, 4)
    r.index.insert(2, keys)  # the last replica holds the prefix
    assert r.choose(_req(0, keys), [View(0), View(1), View(2, 5)], 0.0) == 2


def test_equal_matches_go_to_the_least_loaded() -> None:
    r = PrefixAffinity(random.Random(0), balance_abs_threshold=None)
    keys = (1, 2, 3, 4)
    for rid in (0, 1, 2):
        r.index.insert(rid, keys)
    assert r.choose(_req(0, keys), [View(0, 3), View(1, 1), View(2, 2)], 0.0) == 1


def test_the_balance_gate_is_strict() -> None:
    r = PrefixAffinity(random.Random(0))  # sgl-router's launch defaults: abs 32, rel 1.0001
    assert not r.is_imbalanced([0, 32]) and r.is_imbalanced([0, 33])
    rel = PrefixAffinity(random.Random(0), balance_abs_threshold=0, balance_rel_threshold=1.5)
    assert not rel.is_imbalanced([10, 15]) and rel.is_imbalanced([10, 16])


def test_threshold_settings() -> None:
    assert PrefixAffinity(random.Random(0), balance_abs_threshold=0).balance_abs_threshold == 0
    with pytest.raises(ServecapError, match="balance_abs_threshold=-1"):
        PrefixAffinity(random.Random(0), balance_abs_threshold=-1)
