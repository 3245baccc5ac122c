"""What each router declares it reads; the fleet trusts these flags (``needs_state``: it reads
replica gauges, kept as last scraped; ``uses_load``: the fleet hands it each replica's request
count; ``uses_prefix``: it needs the request's block keys). A router that reads gauges but does
not say so would route on stale or missing numbers; found by benchmarks/mutation.py."""

from __future__ import annotations

from servecap.policy.routers import ROUTERS

#: name -> (needs_state, uses_load, uses_prefix), from what each rule reads (routers.py docstring)
READS = {
    "round-robin": (False, False, False),  # the turn only
    "random": (False, False, False),
    "least-outstanding": (True, True, False),  # waiting + running per replica
    "least-tokens": (True, False, False),  # in-flight tokens (a gauge, not the count)
    "least-kv": (True, False, False),  # KV usage
    "power-of-two": (True, True, False),  # the two sampled replicas' counts
    "session": (False, False, False),  # a hash of the session id
    "prefix-affinity": (True, True, True),  # its prefix index, and the counts for the balance gate
    "weighted": (True, False, True),  # queue and KV gauges, and its prefix index
    "precise-prefix": (True, False, True),  # queue and KV gauges, each replica's prefix cache
}


def test_every_router_declares_what_it_reads() -> None:
    assert set(READS) == set(ROUTERS), "a new router needs its row here"
    got = {name: (cls.needs_state, cls.uses_load, cls.uses_prefix) for name, cls in ROUTERS.items()}
    assert got == READS
