"""What a P/D fleet's run reports beside the fleet's own results: per-role latencies, the
transfers and the links.

- per request that finished: the prefill side's time (arrival to the prefill's end: its queue
  and its steps), the wait for room on the decode side, the link's queue, the transfer itself
  (latency + occupancy + re-layout), the decode side's time to the first token; p50 and p99 of
  each;
- the transfer's share of TTFT: ``Σ (wait for room + link queue + transfer) / Σ TTFT`` over
  those requests (the part of the first token's wait the split itself adds);
- per link: transfers, bytes, the busy fraction over the run (``busy_s / horizon``) and the
  mean time a transfer queued for it;
- with the hand-off through the shared store: the blocks the decode side got, the share of
  them the store held before the prefill put its own (the store's hit rate), the bytes put.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servecap.fleet.pd.fleet import PdFleet


@dataclass(frozen=True, slots=True)
class Quantiles:
    p50: float
    p99: float
    mean: float

    @classmethod
    def of(cls, values: np.ndarray) -> Quantiles:
        if not len(values):
            return cls(0.0, 0.0, 0.0)
        return cls(float(np.percentile(values, 50)), float(np.percentile(values, 99)), float(np.mean(values)))


@dataclass(frozen=True, slots=True)
class LinkStats:
    name: str
    transfers: int
    gigabytes: float
    utilization: float
    mean_queue_s: float


@dataclass(frozen=True, slots=True)
class PdStats:
    prefill_replicas: int
    decode_replicas: int
    prefilled: int  # prefills finished (a retried request counts once per try)
    transfers: int
    prefill_s: Quantiles  # arrival -> prefill done
    wait_for_room_s: Quantiles  # prefill done -> decode room reserved (backpressure)
    link_queue_s: Quantiles
    transfer_s: Quantiles  # on the link: latency + occupancy + re-layout
    decode_first_s: Quantiles  # KV landed -> first token
    kv_mb_per_request: float
    transfer_share_of_ttft: float
    links: tuple[LinkStats, ...]
    # the hand-off through the shared store (kv_link.via: store): blocks the decode side got,
    # those already there (the store's hit rate), gigabytes the prefills put
    store_blocks: int = 0
    store_hit_blocks: int = 0
    store_put_gb: float = 0.0

    @property
    def store_hit_rate(self) -> float:
        """Blocks the decode side got from the store that no prefill had to put: hits / blocks."""
        return self.store_hit_blocks / self.store_blocks if self.store_blocks else 0.0

    @property
    def busiest_link_utilization(self) -> float:
        return max((ln.utilization for ln in self.links), default=0.0)


def pd_stats(fleet: PdFleet, horizon_s: float) -> PdStats:
    t = fleet.times()
    hand_off = t.wait_for_room_s + t.link_queue_s + t.transfer_s
    ttft = t.prefill_s + hand_off + t.decode_first_s
    links = tuple(
        LinkStats(
            name=ln.name,
            transfers=ln.transfers,
            gigabytes=ln.bytes / 1e9,
            utilization=ln.busy_s / horizon_s if horizon_s > 0 else 0.0,
            mean_queue_s=ln.queued_s / ln.transfers if ln.transfers else 0.0,
        )
        for ln in fleet.links()
        if ln.transfers
    )
    return PdStats(
        prefill_replicas=sum(1 for r in fleet.replicas if r.role == "prefill"),
        decode_replicas=sum(1 for r in fleet.replicas if r.role == "decode"),
        prefilled=fleet.prefilled,
        transfers=fleet.transfers,
        prefill_s=Quantiles.of(t.prefill_s),
        wait_for_room_s=Quantiles.of(t.wait_for_room_s),
        link_queue_s=Quantiles.of(t.link_queue_s),
        transfer_s=Quantiles.of(t.transfer_s),
        decode_first_s=Quantiles.of(t.decode_first_s),
        kv_mb_per_request=float(np.mean(t.kv_bytes)) / 1e6 if len(t.kv_bytes) else 0.0,
        transfer_share_of_ttft=float(hand_off.sum() / ttft.sum()) if len(ttft) and ttft.sum() > 0 else 0.0,
        links=links,
        store_blocks=fleet.store_blocks,
        store_hit_blocks=fleet.store_hit_blocks,
        store_put_gb=fleet.store_put_bytes / 1e9,
    )


def pd_rows(s: PdStats) -> list[tuple[str, str]]:
    """The P/D section as (what, value) rows: the CLI table and the HTML page print these."""

    def q(x: Quantiles) -> str:
        return f"p50 {x.p50 * 1e3:,.1f} ms, p99 {x.p99 * 1e3:,.1f} ms"

    rows = [
        ("replicas", f"{s.prefill_replicas} prefill, {s.decode_replicas} decode"),
        ("prefill (arrival to KV ready)", q(s.prefill_s)),
        ("wait for decode room", q(s.wait_for_room_s)),
        ("link queue", q(s.link_queue_s)),
        ("KV transfer", q(s.transfer_s)),
        ("decode: KV landed to first token", q(s.decode_first_s)),
        ("KV per request", f"{s.kv_mb_per_request:,.1f} MB"),
        ("hand-off share of TTFT", f"{s.transfer_share_of_ttft:.1%}"),
        ("busiest link", f"{s.busiest_link_utilization:.1%} busy"),
    ]
    if s.store_blocks:
        rows.append(
            (
                "hand-off via the shared store",
                f"{s.store_hit_rate:.1%} of {s.store_blocks:,} blocks already there; {s.store_put_gb:,.1f} GB put",
            )
        )
    return rows
