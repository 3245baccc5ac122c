"""The P/D router: one policy picks the prefill replica, another the decode replica.

This is how the real P/D routers are built:

- SGLang's router in PD mode (``--pd-disaggregation --prefill URL [BOOTSTRAP_PORT] --decode URL``)
  takes ``--prefill-policy`` and ``--decode-policy`` (``cache_aware``, ``power_of_two``,
  ``round_robin``, ``random``) and sends the request to the chosen pair at once, with the
  prefill server's bootstrap host, port and a room id that pair them (SGLang docs,
  advanced_features/pd_disaggregation.md and the router's ``pd_router.rs``);
- vLLM's router (``vllm-router``) in PD mode picks a prefill and a decode worker, each by its
  own policy, sends the prefill with ``max_tokens=1`` and ``kv_transfer_params``, then the
  decode with the returned transfer parameters (docs.vllm.ai, features/disagg_prefill);
- llm-d's P/D scheduler filters the pods by role and scores the prefill pods on prefix-cache
  hits and load and the decode pods on KV-cache use and queue depth (llm-d.ai,
  architecture/advanced/disaggregation).

A request with no shareable prefix goes to the least loaded prefill replica. Prefix affinity
matters on the prefill side only (that is where the prompt is computed and
cached); the decode side balances load and KV memory. :data:`PD_PRESETS` names the pairs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from servecap.policy.routers import RouteRequest, make_router
from servecap.policy.view import ReplicaView

PD_PRESETS: dict[str, tuple[str, str]] = {
    "sglang": ("prefix-affinity", "power-of-two"),  # cache_aware / power_of_two
    "vllm-router": ("round-robin", "round-robin"),  # its default policy on both sides
    "llm-d": ("prefix-affinity", "least-kv"),  # prefix + load scorers / KV-use scorer
}


class PdRouter:
    def __init__(
        self,
        prefill: str,
        decode: str,
        rng: random.Random,
        settings: dict[str, float | int | None] | None = None,
    ) -> None:
        self.prefill = make_router(prefill, rng, settings)
        self.decode = make_router(decode, random.Random(rng.random()), None)

    def choose_prefill(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        if request.block_keys is None and self.prefill.uses_prefix:
            # nothing to be affine to: the load decides (llm-d's prefix scorer scores every pod 0
            # and its load scorer ranks them), rather than the emptiest index, which would
            # send every prefix-less request to one replica
            if loads is None:
                loads = [r.num_waiting + r.num_running for r in replicas]
            return min(range(len(loads)), key=loads.__getitem__)
        return self.prefill.choose(request, replicas, now_s, loads)

    def choose_decode(
        self, request: RouteRequest, replicas: Sequence[ReplicaView], now_s: float, loads: list[int] | None = None
    ) -> int:
        return self.decode.choose(request, replicas, now_s, loads)

    def forget(self, replica_id: int) -> None:
        self.prefill.forget(replica_id)
        self.decode.forget(replica_id)
