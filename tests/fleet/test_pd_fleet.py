"""The disaggregated fleet's invariants: one prefill and one decode per request (or one failure),
KV blocks released on both sides, links never above their bandwidth, TTFT = its pieces."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from fleet_helpers import open_loop, prefix_arrays, setup_8b
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servecap.catalog import resolve_model
from servecap.core.kv_transfer import kv_footprint
from servecap.errors import ServecapError
from servecap.fleet import INSTANT, FleetSpec, Pool, simulate_fleet
from servecap.fleet.pd.fleet import PdFleet
from servecap.fleet.pd_spec import KvLinkSpec
from servecap.sim.loop import run_loop
from servecap.sim.observer import Observer
from servecap.sim.traffic import OpenLoopSource
from servecap.specs.dtypes import kv_dtype_named
from servecap.workload import generate_arrays

_FP = kv_footprint(resolve_model("meta-llama/Llama-3.1-8B"), 1, kv_dtype_named("bf16"), 3.35e12)


def pd_fleet(prefill: int = 2, decode: int = 2, *, decode_kv_bytes: int | None = None, **kw: Any) -> FleetSpec:
    pool_kw = {k: kw.pop(k) for k in ("crash_at_s",) if k in kw}
    p = Pool("p", setup_8b(), replicas=prefill, cold_start=INSTANT, role="prefill", kv=_FP)
    d = Pool("d", setup_8b(decode_kv_bytes), replicas=decode, cold_start=INSTANT, role="decode", kv=_FP, **pool_kw)
    return FleetSpec((p, d), **kw)


class Recording:
    """The fleet behind the seam, keeping every record it hands back."""

    def __init__(self, fleet: PdFleet) -> None:
        self.fleet = fleet
        self.records: list[Any] = []

    def add(self, request: Any, now_s: float) -> bool:
        return self.fleet.add(request, now_s)

    def next_event_s(self) -> float:
        return self.fleet.next_event_s()

    def advance_to(self, t_s: float) -> None:
        self.fleet.advance_to(t_s)

    def has_work(self) -> bool:
        return self.fleet.has_work()

    def take_finished(self) -> Sequence[Any]:
        out = self.fleet.take_finished()
        self.records.extend(out)
        return out


def run(spec: FleetSpec, rate: float, n: int, prompt: int, output: int, seed: int = 0) -> tuple[PdFleet, Recording]:
    arrays = generate_arrays(open_loop(rate, n, prompt, output), np.random.default_rng(seed))
    fleet = PdFleet(spec, seed, keep_link_log=True)
    rec = Recording(fleet)
    run_loop(OpenLoopSource(arrays), rec, Observer(fleet.gauges, 1.0))
    return fleet, rec


def check_link_logs(fleet: PdFleet) -> None:
    for link in fleet.links():
        assert link.log is not None
        log = sorted(link.log)
        for (_, e0, _), (s1, _, _) in itertools.pairwise(log):
            assert s1 >= e0 - 1e-12, "a link carried two transfers at once"
        for s, e, nbytes in log:
            assert nbytes <= link.bandwidth_bytes_s * (e - s) * (1 + 1e-9), "faster than the link"


def check_released(fleet: PdFleet) -> None:
    for r in fleet.replicas:
        assert not r.held and not r.prealloc and not r.inflight
        assert r.engine.held_blocks == 0
        assert r.engine.pool.used == 0, (r.replica_id, r.role, r.engine.pool.used)
        r.engine.check_invariants()


def test_a_pd_fleet_serves_every_request_once_and_lets_go_of_every_block() -> None:
    fleet, obs = run(pd_fleet(), 20.0, 200, 1500, 64)
    recs = obs.records
    assert sorted(r.request_id for r in recs) == list(range(200))
    assert all(r.error is None for r in recs)
    assert fleet.prefilled == 200 and fleet.transfers == 200
    assert sum(r.completed for r in fleet.replicas if r.role == "decode") == 200
    check_released(fleet)
    check_link_logs(fleet)
    # TTFT is its pieces: prefill, wait for room, link queue, transfer, decode's first step
    t = fleet.times()
    by_id = {r.request_id: r for r in recs}
    for i, rid in enumerate(t.request_id.tolist()):
        rec = by_id[rid]
        assert rec.first_token_s is not None
        parts = t.prefill_s[i] + t.wait_for_room_s[i] + t.link_queue_s[i] + t.transfer_s[i] + t.decode_first_s[i]
        assert rec.first_token_s - rec.arrival_s == pytest.approx(parts, abs=1e-9)
    # a 1,500-token prompt: 196.6 MB at 50 GB/s + 100 us overhead + 5 us latency
    assert float(np.min(t.transfer_s)) == pytest.approx(1500 * 131_072 / 50e9 + 105e-6, rel=1e-6)


def test_a_full_decode_side_holds_the_prefill_blocks_back() -> None:
    # decode replicas with room for about four 2,000-token requests: requests wait for room
    small = 4 * 2100 * 131_072
    fleet, obs = run(pd_fleet(2, 1, decode_kv_bytes=small), 20.0, 60, 2000, 300)
    assert all(r.error is None for r in obs.records)
    t = fleet.times()
    assert float(np.max(t.wait_for_room_s)) > 0.1
    check_released(fleet)


def test_a_full_prefill_pool_holds_what_a_shared_prefix_leaves_free() -> None:
    # four 1,024-token system prompts shared by every request: a finished prefill frees only the
    # blocks no running request shares, so on a full pool it holds fewer than its prompt's
    p = Pool("p", setup_8b(600 * 16 * 131_072), replicas=1, cold_start=INSTANT, role="prefill", kv=_FP)
    d = Pool("d", setup_8b(700 * 16 * 131_072), replicas=1, cold_start=INSTANT, role="decode", kv=_FP)
    fleet = PdFleet(FleetSpec((p, d)), 0)
    rec = Recording(fleet)
    run_loop(OpenLoopSource(prefix_arrays(400, 30.0, 4, 1024, 512, 200)), rec, Observer(fleet.gauges, 1.0))
    assert sorted(r.request_id for r in rec.records) == list(range(400))
    assert all(r.error is None for r in rec.records)
    assert fleet.prefilled == 400 and fleet.transfers == 400
    check_released(fleet)


def test_the_same_seed_gives_the_same_records_and_a_shared_link_queues() -> None:
    spec = pd_fleet(kv_link=KvLinkSpec(kind="tcp", scope="shared"))
    a = simulate_fleet(spec, open_loop(20.0, 120, 3000, 32), 3)
    b = simulate_fleet(spec, open_loop(20.0, 120, 3000, 32), 3)
    assert a.records() == b.records()
    assert a.pd is not None and len(a.pd.links) == 1
    # 3,000 tokens over TCP at 3.125 GB/s: 126 ms each, 20 req/s -> the one link ~ 2.5x overloaded
    assert a.pd.link_queue_s.p99 > 1.0
    assert a.pd.transfer_share_of_ttft > 0.5


def test_crashes_on_either_side_retry_from_the_prefill() -> None:
    spec = pd_fleet(crash_at_s=(2.0,), max_retries=2)
    spec = replace(spec, pools=(replace(spec.pools[0], crash_at_s=(1.0,)), spec.pools[1]))
    fleet, obs = run(spec, 30.0, 150, 1000, 200)
    assert sorted(r.request_id for r in obs.records) == list(range(150))
    assert fleet.retried > 0
    assert sum(1 for r in fleet.replicas if r.state == "failed") == 2
    ok = sum(1 for r in obs.records if r.error is None)
    assert ok == sum(r.completed for r in fleet.replicas if r.role == "decode")
    check_released(replace_live(fleet))


def replace_live(fleet: PdFleet) -> PdFleet:
    """The live replicas only (a failed one's engine is abandoned with its blocks)."""
    fleet.replicas = [r for r in fleet.replicas if r.state != "failed"]
    return fleet


def test_a_half_disaggregated_fleet_is_refused() -> None:
    p = Pool("p", setup_8b(), cold_start=INSTANT, role="prefill", kv=_FP)
    with pytest.raises(ServecapError, match="decode pool"):
        FleetSpec((p,))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rate=st.floats(5.0, 60.0),
    prompt=st.integers(64, 3000),
    output=st.integers(2, 200),
    prefill=st.integers(1, 3),
    decode=st.integers(1, 3),
    small=st.booleans(),
    streaming=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_invariants_hold_for_any_fleet(
    rate: float, prompt: int, output: int, prefill: int, decode: int, small: bool, streaming: bool, seed: int
) -> None:
    kv = 3 * 3300 * 131_072 if small else None
    spec = pd_fleet(prefill, decode, decode_kv_bytes=kv, kv_link=KvLinkSpec(streaming=streaming))
    fleet, obs = run(spec, rate, 40, prompt, output, seed)
    assert sorted(r.request_id for r in obs.records) == list(range(40))
    assert all(r.error is None for r in obs.records)
    assert fleet.prefilled == 40 == fleet.transfers
    check_released(fleet)
    check_link_logs(fleet)


def test_closed_loop_users_on_a_pd_fleet_each_get_every_answer() -> None:
    from servecap.workload import workload_from_flags

    w = workload_from_flags(users=6, think_time_s=0.5, num_requests=60, prompt_tokens=800, output_tokens=30)
    res = simulate_fleet(pd_fleet(1, 1), w, 0)
    recs = res.records()
    assert len(recs) == 60 and all(r.error is None for r in recs)
    # six users, one request each in flight at most: never more than six requests in the fleet
    events = sorted([(r.arrival_s, 1) for r in recs] + [(r.end_s, -1) for r in recs if r.end_s is not None])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    assert peak <= 6


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    p_crash=st.one_of(st.none(), st.floats(0.1, 3.0)),
    d_crash=st.one_of(st.none(), st.floats(0.1, 3.0)),
    retries=st.integers(0, 2),
    seed=st.integers(0, 1000),
)
def test_one_outcome_each_and_blocks_released_under_crashes(
    p_crash: float | None, d_crash: float | None, retries: int, seed: int
) -> None:
    spec = pd_fleet(2, 2, crash_at_s=() if d_crash is None else (d_crash,), max_retries=retries)
    if p_crash is not None:
        spec = replace(spec, pools=(replace(spec.pools[0], crash_at_s=(p_crash,)), spec.pools[1]))
    fleet, rec = run(spec, 25.0, 60, 1200, 80, seed)
    assert sorted(r.request_id for r in rec.records) == list(range(60))
    ok = sum(1 for r in rec.records if r.error is None)
    assert ok == sum(r.completed for r in fleet.replicas if r.role == "decode")  # decoded once each
    assert all(r.error in (None, "replica_failed") for r in rec.records)
    check_released(replace_live(fleet))
    check_link_logs(fleet)
