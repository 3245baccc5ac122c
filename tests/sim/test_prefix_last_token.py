"""The prefix cache never covers a prompt's last token: vLLM always recomputes it (the model
needs its logits to sample the first output token), so a hit stops at ``(total - 1) //
block_size`` full blocks. A fully cached 64-token prompt with 16-token blocks gets 48 cached
tokens, not 64; a 65-token prompt whose first 64 are cached gets all 64.

Source: vLLM v1 ``KVCacheManager.get_computed_blocks``: when every token hits the cache, the last
one must be recomputed to obtain the logits, so the hit is looked up over ``num_tokens - 1``
tokens. The rule is ``(total - 1) // bs`` in ``sim/engine.py`` ``Engine._admit``."""

from __future__ import annotations

import pytest
from sim_helpers import make_plan

from servecap.sim import Engine, EngineRequest, engine_setup_from_plan

KEYS = (11, 12, 13, 14)  # four 16-token blocks of shared content


def _second_request_hits(prompt_tokens: int) -> int:
    """Cache hit tokens of a second request after a first one left ``KEYS`` cached."""
    setup = engine_setup_from_plan(make_plan())
    assert setup.block_size == 16 and setup.enable_prefix_caching
    engine = Engine(setup)
    engine.add_request(EngineRequest(0, 64, 1, prefix_key=KEYS), 0.0)
    now = 0.0
    while engine.has_work():
        now += engine.step(now).duration_s
    assert engine.stats.kv_blocks_cached == len(KEYS) and engine.stats.prefix_cache_hit_tokens == 0
    engine.add_request(EngineRequest(1, prompt_tokens, 1, prefix_key=KEYS), now)
    engine.step(now)  # admitted: the hit is counted at admission
    return engine.stats.prefix_cache_hit_tokens


@pytest.mark.parametrize(("prompt_tokens", "hit_tokens"), [(64, 48), (65, 64), (63, 48), (48, 32), (17, 16)])
def test_the_last_prompt_token_is_always_recomputed(prompt_tokens: int, hit_tokens: int) -> None:
    assert _second_request_hits(prompt_tokens) == hit_tokens
