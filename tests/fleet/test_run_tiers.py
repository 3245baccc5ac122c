"""The cache replay's run-keyed KV tiers (fleet/run_tiers.py, fleet/cache_replay_tiers.py) against
the per-block reference (the engine's TierStore driven block by block, block_tiers_reference.py):
random calls as the replay's core makes them -- GPU evictions, time steps, router scores and
promotions -- give the same answers and leave every tier with the same blocks in the same LRU
order with the same ready times, never over its capacity; whole replays give the same results;
and the engine's per-block keys never merge two runs' blocks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from block_tiers_reference import BlockReplayTiers
from cache_replay_helpers import BS, replay_fleet
from cache_replay_helpers import setup as setup  # the fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import servecap.fleet.cache_replay as cache_replay_core
import servecap.fleet.cache_replay_run as cache_replay_run
from servecap.core.kv_tiers import KvTier
from servecap.fleet.cache_replay_run import CacheReplayResult, cache_replay
from servecap.fleet.cache_replay_tiers import ReplayTiers
from servecap.fleet.run_tiers import RunBelow, RunTier, Span
from servecap.fleet.stream_source import chunked
from servecap.sim import EngineSetup
from servecap.sim.kv_tiers import LruTier, TierSetup
from servecap.workload import RequestArrays
from servecap.workload.block_hash import _MIX

RUN_KEYS = (-(10**12), -7 * 10**6, 0, 10**6, 5 * 10**9, 2**62)  # far apart: no shared block keys
RUN_BLOCKS = (1, 3, 8, 5, 2, 6)  # each run's blocks
TIERS = (
    ("cpu",),
    ("ssd",),
    ("remote",),
    ("cpu", "ssd"),
    ("cpu", "remote"),
    ("ssd", "remote"),
    ("cpu", "ssd", "remote"),
)


def _setup(names: tuple[str, ...], capacities: list[int], latency_s: float) -> TierSetup:
    """Tiers of the given blocks each (one byte a block; 0.5 bytes: no capacity), each block's
    write and load taking ``latency_s`` plus a microsecond."""
    tiers = tuple(KvTier(n, float(c) if c else 0.5, 1e6, latency_s) for n, c in zip(names, capacities, strict=True))
    return TierSetup(tiers, key_bytes_per_gpu=1, gpus=1, num_layers=4)


def _state(t: ReplayTiers) -> list[list[tuple[int, float]]]:
    rows = [tier.blocks() for tiers in t.private for tier in tiers]
    if t.remote is not None:
        rows.append(t.remote.blocks())
    return rows


def _same(new: ReplayTiers, ref: BlockReplayTiers) -> None:
    assert _state(new) == ref.blocks()
    assert new.occupancy() == ref.occupancy()
    assert all(0 <= held <= max(cap, 0) for _, held, cap in new.occupancy())
    assert [len(rows) for rows in _state(new)] == [held for _, held, _ in new.occupancy()]
    assert new.hit_tokens() == ref.hit_tokens()
    assert new.load_s == ref.load_s


def _keys(spans: list[Span]) -> list[int]:
    return [s.run.key + b for s in spans for b in (range(s.lo, s.hi) if s.asc else range(s.hi - 1, s.lo - 1, -1))]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(data=st.data())
def test_one_tier_equals_the_per_block_lru(data: st.DataObject) -> None:
    """:class:`RunTier` against :class:`LruTier` directly: ranges put in either order with any
    ready times (a refreshed block keeps the earlier), a tier of no capacity passing all on, blocks
    taken out (a promotion from a private tier) or moved to the recent end lowest first (from the
    store), compared block for block after each call."""
    capacity = data.draw(st.integers(0, 10))
    kind = KvTier("cpu", 1.0, 1e6)
    index: dict[int, RunBelow] = {}
    tier = RunTier(kind, capacity, 0, 0, index)
    ref = LruTier(kind, capacity)
    other = RunTier(kind, 6, 1, 0, index)  # another replica's tier: the runs' pieces there are not this one's
    runs = [RunBelow(k) for k in RUN_KEYS[:3]]
    for _ in range(data.draw(st.integers(1, 30))):
        run = data.draw(st.sampled_from(runs))
        held = [b for b in range(8) if run.key + b in ref.lru]
        if data.draw(st.integers(0, 3)) == 0:
            lo = data.draw(st.integers(0, 7))
            other.put(run, lo, data.draw(st.integers(lo + 1, 8)), data.draw(st.booleans()), 0.0, None)
        elif len(held) > 0 and data.draw(st.booleans()):  # take out or move a stretch of one piece
            p = tier.find(run, data.draw(st.sampled_from(held)))
            assert p is not None
            lo = data.draw(st.integers(p.lo, p.hi - 1))
            hi = data.draw(st.integers(lo + 1, p.hi))
            ready = p.ready_s
            tier.cut(p, lo, hi)
            if data.draw(st.booleans()):
                tier.size -= hi - lo
                for b in range(lo, hi):
                    del ref.lru[run.key + b]
            else:
                tier.add(run, lo, hi, True, ready)
                for b in range(lo, hi):
                    ref.lru.move_to_end(run.key + b)
        else:
            lo = data.draw(st.integers(0, 7))
            hi = data.draw(st.integers(lo + 1, 8))
            asc = data.draw(st.booleans())
            ready = data.draw(st.sampled_from([0.0, 1.0, 2.0, 3.0]))
            out: list[Span] = []
            tier.put(run, lo, hi, asc, ready, out)
            order = range(lo, hi) if asc else range(hi - 1, lo - 1, -1)
            pushed = [k for b in order if (k := ref.put(run.key + b, ready)) is not None]
            assert _keys(out) == pushed
        assert tier.blocks() == list(ref.lru.items())
        assert tier.size == len(ref.lru) <= max(capacity, 0)
    mine = {r.key for r in runs if any(r.key + b in ref.lru for b in range(8))}
    assert sorted(index) == sorted(mine | {k - b for k, _ in other.blocks() for b in range(8) if k - b in RUN_KEYS})


def test_pushed_out_blocks_keep_their_order_across_pieces() -> None:
    """Worked by hand: a tier of 4 blocks holds run A's blocks 2, 3 (put lowest first) then 1, 0
    (put highest first): A = [2, 3, 1, 0], two pieces. Run B's 4 blocks push all of A out, oldest
    first: 2, 3, 1, 0 (two spans, not one: they run the other way)."""
    kind = KvTier("cpu", 4.0, 1e6)
    tier = RunTier(kind, 4, 0, 0, {})
    a, b = RunBelow(0), RunBelow(1000)
    tier.put(a, 2, 4, True, 0.0, None)
    tier.put(a, 0, 2, False, 0.0, None)
    assert tier.blocks() == [(2, 0.0), (3, 0.0), (1, 0.0), (0, 0.0)]
    out: list[Span] = []
    tier.put(b, 0, 4, False, 1.0, out)
    assert _keys(out) == [2, 3, 1, 0] and len(out) == 2
    assert tier.blocks() == [(1003, 1.0), (1002, 1.0), (1001, 1.0), (1000, 1.0)]


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_calls_equal_the_per_block_store(data: st.DataObject) -> None:
    names = data.draw(st.sampled_from(TIERS))
    capacities = data.draw(st.lists(st.integers(0, 14), min_size=len(names), max_size=len(names)))
    latency_s = data.draw(st.sampled_from([0.0, 0.0, 0.01, 0.3]))
    replicas = data.draw(st.integers(1, 3))
    s = _setup(names, capacities, latency_s)
    new = ReplayTiers(s, replicas, BS, (0.8, 0.7, 0.5))
    ref = BlockReplayTiers(s, replicas, BS, (0.8, 0.7, 0.5))
    now = 0.0
    for _ in range(data.draw(st.integers(1, 60))):
        op = data.draw(st.sampled_from(["time", "demote", "demote", "request"]))
        if op == "time":
            now += data.draw(st.sampled_from([0.0, 0.01, 0.1, 0.5, 2.0]))
            new.set_time(now)
            ref.set_time(now)
        elif op == "demote":
            i = data.draw(st.integers(0, replicas - 1))
            r = data.draw(st.integers(0, len(RUN_KEYS) - 1))
            n = data.draw(st.integers(1, RUN_BLOCKS[r]))
            new.demote(i, RUN_KEYS[r], n)
            ref.demote(i, RUN_KEYS[r], n)
        else:
            # the runs in their usual order (a session resending its context) or shuffled
            order = list(range(len(RUN_KEYS)))
            if data.draw(st.booleans()):
                order = data.draw(st.permutations(order))
            order = order[: data.draw(st.integers(1, len(RUN_KEYS)))]
            keys = [RUN_KEYS[r] for r in order]
            ends = list(np.cumsum([RUN_BLOCKS[r] for r in order]).tolist())
            ends[-1] -= data.draw(st.integers(0, RUN_BLOCKS[order[-1]] - 1))  # a last run cut short
            keyed = ends[-1]
            # GPU hits: none, whole runs, up to a run held below, or any block
            below = [e - RUN_BLOCKS[r] for e, r in zip(ends, order, strict=True) if RUN_KEYS[r] in new.index]
            hit = st.one_of(st.sampled_from([0, *ends, *below]), st.integers(0, keyed))
            hits = data.draw(st.lists(hit, min_size=replicas, max_size=replicas))
            if data.draw(st.booleans()):  # precise-prefix scores the replicas first, the others do not
                assert new.router_bonus(hits, keys, ends, keyed) == ref.router_bonus(hits, keys, ends, keyed)
            i = data.draw(st.integers(0, replicas - 1))
            top = data.draw(st.integers(0, keyed + 2))
            got = new.extend(i, keys, ends, hits[i], top)
            assert got == ref.extend(i, keys, ends, hits[i], top)
            assert new.step_s(i, got[1], 0.01) == ref.step_s(i, got[1], 0.01)
        _same(new, ref)
    # every run still indexed has pieces, every piece is indexed under its run
    for key, run in new.index.items():
        assert run.key == key and (run.remote or run.private)


@pytest.mark.parametrize("names", TIERS)
def test_long_random_call_sequences_equal_the_per_block_store(names: tuple[str, ...]) -> None:
    """2,000 calls on 3 replicas, tiers of 3-20 blocks: sessions resend their runs, so most
    lookups find blocks below GPU memory, part way into pieces (cut in the middle) and across
    tiers; compared after every call."""
    rng = np.random.default_rng(len(names) * 7 + len(names[0]))
    s = _setup(names, [int(c) for c in rng.integers(3, 21, len(names))], 0.01)
    new = ReplayTiers(s, 3, BS, (0.8, 0.7, 0.5))
    ref = BlockReplayTiers(s, 3, BS, (0.8, 0.7, 0.5))
    now = 0.0
    for _ in range(2000):
        u = rng.random()
        if u < 0.2:
            now += float(rng.choice([0.0, 0.01, 0.05, 0.3]))
            new.set_time(now)
            ref.set_time(now)
        elif u < 0.6:
            i = int(rng.integers(0, 3))
            r = int(rng.integers(0, len(RUN_KEYS)))
            n = int(rng.integers(1, RUN_BLOCKS[r] + 1))
            new.demote(i, RUN_KEYS[r], n)
            ref.demote(i, RUN_KEYS[r], n)
        else:
            first = int(rng.integers(0, 3))
            order = list(range(first, int(rng.integers(first + 1, len(RUN_KEYS) + 1))))
            keys = [RUN_KEYS[r] for r in order]
            ends = list(np.cumsum([RUN_BLOCKS[r] for r in order]).tolist())
            keyed = ends[-1]
            hits = [int(rng.integers(0, keyed + 1)) if rng.random() < 0.5 else 0 for _ in range(3)]
            if rng.random() < 0.7:
                assert new.router_bonus(hits, keys, ends, keyed) == ref.router_bonus(hits, keys, ends, keyed)
            i = int(rng.integers(0, 3))
            top = int(rng.integers(keyed - 3, keyed + 1))
            assert new.extend(i, keys, ends, hits[i], top) == ref.extend(i, keys, ends, hits[i], top)
        _same(new, ref)
    assert sum(new.hit_tokens().values()) > 0


def _trace(seed: int, n: int) -> RequestArrays:
    """Requests on 12 prefixes of 1-6 trace blocks of 64 tokens (4 engine blocks each), some
    extended by a block of their own, prompts ending inside their last block."""
    rng = np.random.default_rng(seed)
    rows: list[list[int]] = []
    for r in range(n):
        base = int(rng.integers(0, 12))
        ids = [base * 100 + j for j in range(int(rng.integers(1, 7)))]
        rows.append(ids + ([10_000 + r] if rng.random() < 0.5 else []))
    lens = np.array([len(r) for r in rows], dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return RequestArrays(
        arrival_s=np.cumsum(rng.exponential(0.02, n)),
        prompt_tokens=lens * 64 - rng.integers(0, 64, n),
        output_tokens=rng.integers(1, 200, n),
        prefix_group=np.full(n, -1, dtype=np.int64),
        prefix_tokens=np.zeros(n, dtype=np.int64),
        hash_ids=np.array([x for r in rows for x in r], dtype=np.int64),
        hash_offsets=offsets,
        trace_block_tokens=64,
    )


def _replay(
    monkeypatch: pytest.MonkeyPatch, setup: EngineSetup, arrays: RequestArrays, router: str, block: bool
) -> CacheReplayResult:
    with monkeypatch.context() as m:
        if block:
            m.setattr(cache_replay_run, "ReplayTiers", BlockReplayTiers)
        return cache_replay(replay_fleet(setup, 3, router), chunked(arrays, 50))


@pytest.mark.skipif(
    not cache_replay_core.__file__.endswith(".py"), reason="the compiled core takes only its own tier class"
)
@pytest.mark.parametrize("router", ["precise-prefix", "least-outstanding"])
@pytest.mark.parametrize(("names", "capacities"), [(("cpu", "ssd", "remote"), (40, 60, 150)), (("cpu", "ssd"), (7, 0))])
def test_whole_replays_equal_the_per_block_store(
    monkeypatch: pytest.MonkeyPatch,
    setup: EngineSetup,
    router: str,
    names: tuple[str, ...],
    capacities: tuple[int, ...],
) -> None:
    """400 requests on 3 replicas of 120 GPU blocks: every figure of the answer identical, the
    tiers never over their capacities."""
    tiers = _setup(names, list(capacities), 0.002)
    s = dataclasses.replace(setup, num_gpu_blocks=120, max_num_seqs=8, kv_tiers=tiers)
    arrays = _trace(11, 400)
    got = _replay(monkeypatch, s, arrays, router, False)
    want = _replay(monkeypatch, s, arrays, router, True)
    assert got == want
    assert got.kv_tier_hit_tokens is not None and sum(got.kv_tier_hit_tokens.values()) > got.prefix_cache_hit_tokens
    assert all(held <= cap for _, held, cap in got.kv_tier_occupancy)


def test_engine_block_keys_never_merge_two_runs() -> None:
    """The per-block store keys block ``b`` of a run as ``run key + b``; for two trace ids ``x`` and
    ``y`` (runs keyed ``x * MIX + start`` modulo 2^64) that needs ``(x - y) * MIX`` within the
    prompts' blocks of 0 modulo 2^64. Over ``0 < |x - y| < 2^40`` the nearest is at a convergent
    of MIX / 2^64 (best approximations), 4,304,995 blocks away: 69 million tokens of 16-token
    blocks, far past any prompt, so keying the tiers by run and block instead changes nothing."""
    m = 1 << 64
    a, b = _MIX, m
    q0, q1 = 1, 0
    nearest = m
    while b:
        x = a // b
        a, b = b, a - x * b
        q0, q1 = q1, x * q1 + q0
        if q1 >= 1 << 40:
            break
        r = q1 * _MIX % m
        nearest = min(nearest, r, m - r)
    assert nearest == 4_304_995
