"""The fleet ``servecap fleet simulate`` runs, from its flags: a fleet file with the flags'
overrides, or one pool (a prefill and a decode pool when disaggregated) built from the
deployment flags.

:class:`FleetFlags` holds the flags, their defaults written once here (the CLI's options read
them); :func:`fleet_from_flags` turns them into a :class:`~servecap.fleet.file_schema.FleetFile`, the
first conflict one :class:`~servecap.errors.ServecapError` naming the flag. No I/O beyond
reading the fleet file the flags name.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from servecap.app.flags import DeploymentFlags
from servecap.core.kv_tier_settings import KvLoad, KvStore
from servecap.errors import ServecapError
from servecap.fleet.file_schema import FleetFile, fleet_from_dict, load_fleet_file
from servecap.fleet.kv_tier_fields import CpuKvGib, RemoteKvTib, SsdKvGib
from servecap.json_object import JsonObject
from servecap.policy.autoscalers import PRESETS
from servecap.policy.pd_router import PD_PRESETS
from servecap.policy.routers import ROUTERS

FLEET_DEFAULT_MODEL = "meta-llama/Llama-3.1-8B"
"""The model of a flag-built pool when ``-m`` is not given."""
FLEET_DEFAULT_GPU = "H100"
"""The GPU of a flag-built pool when ``-g`` is not given."""
MIN_REPLICAS_DEFAULT = 1


def choices_of(model: type[BaseModel], field: str) -> list[str]:
    """The values a ``Literal`` field (optional or not) of ``model`` takes, for a CLI choice."""
    stack: list[object] = [model.model_fields[field].annotation]
    out: list[str] = []
    while stack:
        t = stack.pop(0)
        if typing.get_origin(t) is Literal:
            out.extend(str(x) for x in typing.get_args(t))
        else:
            stack.extend(typing.get_args(t))
    return out


class FleetFlags(BaseModel):
    """The flags of ``servecap fleet simulate`` that shape the fleet (``None``: not given)."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)

    fleet_file: Path | None = None
    deployment: DeploymentFlags = DeploymentFlags()
    replicas: int | None = Field(default=None, ge=1)
    autoscaler: str | None = Field(default=None, json_schema_extra={"enum": list(PRESETS)})
    min_replicas: int | None = Field(default=None, ge=0)
    max_replicas: int | None = Field(default=None, ge=1)
    cold_start: Literal["default", "instant"] = "default"
    price_per_gpu_hour: float | None = Field(default=None, ge=0)
    router: str | None = Field(default=None, json_schema_extra={"enum": list(ROUTERS)})
    scrape_interval_ms: float | None = Field(default=None, ge=0)

    @field_validator("scrape_interval_ms")
    @classmethod
    def _scrape(cls, v: float | None) -> float | None:
        from servecap.specs.bounds import check_scrape_interval_ms

        return None if v is None else check_scrape_interval_ms(v)

    prefill_replicas: int | None = Field(default=None, ge=1)
    decode_replicas: int | None = Field(default=None, ge=1)
    decode_tp: int | None = Field(default=None, ge=1)
    kv_link: Literal["nvlink", "infiniband", "roce", "tcp"] | None = None
    kv_via: Literal["direct", "store"] | None = None  # the P/D hand-off: point to point, or the shared store
    pd_router: str | None = Field(default=None, json_schema_extra={"enum": list(PD_PRESETS)})
    ttft_slo_ms: float | None = None
    tpot_slo_ms: float | None = None
    # KV tiers, set on every pool (docs/kv-tiers.md); ranges as the pool fields'
    cpu_kv_gib: CpuKvGib = None
    ssd_kv_gib: SsdKvGib = None
    remote_kv_tib: RemoteKvTib = None
    kv_load: KvLoad | None = None
    kv_store: KvStore | None = None

    def kv_tier_settings(self) -> JsonObject:
        """The tier flags given, as pool fields."""
        out: JsonObject = {}
        for key in ("cpu_kv_gib", "ssd_kv_gib", "remote_kv_tib", "kv_load", "kv_store"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def fleet_from_flags(flags: FleetFlags) -> tuple[FleetFile, Path | None]:
    """The fleet the flags name and the directory its file's relative paths start from (``None``
    for a flag-built fleet); raises ServecapError (one line) on flags that contradict."""
    if flags.fleet_file is not None:
        ff = _from_file(flags, flags.fleet_file)
        base_dir: Path | None = flags.fleet_file.parent
    else:
        ff = _from_pool_flags(flags)
        base_dir = None
    if flags.router is not None and any(p.role != "both" for p in ff.pools):
        # a P/D fleet routes on each side (SGLang's router: ``--policy`` sets both sides unless
        # ``--prefill-policy``/``--decode-policy`` name one)
        if flags.pd_router is not None:
            raise ServecapError("router", flags.router, "give --router (both sides) or --pd-router, not both")
        if flags.scrape_interval_ms is not None:
            raise ServecapError(
                "scrape_interval_ms", flags.scrape_interval_ms, "a P/D fleet's routers read live gauges"
            )
        both = {"prefill": flags.router, "decode": flags.router}
        named = {**ff.router_model().model_dump(), "name": flags.router}
        ff = fleet_from_dict({**ff.model_dump(), "router": named, "pd_router": both})
    elif flags.router is not None or flags.scrape_interval_ms is not None:
        current = ff.router_model()
        scrape_ms = current.scrape_interval_ms if flags.scrape_interval_ms is None else flags.scrape_interval_ms
        router = current.model_copy(update={"name": flags.router or current.name, "scrape_interval_ms": scrape_ms})
        ff = ff.model_copy(update={"router": router})
    tiers = flags.kv_tier_settings()
    if tiers:  # every pool gets the tiers the flags give (a fleet file's own are overridden)
        raw = ff.model_dump()
        raw["pools"] = [{**pool, **tiers} for pool in raw["pools"]]
        ff = fleet_from_dict(raw)
    if flags.fleet_file is not None and (flags.ttft_slo_ms is not None or flags.tpot_slo_ms is not None):
        ff = fleet_from_dict({**ff.model_dump(), "slo": {"ttft_ms": flags.ttft_slo_ms, "tpot_ms": flags.tpot_slo_ms}})
    return ff, base_dir


def _from_file(flags: FleetFlags, path: Path) -> FleetFile:
    """The fleet file, its KV link and P/D router overridden by the flags that name them."""
    d = flags.deployment
    if d.model is not None or d.gpu is not None or flags.replicas is not None:
        raise ServecapError("fleet", str(path), "give --fleet or -m/-g/--replicas, not both")
    ff = load_fleet_file(path)
    if flags.prefill_replicas is not None or flags.decode_replicas is not None or flags.decode_tp is not None:
        raise ServecapError("fleet", str(path), "a fleet file sets its pools' roles and replicas itself")
    if flags.kv_link is not None or flags.kv_via is not None or flags.pd_router is not None:
        link = {
            **(ff.kv_link.model_dump() if ff.kv_link is not None else {}),
            **({"kind": flags.kv_link} if flags.kv_link else {}),
            **({"via": flags.kv_via} if flags.kv_via else {}),
        }
        # --pd-router names each side over the file's router: (whose name set both sides)
        router = ff.router_model().model_dump(exclude=set() if flags.pd_router is None else {"name"})
        pd_router = flags.pd_router or ff.pd_router
        ff = fleet_from_dict({**ff.model_dump(), "router": router, "kv_link": link, "pd_router": pd_router})
    return ff


def _from_pool_flags(flags: FleetFlags) -> FleetFile:
    """One pool from the deployment flags (a prefill and a decode pool when disaggregated)."""
    pool: JsonObject = {k: v for k, v in flags.deployment.to_settings().items() if v is not None}
    pool.setdefault("model", FLEET_DEFAULT_MODEL)
    pool.setdefault("gpu", FLEET_DEFAULT_GPU)
    if flags.autoscaler is not None:
        if flags.max_replicas is None:
            raise ServecapError("max_replicas", None, "--autoscaler needs --max-replicas")
        pool["autoscaler"] = {
            "preset": flags.autoscaler,
            "max_replicas": flags.max_replicas,
            "min_replicas": flags.min_replicas or MIN_REPLICAS_DEFAULT,
        }
    elif flags.min_replicas is not None or flags.max_replicas is not None:
        raise ServecapError("autoscaler", None, "--min-replicas/--max-replicas need --autoscaler")
    if flags.replicas is not None:
        pool["replicas"] = flags.replicas
    if flags.price_per_gpu_hour is not None:
        pool["price_per_gpu_hour"] = flags.price_per_gpu_hour
    if flags.cold_start == "instant":
        pool["cold_start"] = "instant"
    raw: JsonObject = {"pools": [pool]}
    if (flags.prefill_replicas is None) != (flags.decode_replicas is None):
        raise ServecapError("decode_replicas", flags.decode_replicas, "give --prefill-replicas and --decode-replicas")
    if flags.prefill_replicas is not None and flags.decode_replicas is not None:
        if flags.replicas is not None or flags.autoscaler is not None:
            raise ServecapError(
                "replicas", flags.replicas, "give --prefill/--decode-replicas or --replicas/--autoscaler"
            )
        decode: JsonObject = {**pool, "name": "decode", "role": "decode", "replicas": flags.decode_replicas}
        if flags.decode_tp is not None:
            decode["tp"] = flags.decode_tp
        raw["pools"] = [{**pool, "name": "prefill", "role": "prefill", "replicas": flags.prefill_replicas}, decode]
    elif flags.decode_tp is not None:
        raise ServecapError("decode_tp", flags.decode_tp, "needs --prefill-replicas and --decode-replicas")
    elif flags.kv_via is not None:
        raise ServecapError("kv_via", flags.kv_via, "needs --prefill-replicas and --decode-replicas")
    if flags.kv_link is not None or flags.kv_via is not None:
        raw["kv_link"] = {
            **({"kind": flags.kv_link} if flags.kv_link else {}),
            **({"via": flags.kv_via} if flags.kv_via else {}),
        }
    if flags.pd_router is not None:
        raw["pd_router"] = flags.pd_router
    if flags.ttft_slo_ms is not None or flags.tpot_slo_ms is not None:
        raw["slo"] = {"ttft_ms": flags.ttft_slo_ms, "tpot_ms": flags.tpot_slo_ms}
    return fleet_from_dict(raw)
