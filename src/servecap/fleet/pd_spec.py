"""What a disaggregated (prefill/decode) fleet adds to a fleet: roles, the KV link, the P/D router.

A pool's ``role`` (:data:`ROLES`): ``both`` (a co-located replica: today's default), ``prefill``
(it computes prompts and sends their KV) or ``decode`` (it receives the KV and generates). A
fleet with any prefill or decode pool is a P/D fleet: it needs both roles and no ``both`` pool
(:func:`check_roles`), and runs as :class:`servecap.fleet.pd.fleet.PdFleet`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from servecap.core.kv_transfer import link_kind
from servecap.errors import ServecapError
from servecap.policy.routers import ROUTERS

Role = Literal["both", "prefill", "decode"]
ROLES: tuple[Role, ...] = ("both", "prefill", "decode")
LinkScope = Literal["per-gpu", "shared"]
LinkVia = Literal["direct", "store"]


@dataclass(frozen=True, slots=True)
class KvLinkSpec:
    """The link KV crosses on: a kind's defaults (:data:`servecap.core.kv_transfer.LINK_KINDS`)
    with any of them overridden. ``scope``: ``per-gpu`` — every replica has one NIC per GPU, a
    transfer holds the sender's and the receiver's (TP ranks send in parallel); ``shared`` — one
    link for the whole fleet (a single uplink or TCP through one host), every transfer queues on
    it. ``streaming``: the engine sends each layer's KV as it is computed (overlap with the
    prefill). ``via``: ``direct`` — the decode side pulls the prefill's KV point to point
    (NixlConnector, MooncakeConnector); ``store`` — the prefill puts the prompt's blocks the
    fleet's shared remote store lacks and the decode side gets them all from it (vLLM's
    MooncakeStoreConnector, :func:`servecap.core.kv_tiers.store_hand_off_s`): the pools need a
    remote tier (``remote_kv_tib``), and the store's bandwidth, not the link's, prices it."""

    kind: str = "infiniband"
    bandwidth_bytes_s: float | None = None
    latency_s: float | None = None
    overhead_s: float | None = None
    scope: LinkScope = "per-gpu"
    streaming: bool = False
    via: LinkVia = "direct"

    def __post_init__(self) -> None:
        link_kind(self.kind)
        if self.via not in ("direct", "store"):
            raise ServecapError("kv_link.via", self.via, "one of direct, store")
        for name in ("bandwidth_bytes_s", "latency_s", "overhead_s"):
            v = getattr(self, name)
            if v is not None and (not math.isfinite(v) or v < 0 or (name == "bandwidth_bytes_s" and v == 0)):
                raise ServecapError(f"kv_link.{name}", v, "must be a finite number >= 0 (bandwidth > 0)")
        if self.scope not in ("per-gpu", "shared"):
            raise ServecapError("kv_link.scope", self.scope, "one of per-gpu, shared")

    @property
    def bandwidth(self) -> float:
        return self.bandwidth_bytes_s if self.bandwidth_bytes_s is not None else link_kind(self.kind).bandwidth_bytes_s

    @property
    def latency(self) -> float:
        return self.latency_s if self.latency_s is not None else link_kind(self.kind).latency_s

    @property
    def overhead(self) -> float:
        return self.overhead_s if self.overhead_s is not None else link_kind(self.kind).overhead_s


@dataclass(frozen=True, slots=True)
class PdRouterSpec:
    """One router policy per side (SGLang's router in PD mode takes ``--prefill-policy`` and
    ``--decode-policy``); names from :data:`servecap.policy.routers.ROUTERS`."""

    prefill: str = "prefix-affinity"
    decode: str = "least-kv"

    def __post_init__(self) -> None:
        for side, name in (("prefill", self.prefill), ("decode", self.decode)):
            if name not in ROUTERS:
                from servecap.errors import did_you_mean

                raise ServecapError(
                    f"pd_router.{side}", name, f"one of {', '.join(ROUTERS)}" + did_you_mean(name, ROUTERS)
                )


def check_roles(roles: list[str]) -> bool:
    """True for a P/D fleet (a prefill or decode pool); raises on a half or mixed one."""
    for r in roles:
        if r not in ROLES:
            raise ServecapError("pools.role", r, f"one of {', '.join(ROLES)}")
    if all(r == "both" for r in roles):
        return False
    if "prefill" not in roles or "decode" not in roles:
        raise ServecapError("pools.role", roles, "a disaggregated fleet needs a prefill pool and a decode pool")
    if "both" in roles:
        raise ServecapError("pools.role", roles, "a disaggregated fleet has only prefill and decode pools")
    return True


class _PoolLayout(Protocol):
    """What :func:`check_pd_layout` reads of a fleet file's pool."""

    @property
    def name(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def engine(self) -> str: ...
    @property
    def replicas(self) -> int | None: ...
    @property
    def autoscaler(self) -> object | None: ...


def starting_replicas(pool: _PoolLayout) -> int:
    """The replicas a pool starts with: its count, else its autoscaler's minimum, else one."""
    if pool.replicas is not None:
        return pool.replicas
    if pool.autoscaler is not None:
        return int(getattr(pool.autoscaler, "min_replicas", 1))
    return 1


def check_pd_layout(pools: Sequence[_PoolLayout]) -> bool:
    """A fleet file's layout: True for a P/D fleet, which has

    - a prefill pool and a decode pool and no co-located one (:func:`check_roles`);
    - one model: the decode side continues the prefill side's KV, which only the same weights
      (and layer shapes) can read;
    - at least one replica of each role at the start: every request passes through both, so a
      role with none serves nothing until it scales;
    - one engine: KV moves between engines of one kind (vLLM's NixlConnector speaks to vLLM,
      SGLang's Mooncake/NIXL backends to SGLang), and the P/D routers pair servers of one engine.

    Raises one line naming the pools and the field."""
    if not check_roles([p.role for p in pools]):
        return False
    models = sorted({p.model for p in pools})
    if len(models) > 1:
        named = ", ".join(f"{p.name}={p.model}" for p in pools)
        raise ServecapError(
            "pools.model", named, "a P/D fleet serves one model (a decode pool reads the prefill pool's KV)"
        )
    for role in ("prefill", "decode"):
        n = sum(starting_replicas(p) for p in pools if p.role == role)
        if n < 1:
            names = ", ".join(p.name for p in pools if p.role == role)
            raise ServecapError(
                f"pools.{names}.replicas",
                n,
                f"a P/D fleet starts with at least one {role} replica (every request needs one)",
            )
    engines = sorted({p.engine for p in pools})
    if len(engines) > 1:
        named = ", ".join(f"{p.name}={p.engine}" for p in pools)
        raise ServecapError("pools.engine", named, "a P/D fleet runs one engine (KV moves between servers of one kind)")
    return True
