"""The read-only members a router sees of an engine (``num_inflight_tokens``, ``kv_usage``,
``prefix_hit_blocks``) and the waiting queue's policy objects, with hand-worked numbers."""

from __future__ import annotations

from sim_helpers import make_plan

from servecap.core.plan import Plan
from servecap.sim import Engine, EngineRequest, engine_setup_from_plan
from servecap.sim.queues import FcfsQueue, PriorityQueue, make_queue
from servecap.sim.request_state import RequestState


def test_inflight_tokens_count_uncomputed_prompt_and_unproduced_output(llama8b_plan: Plan) -> None:
    engine = Engine(engine_setup_from_plan(llama8b_plan))
    assert engine.num_inflight_tokens == 0
    engine.add_request(EngineRequest(0, 100, 10), 0.0)
    assert engine.num_inflight_tokens == 110  # 100 prompt + 10 output, nothing done
    t = engine.run_step(0.0)  # the whole prompt (within the token budget) and the first token
    assert engine.num_inflight_tokens == 9
    t = engine.run_step(t)  # one decode step
    assert engine.num_inflight_tokens == 8
    engine.add_request(EngineRequest(1, 50, 5), t)
    assert engine.num_inflight_tokens == 8 + 55
    while engine.has_work():
        t = engine.run_step(t)
        engine.check_invariants()  # asserts the running sum equals its definition, request by request
    assert engine.num_inflight_tokens == 0


def test_inflight_tokens_of_a_chunked_prefill() -> None:
    engine = Engine(engine_setup_from_plan(make_plan(max_num_batched_tokens=256, max_num_seqs=8)))
    engine.add_request(EngineRequest(0, 1000, 20), 0.0)
    engine.run_step(0.0)  # 256 of the 1,000 prompt tokens
    assert engine.num_running == 1
    assert engine.num_inflight_tokens == (1000 - 256) + 20
    engine.check_invariants()


def test_kv_usage_is_the_fraction_of_blocks_in_use(llama8b_plan: Plan) -> None:
    setup = engine_setup_from_plan(llama8b_plan)
    engine = Engine(setup)
    assert engine.kv_usage == 0.0
    engine.add_request(EngineRequest(0, 100, 10), 0.0)
    engine.run_step(0.0)
    # 100 prompt tokens in blocks of 16: 7 blocks per KV-cache group
    blocks = 7 * len(setup.layout.groups)
    assert engine.pool.used == blocks
    assert engine.kv_usage == blocks / setup.num_gpu_blocks


def test_prefix_hit_blocks_reads_the_cache_without_touching_its_order(llama8b_plan: Plan) -> None:
    engine = Engine(engine_setup_from_plan(llama8b_plan))
    keys = (11, 12, 13, 14, 15)  # five 16-token blocks of a shared 80-token prefix
    engine.add_request(EngineRequest(0, 100, 2, prefix_key=keys), 0.0)
    engine.add_request(EngineRequest(1, 40, 2, prefix_key=(21, 22)), 0.0)
    t = 0.0
    while engine.has_work():
        t = engine.run_step(t)
    lru_before = list(engine.pool.lru)
    assert lru_before  # finished: their keyed blocks stay cached, evictable
    assert engine.prefix_hit_blocks(keys) == 5
    assert engine.prefix_hit_blocks((11, 12, 13, 99, 15)) == 3  # leading blocks only
    assert engine.prefix_hit_blocks((99, 11)) == 0
    assert engine.prefix_hit_blocks((21, 22, 23)) == 2
    assert engine.prefix_hit_blocks(()) == 0
    assert list(engine.pool.lru) == lru_before
    off = Engine(engine_setup_from_plan(llama8b_plan, enable_prefix_caching=False))
    off.add_request(EngineRequest(0, 100, 2, prefix_key=keys), 0.0)
    off.run_step(0.0)
    assert off.prefix_hit_blocks(keys) == 0


def _req(i: int, priority: int = 0) -> RequestState:
    return RequestState(i, 10, 5, None, priority, i, 0.0)


def test_fcfs_queue_order_prepend_remove_and_victim() -> None:
    q = make_queue("fcfs")
    assert isinstance(q, FcfsQueue) and len(q) == 0
    a, b, c = _req(0), _req(1), _req(2)
    for r in (a, b, c):
        q.add(r)
    assert q.peek() is a and len(q) == 3
    assert q.pop() is a
    q.prepend(a)  # a preempted request goes back in front
    assert q.peek() is a
    q.remove(b)
    assert [q.pop(), q.pop()] == [a, c] and len(q) == 0
    assert q.victim_index([a, b, c]) == 2  # the youngest running request


def test_priority_queue_order_ties_by_arrival_and_victim() -> None:
    q = make_queue("priority")
    assert isinstance(q, PriorityQueue)
    low, high, high2 = _req(0, priority=5), _req(1, priority=1), _req(2, priority=1)
    for r in (low, high, high2):
        q.add(r)
    assert q.peek() is high
    assert q.pop() is high
    q.prepend(high)  # back by its priority, not to the front
    q.remove(high2)
    assert [q.pop(), q.pop()] == [high, low] and len(q) == 0
    # the victim: the highest (priority, arrival) value among the running requests
    assert q.victim_index([high, low, high2]) == 1
    assert q.victim_index([high, high2]) == 1


def test_finished_requests_carry_what_the_emulator_reads(llama8b_plan: Plan) -> None:
    engine = Engine(engine_setup_from_plan(llama8b_plan))
    engine.add_request(EngineRequest(7, 40, 2), 0.5)
    t = engine.run_step(1.0)
    engine.run_step(t)
    (r,) = engine.take_finished()
    assert (r.request_id, r.cached_prompt_tokens, r.scheduled_s) == (7, 0, 1.0)
    assert r.queue_time_s == 0.5 and r.error is None
