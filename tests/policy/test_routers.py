"""Routers on hand-made replica views: each rule worked by hand."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.errors import ServecapError
from servecap.policy.routers import (
    ROUTERS,
    PrefixAffinity,
    PrefixIndex,
    RouteRequest,
    Session,
    Weighted,
    make_router,
    mix64,
)


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


def req(i: int = 0, keys: tuple[int, ...] | None = None, session: int | None = None, prompt: int = 64) -> RouteRequest:
    return RouteRequest(i, prompt, 16, session, keys, 16)


def test_registry_names_match_classes() -> None:
    assert all(cls.name == name for name, cls in ROUTERS.items())


def test_round_robin_cycles() -> None:
    r = make_router("round-robin", random.Random(0))
    views = [View(0), View(1), View(2)]
    assert [r.choose(req(i), views, 0.0) for i in range(5)] == [0, 1, 2, 0, 1]


def test_least_outstanding_tokens_kv() -> None:
    views = [View(0, 2, 3, 900, 0.5), View(1, 0, 4, 100, 0.7), View(2, 1, 1, 500, 0.2)]
    assert make_router("least-outstanding", random.Random(0)).choose(req(), views, 0.0) == 2  # 5, 4, 2
    assert make_router("least-tokens", random.Random(0)).choose(req(), views, 0.0) == 1
    assert make_router("least-kv", random.Random(0)).choose(req(), views, 0.0) == 2


def test_power_of_two_picks_the_less_loaded_of_two() -> None:
    views = [View(0, 9), View(1, 0), View(2, 5)]
    r = make_router("power-of-two", random.Random(3))
    for _ in range(20):
        i = r.choose(req(), views, 0.0)
        assert i != 0  # replica 0 is the most loaded: it never wins a pair


def test_session_is_sticky_and_moves_only_the_sessions_of_a_removed_replica() -> None:
    r = Session(random.Random(0), virtual_nodes=32)
    views = [View(i) for i in range(4)]
    before = {s: views[r.choose(req(session=s), views, 0.0)].replica_id for s in range(400)}
    assert before == {s: views[r.choose(req(session=s), views, 0.0)].replica_id for s in range(400)}
    fewer = [v for v in views if v.replica_id != 2]
    after = {s: fewer[r.choose(req(session=s), fewer, 0.0)].replica_id for s in range(400)}
    moved = [s for s in range(400) if before[s] != after[s]]
    assert moved and all(before[s] == 2 for s in moved)
    assert len(set(before.values())) == 4
    # balanced: each replica holds 15-35% of the sessions, small ids included (a session id must
    # never hash onto a ring point: ids 0..63 once all landed on replica 0's points)
    shares = [sum(1 for v in before.values() if v == i) / 400 for i in range(4)]
    assert all(0.15 <= x <= 0.35 for x in shares), shares
    assert len({before[s] for s in range(64)}) == 4


def test_mix64_is_stable() -> None:
    assert mix64(0) == 0xE220A8397B1DCDAF


def test_prefix_affinity_gate_by_hand() -> None:
    r = PrefixAffinity(random.Random(0), cache_threshold=0.5, balance_abs_threshold=4, balance_rel_threshold=1.5)
    assert not r.is_imbalanced([10, 7])  # spread 3 <= 4
    assert not r.is_imbalanced([12, 10])  # spread 2
    assert r.is_imbalanced([10, 5])  # 5 > 4 and 10 > 7.5
    assert not r.is_imbalanced([30, 25])  # 5 > 4 but 30 <= 37.5
    keys = tuple(range(4))  # 4 blocks of 16 = the whole 64-token prompt
    views = [View(0, 1), View(1, 0)]
    # nothing indexed: the replica with the smallest index (ties: the first)
    assert r.choose(req(0, keys), views, 0.0) == 0
    # now replica 0 holds the prefix: affinity even though replica 1 is less loaded
    assert r.choose(req(1, keys), [View(0, 3), View(1, 0)], 0.0) == 0
    # imbalance overrides affinity: shortest queue
    assert r.choose(req(2, keys), [View(0, 20), View(1, 1)], 0.0) == 1
    # a match under the threshold goes to the emptiest index (replica 1 now holds 4 keys too;
    # both hold 4: the first) -- with a fresh 2-of-8-block request
    other = tuple(range(2)) + tuple(range(100, 106))
    assert r.choose(req(3, other, prompt=128), [View(0, 0), View(1, 0), View(2, 0)], 0.0) == 2


def test_pure_prefix_without_gate_always_follows_the_cache() -> None:
    r = PrefixAffinity(random.Random(0), balance_abs_threshold=None)
    keys = (1, 2, 3, 4)
    assert r.choose(req(0, keys), [View(0), View(1)], 0.0) == 0
    assert r.choose(req(1, keys), [View(0, 500), View(1, 0)], 0.0) == 0


def test_weighted_scores_by_hand() -> None:
    r = Weighted(random.Random(0), prefix_weight=2.0, queue_weight=1.0, kv_weight=1.0)
    keys = (7, 8, 9, 10)
    r.index.insert(1, keys[:2])
    views = [View(0, num_waiting=0, kv_usage=0.5), View(1, num_waiting=4, kv_usage=0.25)]
    # replica 0: 2*0 + 1*1 + 0.5 = 1.5; replica 1: 2*0.5 + 0 + 0.75 = 1.75
    assert r.scores(req(0, keys), views) == pytest.approx([1.5, 1.75])
    assert r.choose(req(0, keys), views, 0.0) == 1


def test_bad_router_settings_name_the_field() -> None:
    with pytest.raises(ServecapError, match=r"router=.least-outstandin.*did you mean: least-outstanding"):
        make_router("least-outstandin", random.Random(0))
    with pytest.raises(ServecapError, match=r"cache_threshold=1\.5"):
        make_router("prefix-affinity", random.Random(0), {"cache_threshold": 1.5})
    with pytest.raises(ServecapError, match="router_settings"):
        make_router("round-robin", random.Random(0), {"bogus": 1})


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["insert", "forget"]),
            st.integers(0, 5),
            st.lists(st.integers(0, 7), min_size=0, max_size=6),
        ),
        max_size=30,
    ),
    probe=st.lists(st.integers(0, 7), max_size=6),
    capacity=st.integers(1, 8),
)
def test_prefix_index_match_all_equals_match_per_replica(
    ops: list[tuple[str, int, list[int]]], probe: list[int], capacity: int
) -> None:
    index = PrefixIndex(capacity)
    for op, rid, keys in ops:
        if op == "insert":
            index.insert(rid, keys)
        else:
            index.forget(rid)
    ids = [0, 1, 2, 3, 4, 5]
    assert index.match_all(ids, probe) == [index.match(rid, probe) for rid in ids]
    assert index.match_all([4, 1], probe) == [index.match(4, probe), index.match(1, probe)]


def test_prefix_index_evicts_a_sequence_deepest_first() -> None:
    # a radix tree evicts leaves: over capacity, the shared start of a prefix stays matchable
    index = PrefixIndex(4)
    index.insert(0, [10, 11, 12])
    index.insert(0, [20, 21, 22])  # 6 keys > 4: the least recent are 11 and 12, not 10
    assert index.match(0, [10, 11, 12]) == 1
    assert index.match(0, [20, 21, 22]) == 3
    assert index.match_all([0], [10, 11]) == [1]


@dataclass
class CachedView(View):
    """A view whose prefix cache holds ``cached`` keys (leading matches counted)."""

    cached: frozenset[int] = frozenset()
    cpu: frozenset[int] = frozenset()  # held in its CPU tier
    remote: frozenset[int] = frozenset()  # in the shared store it reads

    def prefix_hit_blocks(self, block_keys: Sequence[int]) -> int:
        n = 0
        for k in block_keys:
            if k not in self.cached:
                break
            n += 1
        return n

    def prefix_tier_blocks(self, block_keys: Sequence[int]) -> tuple[int, int, int, int]:
        gpu = self.prefix_hit_blocks(block_keys)
        cpu = remote = 0
        for k in block_keys[gpu:]:
            if k in self.cpu:
                cpu += 1
            elif k in self.remote:
                remote += 1
            else:
                break
        return (gpu, cpu, 0, remote)


def test_precise_prefix_scores_the_blocks_replicas_hold_by_hand() -> None:
    """The approximate index sends nothing here; the precise scorer reads each cache: replica 1
    holds 3 of the 4 blocks. Replica 0: 2*0 + 1*1 + (1 - 0.5) = 1.5; replica 1: 2*0.75 + 0 +
    (1 - 0.25) = 2.25."""
    r = make_router("precise-prefix", random.Random(0))
    keys = (7, 8, 9, 10)
    views = [
        CachedView(0, num_waiting=0, kv_usage=0.5),
        CachedView(1, num_waiting=4, kv_usage=0.25, cached=frozenset(keys[:3])),
    ]
    assert r.scores(req(0, keys), views) == pytest.approx([1.5, 2.25])  # type: ignore[attr-defined]
    assert r.choose(req(0, keys), views, 0.0) == 1
    # the block a replica lost (evicted) no longer counts; the router kept no record of its own
    views[1].cached = frozenset()
    assert r.choose(req(1, keys), views, 0.0) == 0


def test_precise_prefix_scores_gpu_above_cpu_above_the_shared_store_by_hand() -> None:
    """Four replicas, equally loaded (queue score 1, KV score 1 each), the request's 4 blocks:
    in replica 0's GPU memory: 2 x 4/4 + 2 = 4.0; in replica 1's CPU tier: 2 x 0.8 x 4/4 + 2 = 3.6;
    in the shared store replica 2 reads: 2 x 0.5 x 4/4 + 2 = 3.0; nowhere replica 3 reads: 2.0.
    Two in GPU then two in CPU: 2 x (2 + 0.8 x 2)/4 + 2 = 3.8."""
    r = make_router("precise-prefix", random.Random(0))
    keys = (7, 8, 9, 10)
    ks = frozenset(keys)
    views = [
        CachedView(3, kv_usage=0.0),
        CachedView(2, kv_usage=0.0, remote=ks),
        CachedView(1, kv_usage=0.0, cpu=ks),
        CachedView(0, kv_usage=0.0, cached=ks),
        CachedView(4, kv_usage=0.0, cached=frozenset(keys[:2]), cpu=ks),
    ]
    assert r.scores(req(0, keys), views) == pytest.approx([2.0, 3.0, 3.6, 4.0, 3.8])  # type: ignore[attr-defined]
    assert r.choose(req(0, keys), views, 0.0) == 3
    # the weights are settings (0..1: a block below GPU memory counts no more than one in it)
    even = make_router("precise-prefix", random.Random(0), {"cpu_weight": 1.0, "remote_weight": 1.0})
    assert even.scores(req(0, keys), views) == pytest.approx([2.0, 4.0, 4.0, 4.0, 4.0])  # type: ignore[attr-defined]
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ServecapError, match="remote_weight"):
            make_router("precise-prefix", random.Random(0), {"remote_weight": bad})
