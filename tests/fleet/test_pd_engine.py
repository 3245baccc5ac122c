"""The engine's two P/D hooks: a request whose prompt KV arrived over the link, and blocks held
outside any running request."""

from __future__ import annotations

from fleet_helpers import setup_8b

from servecap.sim.engine import Engine


def test_a_transferred_request_computes_one_token_then_decodes() -> None:
    eng = Engine(setup_8b())
    bs = eng.block_size
    assert eng.add_transferred(7, 1000, 4, 0.0)
    out = eng.step(0.0)
    # the first step computes only the last prompt token (999 came over the link) and samples
    # the first output token: one token in the step, blocks for the whole prompt
    assert out.num_tokens == 1 and out.num_prefill_tokens == 1
    assert out.first_tokens == (7,)
    assert eng.pool.used == -(-1000 // bs)
    assert eng.stats.prefix_cache_hit_tokens == 0
    t = out.duration_s
    for _ in range(3):
        t += eng.step(t).duration_s
    (done,) = eng.take_finished()
    assert done.request_id == 7 and done.num_output_tokens == 4
    assert eng.pool.used == 0
    eng.check_invariants()


def test_held_blocks_are_counted_and_keep_admission_out_until_released() -> None:
    eng = Engine(setup_8b(kv_cache_memory_bytes=600 * 16 * 131_072))  # 600 blocks of 16 tokens
    total = eng.pool.total
    assert eng.hold_blocks(total - 10)
    assert not eng.hold_blocks(11)
    eng.check_invariants()
    assert eng.add(1, 400, 2, None, 0, 0.0)  # needs 25 blocks: only 10 are left
    assert eng.step(0.0).num_tokens == 0  # nothing could start
    eng.release_held_blocks(total - 10)
    assert eng.held_blocks == 0
    assert eng.step(0.0).num_prefill_tokens == 400
    eng.check_invariants()
